"""Do the conditions being compared fail at rates different enough to bias the comparison?

Compare's metrics are over ok sessions only. A condition whose sessions fail more often (a verbose
tutor truncating at the cap, an endpoint that times out) is then measured on the cases it got
through: its mean is a mean over a different, often easier, set of cells than its rival's. So
compare reports the failure rates of every condition per (task, level) and warns about a pair
whose rates differ enough to matter.

The rule, applied per (task, level) and pair of conditions, plus the level-marginal "all", is the
statistics module's (:mod:`ray_knowsim.stats.rates`: Fisher's exact test, two-sided, with a
5-point floor on the difference, p unadjusted); this module counts and words the warnings.

Pure: pandas in, pandas out.
"""

from __future__ import annotations

from itertools import combinations
from typing import Sequence

import pandas as pd
import pyarrow as pa

from ray_knowsim.tables.outcomes import READ as OUTCOME_READ
from ray_knowsim.tables.outcomes import OutcomeCounter, count_outcomes
from ray_knowsim.schema.failures import FAILURE_CLASSES, session_failure_class
from ray_knowsim.stats.defaults import ALPHA
from ray_knowsim.stats.rates import DEFAULT_MIN_DIFF, rate_gap

ALL_LEVELS = "all"
OUTCOME_COLUMNS = ("task", "knowledge_level", "condition", "status", "failure_class", "error")


def session_classes(outcomes: pd.DataFrame) -> pd.Series:
    """Per session: its failure class (None when ok); rows without the column get it from their
    error (:func:`ray_knowsim.schema.failures.session_failure_class`, the rule io.outcomes counts by)."""
    recorded = outcomes["failure_class"] if "failure_class" in outcomes.columns else pd.Series(None, index=outcomes.index)
    errors = outcomes["error"] if "error" in outcomes.columns else pd.Series(None, index=outcomes.index)
    derived = [session_failure_class(c if isinstance(c, str) else None, e if isinstance(e, str) else None)
               for c, e in zip(recorded, errors)]
    return pd.Series([None if st == "ok" else d for st, d in zip(outcomes["status"], derived)], index=outcomes.index)


def failure_counts(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Per (task, knowledge_level, condition) and per (task, "all", condition): sessions, failed
    (and per class) and the failure rate. ``outcomes``: one row per session, ok or failed.
    Counted by :class:`ray_knowsim.tables.outcomes.OutcomeCounter` (the run's failures table's count)."""
    present = [c for c in OUTCOME_READ if c in outcomes.columns]
    counter = count_outcomes([pa.Table.from_pandas(outcomes[present], preserve_index=False)]) if len(outcomes) else OutcomeCounter()
    rows = []
    for scope, keys in (("level", ("task", "knowledge_level", "condition")), (ALL_LEVELS, ("task", "condition"))):
        for group, (n, classes) in sorted(counter.by_class(keys).items()):
            task, level, cond = group if scope == "level" else (group[0], ALL_LEVELS, group[1])
            row = {"task": task, "knowledge_level": level, "condition": cond, "n_sessions": n,
                   "n_failed": int(sum(classes.values()))}
            for cls in FAILURE_CLASSES:
                row[f"n_failed_{cls}"] = int(classes.get(cls, 0))
            row["failure_rate"] = row["n_failed"] / row["n_sessions"] if row["n_sessions"] else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def failure_gaps(counts: pd.DataFrame, conditions: Sequence[str], alpha: float = ALPHA,
                 min_diff: float = DEFAULT_MIN_DIFF) -> pd.DataFrame:
    """Per (task, level, a before b in ``conditions``): both rates, their difference, Fisher's
    two-sided p and ``biased`` (:func:`ray_knowsim.stats.rates.rate_gap`)."""
    order = {c: k for k, c in enumerate(conditions)}
    rows = []
    for (task, level), g in counts.groupby(["task", "knowledge_level"], sort=True):
        by = g.set_index("condition")
        present = sorted((c for c in by.index if c in order), key=order.get)
        for a, b in combinations(present, 2):
            fa, na = int(by.loc[a, "n_failed"]), int(by.loc[a, "n_sessions"])
            fb, nb = int(by.loc[b, "n_failed"]), int(by.loc[b, "n_sessions"])
            if not na or not nb:
                continue
            gap = rate_gap(fa, na, fb, nb, alpha, min_diff)
            rows.append({"task": task, "knowledge_level": level, "condition_a": a, "condition_b": b,
                         "failure_rate_a": gap.rate_a, "failure_rate_b": gap.rate_b, "diff": gap.diff, "n_a": na, "n_b": nb,
                         "p_fisher": gap.p_value, "biased": gap.differs})
    cols = ["task", "knowledge_level", "condition_a", "condition_b", "failure_rate_a", "failure_rate_b", "diff",
            "n_a", "n_b", "p_fisher", "biased"]
    return pd.DataFrame(rows, columns=cols)


def gap_warnings(gaps: pd.DataFrame) -> list[str]:
    """One line per biased pair, e.g. ``math/novice: a fails 40% of 20 sessions, b 5% of 20 (Fisher p 0.02)``."""
    out = []
    for _, r in gaps[gaps["biased"]].iterrows():
        out.append(f"{r['task']}/{r['knowledge_level']}: {r['condition_a']} fails {r['failure_rate_a']:.0%} of {r['n_a']} "
                   f"sessions, {r['condition_b']} {r['failure_rate_b']:.0%} of {r['n_b']} (Fisher p {r['p_fisher']:.2g}): "
                   "their means are over different sets of cells")
    return out


__all__ = ["ALL_LEVELS", "OUTCOME_COLUMNS", "failure_counts", "failure_gaps", "gap_warnings", "session_classes"]
