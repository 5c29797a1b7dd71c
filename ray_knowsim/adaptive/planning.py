"""The planning entry point: replay the adaptive decision procedure over per-session rows.

``replay(rows, spec)`` answers "what would an adaptive run with this spec have decided, with how
many sessions?" without running any session: the rounds are the runner's own
(:func:`ray_knowsim.adaptive.rounds.drive`), each round's sessions are read from ``rows`` instead
of being run. Use it over a completed fixed run (``ray-knowsim adaptive-replay RUN_DIR``) to
choose alpha, the round size or the design before spending, or over simulated rows.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from ray_knowsim.adaptive.observe import pair_counts
from ray_knowsim.adaptive.rounds import Schedule, decision_records, drive, failure_gap_records, procedure_for, record, select, spec_of
from ray_knowsim.config.adaptive import AdaptiveConfig
from ray_knowsim.schema.states import level_order

REQUIRED = ("task", "knowledge_level", "condition", "item_id", "trial", "status")


def replay(rows: pd.DataFrame, spec: Mapping[str, Any] | None = None, *, seed: int = 0,
           levels: Sequence[str] | None = None) -> dict[str, Any]:
    """What ``decisions.json`` would hold for an adaptive run with ``spec`` (the ``adaptive:``
    section as a dict) over the sessions in ``rows``: one row per session with ``task,
    knowledge_level, condition, item_id, trial, status`` and one column per metric (ok sessions
    carry their metrics). The item order is the runner's for ``seed`` (the run's seed). Adds
    ``fixed_design``: what the fixed design of the same pool decides with the same rule."""
    missing = [c for c in REQUIRED if c not in rows.columns]
    if missing:
        raise ValueError(f"replay: rows lack the columns {missing} (need {list(REQUIRED)} and one column per metric)")
    ad = AdaptiveConfig.model_validate(dict(spec or {}))
    absent = [m for m in ad.metrics if m not in rows.columns]
    if absent:
        raise ValueError(f"replay: rows have no column for the metrics {absent}")
    rows = rows.assign(trial=rows["trial"].astype(int), item_id=rows["item_id"].astype(str))
    present = list(dict.fromkeys(rows["condition"].astype(str)))
    conditions = list(ad.conditions) if ad.conditions is not None else present
    unknown = [c for c in conditions if c not in present]
    if unknown:
        raise ValueError(f"replay: conditions {unknown} have no rows (present: {present})")
    tasks = list(dict.fromkeys(rows["task"].astype(str)))
    levels = list(levels) if levels is not None else level_order(list(dict.fromkeys(rows["knowledge_level"].astype(str))))
    trials = ad.round.trials or int(rows["trial"].nunique())
    spec_locked = spec_of(ad, conditions, trials)
    items = {t: list(dict.fromkeys(rows.loc[rows["task"] == t, "item_id"])) for t in tasks}
    schedule = Schedule.of(items, seed, ad.round.items, levels, trials)
    proc = procedure_for(ad, tasks, levels, conditions)
    ok = rows[rows["status"] == "ok"]

    status, wanted, rounds = drive(proc, schedule, lambda _r, wanted, _new: select(ok, wanted), tasks=tasks)
    asked = select(rows, wanted)
    gaps = failure_gap_records(asked, conditions)
    out = record(spec_locked, proc, status, len(wanted), schedule.fixed_sessions(len(conditions)), rounds,
                 gaps=gaps).model_dump(mode="json")
    fixed = proc.fixed(pair_counts(ok[ok["trial"] < trials], procedure_for(ad, tasks, levels, conditions)))
    out["sessions_available"] = int(len(asked))  # of the asked sessions, how many rows held
    out["fixed_design"] = {
        "decided": sum(d.decided for d in fixed.decisions),
        "decisions": [{"task": d.task, "knowledge_level": d.level, "metric": d.metric, "decided": d.decided,
                       "winner": d.winner, "order": d.order, "cycle": d.cycle,
                       "pairs": [{"condition_a": p.condition_a, "condition_b": p.condition_b, "matched": p.matched, "wins": p.wins,
                                  "losses": p.losses, "ties": p.ties, "verdict": p.verdict, "level": p.level} for p in rec.pairs]}
                      for d, rec in zip(fixed.decisions, decision_records(fixed))],
    }
    return out


__all__ = ["REQUIRED", "replay"]
