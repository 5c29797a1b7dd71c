"""The run's cost re-estimated while it runs: read what the committed sessions spent, project the
total (preflight/projection.py, pure), say it, warn once above 125 % of the first estimate, and
record every projection shown in the manifest.

Why: the dry run's estimate rests on priors; a run that turns out dearer should say so while
stopping it still saves money, not in the cost table at the end.

* **What was spent**: the run's spend journals (io/spend.py), the sessions they name as
  committed, each from the latest journal that committed it (a rerun supersedes its first
  attempt). Every request is journaled as it is answered, with its model, so the tokens are per
  (role, model) and priced with the model's price, as the session rows are.
* **The first estimate**: ``RUN_DIR/estimate.json`` when the dry run wrote one for this config and
  plan (``ray-knowsim run CONFIG --dry-run`` writes it into the run directory); else the estimate
  the checks before spending made; else the dry run's :func:`~ray_knowsim.preflight.estimate.estimate`,
  made once, when the first projection is due (~0.03 s for 24 sessions, ~1.5 s for 168 of 15 turns).
* **When**: the driver calls :meth:`CostWatch.poll` with its progress; the journals are read when a
  shard finished, else at most every :data:`FIRST_READ_EVERY_S` until the first projection and
  :data:`READ_EVERY_S` after it, once at least
  :func:`~ray_knowsim.preflight.projection.first_after` sessions finished. A projection is shown
  (and recorded) when it is the first or moved materially (:func:`~ray_knowsim.preflight.projection.changed`).
* An adaptive round (a run of some planned sessions) is not watched: its design stops when the
  verdicts are in, so the plan's total is not what it will spend.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ray_knowsim.io.spend import Journal, JournalFollower
from ray_knowsim.preflight.estimate import Estimate
from ray_knowsim.preflight.projection import (MATERIAL, OVERRUN, Progress, Projection, Tokens, UnitSpend, changed,
                                              first_after, line, project, warning_line)

log = logging.getLogger(__name__)
#: seconds between two readings of the journals while no shard finishes (a big run's journals
#: take a while to read; its projection does not move faster than this)
READ_EVERY_S = 15.0
#: the same before the first projection: the first one is the one that matters most
FIRST_READ_EVERY_S = 2.0
#: the least time between two readings when shards end (a large run ends many shards a second;
#: each reading parses only what the journals gained since the last)
SHARD_END_READ_GAP_S = 1.0
#: the manifest key (per invocation) of the re-estimates
MANIFEST_KEY = "cost_reestimates"


def condition_of(session_id: str, names: list[str]) -> str | None:
    """The condition of a session id ``task/item/level/condition/trial`` (plan/sessions.py): the
    longest condition name the part before the trial ends with (an item id may hold "/")."""
    head = session_id.rpartition("/")[0]
    found = [n for n in names if head == n or head.endswith("/" + n)]
    return max(found, key=len) if found else None


def committed_progress(journals: Iterable[Journal], planned: int, assistants: Mapping[str, str]) -> Progress:
    """What the committed sessions spent, per (role, model), from the run's spend ``journals``
    (of its config); ``assistants``: condition name -> its assistant model key (each condition has
    ``planned / len(assistants)`` sessions: the plan is a full factorial)."""
    latest: dict[str, tuple[float, Any]] = {}
    for j in journals:
        if j.kind != "shard":
            continue
        started = float(j.header.get("started_at") or 0.0)
        for sid in j.committed:
            if sid in latest and latest[sid][0] > started:
                continue
            latest[sid] = (started, j.spend.get(sid))
    units: dict[tuple[str, str], Tokens] = {}
    by_condition: dict[str, int] = {}
    names = list(assistants)
    for sid, (_, spend) in latest.items():
        cond = condition_of(sid, names)
        by_condition[cond or ""] = by_condition.get(cond or "", 0) + 1
        for role, models in (spend.by_model.items() if spend is not None else ()):
            for model, counts in models.items():
                units[(role, model)] = units.get((role, model), Tokens()).plus(Tokens(**counts))
    per_condition = planned // max(1, len(assistants))
    planned_by, committed_by = {}, {}
    for cond, model in assistants.items():
        planned_by[model] = planned_by.get(model, 0) + per_condition
        committed_by[model] = committed_by.get(model, 0) + by_condition.get(cond, 0)
    return Progress(committed=len(latest), planned=planned, committed_by_assistant=committed_by, planned_by_assistant=planned_by,
                    spent=[UnitSpend(role=r, model=m, tokens=t) for (r, m), t in sorted(units.items())])


def first_estimate(root: Path, config_hash: str, n_sessions: int, made: Estimate | None,
                   make: Callable[[], Estimate]) -> tuple[Estimate, str]:
    """The estimate the run is compared with, and where it came from (see the module docstring)."""
    path = root / "estimate.json"
    try:
        est = Estimate.model_validate_json(path.read_text(encoding="utf-8"))
        if est.config_hash == config_hash and est.n_sessions == n_sessions:
            return est, f"the dry run ({path})"
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        log.warning("%s cannot be read (%s); the run makes its own first estimate", path, exc)
    if made is not None:
        return made, "the checks before spending (the dry run's estimate)"
    return make(), "the dry run's estimate, made by the run (no estimate.json for this config and plan)"


@dataclass
class CostWatch:
    """The driver's re-estimates (see the module docstring): ``say``/``warn`` print a line,
    ``record`` keeps the manifest's entry (the watch's whole state, rewritten)."""

    first: Callable[[], tuple[Estimate, str]]
    progress: Callable[[], Progress]
    prices: Mapping[str, Any]
    after: int  # sessions committed before the first projection
    say: Callable[[str], None]
    warn: Callable[[str], None]
    record: Callable[[dict[str, Any]], None]
    shown: list[Projection] = field(default_factory=list)
    entry: dict[str, Any] = field(default_factory=dict)
    warned: bool = False
    off: bool = False
    _read_at: float = -1e9
    _estimate: Estimate | None = None

    def poll(self, finished: int, shard_ended: bool, now: float) -> Projection | None:
        """Called with the sessions finished so far (committed before included) and whether a shard
        ended since the last call; returns the projection when one was made."""
        every = SHARD_END_READ_GAP_S if shard_ended else READ_EVERY_S if self.shown else FIRST_READ_EVERY_S
        if self.off or finished < self.after or now - self._read_at < every:
            return None
        self._read_at = now
        try:
            progress = self.progress()
            if progress.committed < self.after or not any(u.tokens.total for u in progress.spent):
                return None  # too few yet, or nothing spent (answers from the response cache, a stand-in loop)
            if self._estimate is None:
                self._estimate, source = self.first()
                self.entry = {"first_estimate": {"source": source, "usd": self._estimate.totals.cost_usd,
                                                 "tokens": self._estimate.totals.prompt_tokens + self._estimate.totals.completion_tokens,
                                                 "sessions": self._estimate.n_sessions},
                              "first_after_sessions": self.after, "warn_above": OVERRUN, "shown_when_moved": MATERIAL,
                              "records": []}
            p = project(self._estimate, progress, self.prices)
        except Exception as exc:  # noqa: BLE001 - a re-estimate must never stop a run: say why there is none
            self.off = True
            self.warn(f"cost re-estimate off for this run ({type(exc).__name__}: {exc})")
            return None
        self._show(p)
        return p

    def _show(self, p: Projection) -> None:
        if not changed(self.shown[-1] if self.shown else None, p):
            return
        self.shown.append(p)
        self.say(line(p))
        if p.exceeded and not self.warned:
            self.warned = True
            self.warn(warning_line(p))
        self.entry["records"].append(p.record(time.strftime("%Y-%m-%dT%H:%M:%S%z")))
        self.record(self.entry)


def watch_costs(cfg: Any, plan: Any, inputs: Any, run_root: Path, manifest: dict[str, Any], display: Any,
                made: Estimate | None = None) -> CostWatch:
    """The watch of one invocation: its records go into the manifest's current invocation
    (``cost_reestimates``), written at once (a run killed later keeps them)."""
    from ray_knowsim.io.commits import RunDir
    from ray_knowsim.plan.build import model_prices
    from ray_knowsim.preflight.estimate import estimate
    from ray_knowsim.run.manifest import write_manifest

    config_hash = manifest["config_hash"]
    assistants = {c.name: c.assistant for c in plan.conditions}
    journals = JournalFollower(run_root, config_hash)  # each reading parses what was spent since the last

    def record(entry: dict[str, Any]) -> None:
        manifest["invocations"][-1][MANIFEST_KEY] = entry
        write_manifest(RunDir(run_root), manifest)

    return CostWatch(
        first=lambda: first_estimate(run_root, config_hash, plan.n_sessions, made, lambda: estimate(cfg, plan, inputs)),
        progress=lambda: committed_progress(journals.read(), plan.n_sessions, assistants),
        prices=model_prices(cfg), after=first_after(plan.n_sessions, plan.shard_size),
        say=display.log, warn=display.warn, record=record)


__all__ = ["CostWatch", "FIRST_READ_EVERY_S", "MANIFEST_KEY", "READ_EVERY_S", "committed_progress", "condition_of", "first_estimate", "watch_costs"]
