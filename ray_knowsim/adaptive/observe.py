"""From committed session rows to the per-pair counts the procedure looks at (pure pandas).

Per decision (task, level, metric) and pair (a, b): each condition's item mean over its ok
sessions, and over the items where both have one, the wins, losses and ties of a
(:func:`ray_knowsim.stats.winrate.win_counts`, the one count of the item win rate).
"""

from __future__ import annotations

from typing import Collection

import numpy as np
import pandas as pd

from ray_knowsim.plan.sessions import session_id
from ray_knowsim.stats.adaptive import Key, Procedure
from ray_knowsim.stats.winrate import WinCounts, item_means, pair_counts as _pair_counts

ROW_KEYS = ("task", "item_id", "knowledge_level", "condition", "trial")


def scheduled(rows: pd.DataFrame, wanted: Collection[str]) -> pd.DataFrame:
    """Only the rows of sessions the rounds so far asked for (a later round's rows left by an
    interrupted run are not looked at before their round)."""
    ids = [session_id(*r) for r in rows[list(ROW_KEYS)].itertuples(index=False)]
    return rows[np.array([i in wanted for i in ids], dtype=bool)] if len(rows) else rows


def pair_counts(rows: pd.DataFrame, procedure: Procedure) -> dict[Key, WinCounts]:
    """Cumulative counts of every pair of every decision over ``rows`` (ok sessions)."""
    out: dict[Key, WinCounts] = {}
    if rows.empty:
        return out
    tables: dict[str, dict[tuple, pd.DataFrame]] = {}
    for i, d in enumerate(procedure.decisions):
        if d.metric not in tables:
            tables[d.metric] = item_means(rows, d.metric)
        table = tables[d.metric].get((d.task, d.level))
        if table is None:
            continue
        for a, b in d.pairs:
            c = _pair_counts(table, a, b, d.higher_is_better)
            if c.n:
                out[(i, (a, b))] = c
    return out


__all__ = ["ROW_KEYS", "pair_counts", "scheduled"]
