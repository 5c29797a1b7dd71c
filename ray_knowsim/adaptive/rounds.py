"""The rounds of an adaptive design, whoever supplies the sessions (pure: pandas, no Ray, no I/O).

The runner (:mod:`.driver`) gets each round's sessions by running them; the planning replay
(:mod:`.replay`) by reading them from a completed run's rows. Both go through :func:`drive`, so a
replay decides exactly what the run would have, with the same sessions.

The spec that decides (alpha, metrics, decide, effect, conditions, round, family, design) is
locked in ``decisions.json`` at round 1 (:func:`spec_of`); :func:`spec_changes` names what a
resume would change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd

from ray_knowsim.adaptive.observe import ROW_KEYS, pair_counts
from ray_knowsim.adaptive.schedule import item_order, round_items
from ray_knowsim.stats.defaults import ALPHA
from ray_knowsim.config.adaptive import AdaptiveConfig, DesignConfig
from ray_knowsim.schema.decisions import DecisionRecord, DecisionsFile, FailureGap, PairRecord, RoundRecord, Spend
from ray_knowsim.stats.adaptive import Procedure
from ray_knowsim.stats.winrate import EMPTY, QUANTITY

Session = tuple[str, str, str, str, int]  # ROW_KEYS: task, item_id, knowledge_level, condition, trial


def spec_of(ad: AdaptiveConfig, conditions: Sequence[str], trials: int) -> dict[str, Any]:
    """What decides, as locked at round 1: the section without its budget (a budget may grow on
    resume), with the conditions and the round's trials resolved."""
    spec = ad.model_dump(mode="json", exclude={"budget"})
    spec["conditions"] = list(conditions)
    spec["round"]["trials"] = int(trials)
    return spec


def keep_recorded_design(ad: AdaptiveConfig, recorded: dict[str, Any] | None) -> AdaptiveConfig:
    """The section a resume decides with: the ``design`` fields the config leaves to their defaults
    take the values recorded at round 1, so a run started under an older default keeps its design
    (a field the config names and that differs is still refused, by :func:`spec_changes`)."""
    rec = (recorded or {}).get("design")
    if not isinstance(rec, dict):
        return ad
    named = ad.design.model_fields_set if "design" in ad.model_fields_set else set()
    design = DesignConfig.model_validate({**rec, **ad.design.model_dump(mode="json", include=set(named))})
    return ad.model_copy(update={"design": design})


def spec_changes(locked: dict[str, Any], now: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of the fields that differ between two specs."""
    out = []
    for key in sorted(set(locked) | set(now)):
        a, b = locked.get(key), now.get(key)
        name = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += spec_changes(a, b, name + ".")
        elif a != b:
            out.append(f"{name} ({a!r} -> {b!r})")
    return out


def procedure_for(ad: AdaptiveConfig, tasks: Sequence[str], levels: Sequence[str], conditions: Sequence[str]) -> Procedure:
    return ad.procedure(tasks, levels, conditions)


@dataclass
class Schedule:
    """Which sessions each round asks for: the seeded item order, ``per_round`` items at a time,
    at every level, for the conditions in play, at ``trials``."""

    order: dict[str, list[str]]
    per_round: int
    levels: list[str]
    trials: list[int]

    @classmethod
    def of(cls, items: dict[str, list[str]], seed: int, per_round: int, levels: Sequence[str], trials: int) -> "Schedule":
        return cls(item_order(items, seed), per_round, list(levels), list(range(trials)))

    def items(self, round_no: int) -> dict[str, list[str]]:
        return round_items(self.order, self.per_round, round_no)

    def times(self, round_no: int) -> dict[str, float]:
        """task -> information time after ``round_no``: the share of its pool scheduled."""
        return {t: min(1.0, round_no * self.per_round / len(ids)) if ids else 1.0 for t, ids in self.order.items()}

    def sessions(self, items: dict[str, list[str]], play: dict[tuple[str, str], set[str]]) -> list[Session]:
        return [(t, it, lv, c, tr) for t, its in items.items() for it in its for lv in self.levels
                for c in sorted(play.get((t, lv), set())) for tr in self.trials]

    def fixed_sessions(self, n_conditions: int) -> int:
        return sum(len(v) for v in self.order.values()) * len(self.levels) * n_conditions * len(self.trials)


def drive(proc: Procedure, schedule: Schedule, fetch: Callable[[int, set[Session], list[Session]], pd.DataFrame], *,
          stop_before: Callable[[int, set[Session], list[Session]], bool] | None = None,
          after_round: Callable[[str, set[Session], list[RoundRecord]], None] | None = None,
          max_rounds: int | None = None, tasks: Sequence[str] = ()) -> tuple[str, set[Session], list[RoundRecord]]:
    """Run the rounds: ``fetch(round, wanted, new)`` returns the ok rows of every session asked
    for so far (the runner runs ``new`` first); ``stop_before`` says a budget would be passed;
    ``after_round(status, wanted, rounds)`` records. Returns (status, sessions asked, rounds)."""
    wanted: set[Session] = set()
    rounds: list[RoundRecord] = []
    status = "running"
    tasks = list(tasks) or list(schedule.order)
    round_no = 0
    while True:
        round_no += 1
        if max_rounds is not None and round_no > max_rounds:
            break
        items = schedule.items(round_no)
        play = proc.in_play()
        new = schedule.sessions(items, play)
        if not new:
            # curtailed: the open decisions can no longer be reached with the pool's remaining items
            status = "pool_exhausted" if not any(items.values()) else "decided" if proc.done else "curtailed"
            break
        if stop_before is not None and stop_before(round_no, wanted, new):
            status = "budget"
            break
        wanted |= set(new)
        rows = fetch(round_no, wanted, new)
        left = proc.look(pair_counts(rows, proc), schedule.times(round_no), round_no)
        rounds.append(RoundRecord(
            round=round_no, items={t: v for t, v in items.items() if v}, sessions=len(new),
            in_play={t: {lv: sorted(play.get((t, lv), set())) for lv in schedule.levels if play.get((t, lv))} for t in tasks},
            eliminated=[f"{proc.decisions[i].task}/{proc.decisions[i].level}/{proc.decisions[i].metric}: {c}"
                        for i, cs in left.items() for c in cs],
            decided=[f"{d.task}/{d.level}/{d.metric}" for d in proc.decisions if d.after_round == round_no]))
        if proc.done:
            status = "decided"
        if after_round is not None:
            after_round(status, wanted, rounds)
        if proc.done:
            break
    return status, wanted, rounds


def decision_records(proc: Procedure) -> list[DecisionRecord]:
    out = []
    for i, d in enumerate(proc.decisions):
        pairs = []
        for a, b in d.pairs:
            key = (i, (a, b))
            c = proc.counts.get(key, EMPTY)
            lo, hi = proc.interval(key)
            better = d.better((a, b))
            within = d.verdicts.get((a, b)) is not None and d.verdicts[(a, b)].within
            verdict = "a_better" if better == a else "b_better" if better == b else "within_effect" if within else "open"
            pairs.append(PairRecord(condition_a=a, condition_b=b, matched=c.n, wins=c.wins, losses=c.losses, ties=c.ties,
                                    win_rate=c.win_rate if c.n else None, level=proc.level_of(key), win_low=lo, win_high=hi,
                                    zero_width=bool(hi - lo <= 1e-12), verdict=verdict, better=better, within_effect=within))
        out.append(DecisionRecord(task=d.task, knowledge_level=d.level, metric=d.metric, kind=d.kind, decided=d.decided,
                                  after_round=d.after_round, winner=d.winner, order=d.order, cycle=d.cycle,
                                  in_play=sorted(d.in_play(), key=d.conditions.index), candidates=d.candidates(),
                                  eliminated=dict(d.eliminated), pairs=pairs))
    return out


def failure_gap_records(outcomes: pd.DataFrame, conditions: Sequence[str], alpha: float = ALPHA) -> list[FailureGap]:
    """Compare's failure-rate check over the sessions asked for (every status)."""
    from ray_knowsim.compare.failures import failure_counts, failure_gaps

    if outcomes is None or outcomes.empty:
        return []
    gaps = failure_gaps(failure_counts(outcomes), list(conditions), alpha)
    gaps = gaps[gaps["biased"].astype(bool)] if len(gaps) else gaps
    return [FailureGap(task=str(r["task"]), knowledge_level=str(r["knowledge_level"]), condition_a=str(r["condition_a"]),
                       condition_b=str(r["condition_b"]), failure_rate_a=float(r["failure_rate_a"]),
                       failure_rate_b=float(r["failure_rate_b"]), p_fisher=float(r["p_fisher"])) for _, r in gaps.iterrows()]


def record(spec: dict[str, Any], proc: Procedure, status: str, sessions_run: int, sessions_fixed: int,
           rounds: list[RoundRecord], *, config_hash: str | None = None, spend_run: Spend | None = None,
           spend_fixed: Spend | None = None, gaps: list[FailureGap] | None = None) -> DecisionsFile:
    return DecisionsFile(config_hash=config_hash, quantity=QUANTITY, spec=spec, decide=spec["decide"],
                         metrics=list(spec["metrics"]), alpha=float(spec["alpha"]), family_size=proc.family_size,
                         procedure=proc.describe(),
                         status=status,  # type: ignore[arg-type]
                         sessions_run=sessions_run, sessions_fixed=sessions_fixed, spend_run=spend_run,
                         spend_fixed=spend_fixed, decisions=decision_records(proc), rounds=list(rounds),
                         failure_gaps=list(gaps or []))


def select(rows: pd.DataFrame, wanted: set[Session]) -> pd.DataFrame:
    """The rows of the sessions in ``wanted`` (by their ROW_KEYS)."""
    if rows.empty or not wanted:
        return rows.iloc[0:0]
    keys = pd.MultiIndex.from_frame(rows[list(ROW_KEYS)].astype({"trial": int}))
    return rows[keys.isin(list(wanted))]


__all__ = ["Schedule", "Session", "decision_records", "drive", "failure_gap_records", "keep_recorded_design", "procedure_for",
           "record", "select",
           "spec_changes", "spec_of"]
