"""From committed session rows to the paired win counts the procedure looks at (pure pandas).

Per decision (task, level, metric) and pair (a, b): over the items where both conditions ran,
the sign of the item's mean paired difference (mean over its trials where both sessions are ok
and carry the metric); ``(wins of a, non-tied items)``. The same unit and sign as ``compare``.
"""

from __future__ import annotations

from typing import Collection

import numpy as np
import pandas as pd

from ray_knowsim.engine.plan import session_id
from ray_knowsim.stats.adaptive import Key, Procedure
from ray_knowsim.stats.signs import SignCounts, sign_counts

ROW_KEYS = ("task", "item_id", "knowledge_level", "condition", "trial")


def scheduled(rows: pd.DataFrame, wanted: Collection[str]) -> pd.DataFrame:
    """Only the rows of sessions the rounds so far asked for (a later round's rows left by an
    interrupted run are not looked at before their round)."""
    ids = [session_id(*r) for r in rows[list(ROW_KEYS)].itertuples(index=False)]
    return rows[np.array([i in wanted for i in ids], dtype=bool)] if len(rows) else rows


def pair_counts(rows: pd.DataFrame, procedure: Procedure) -> dict[Key, tuple[int, int]]:
    """Cumulative win counts ``(wins of a, non-tied items)`` of every pair of every decision."""
    return {key: (c.pos, c.n) for key, c in sign_table(rows, procedure).items()}


def sign_table(rows: pd.DataFrame, procedure: Procedure) -> dict[Key, SignCounts]:
    """Per pair of every decision, the signs of the items' mean paired differences (ok rows)."""
    out: dict[Key, SignCounts] = {}
    if rows.empty:
        return out
    groups = {key: g for key, g in rows.groupby(["task", "knowledge_level"], sort=False)}
    for i, d in enumerate(procedure.decisions):
        g = groups.get((d.task, d.level))
        if g is None or d.metric not in g.columns:
            continue
        wide = g.pivot_table(index=["item_id", "trial"], columns="condition", values=d.metric, aggfunc="mean")
        for a, b in d.pairs:
            if a not in wide.columns or b not in wide.columns:
                continue
            diffs = (wide[a] - wide[b]).dropna()
            if diffs.empty:
                continue
            out[(i, (a, b))] = sign_counts(diffs.groupby(level="item_id").mean().to_numpy(dtype=float))
    return out


__all__ = ["ROW_KEYS", "pair_counts", "scheduled", "sign_table"]
