"""The one quantity every verdict is about: the **item win rate** of a pair of conditions.

Per (task, level, metric) each condition has an item mean (the metric over the item's ok
sessions at that level). Over the items where both conditions have a mean (``n`` matched items),
an item is a win for ``a`` when a's mean is better (oriented by
:func:`ray_knowsim.stats.ranks.higher_is_better`), a loss when worse and a tie when the two are
equal to :data:`ray_knowsim.stats.ranks.TIE_DECIMALS` decimals. The win rate ``(W + T/2) / n``
counts ties half, so it is 1/2 exactly when neither condition wins more items, and the mean item
rank of a condition is ``1 + sum over others of (1 - its win rate against them)`` (Borda;
that is stats/ranks.py's).

Why this quantity: its tests are exact at any n and any number of looks (binomial counts), it is
robust to the skewed, discrete metrics KnowSim produces, and a monotone rescaling of a metric
changes nothing. The direction of a verdict is the exact sign test of W against L (conditional on
the ties); a claim "smaller than the effect" is about the tie-inclusive rate over all n items, so
ties -- the strongest evidence of no difference -- make equivalence reachable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ray_knowsim.stats.ranks import TIE_DECIMALS

QUANTITY = ("item win rate: per matched item, a's item mean better (win), worse (loss) or equal to "
            f"{TIE_DECIMALS} decimals (tie); win rate = (wins + ties / 2) / matched items")


@dataclass(frozen=True)
class WinCounts:
    n: int  # matched items (both conditions have an item mean)
    wins: int  # items where a is better
    losses: int
    ties: int

    @property
    def decisive(self) -> int:
        """Items that carry evidence on the direction (the sign test's n)."""
        return self.wins + self.losses

    @property
    def win_rate(self) -> float:
        return (self.wins + 0.5 * self.ties) / self.n if self.n else math.nan

    @property
    def net(self) -> float:
        """(W - L) / n: the net win rate, in [-1, 1]; 2 x (win rate - 1/2)."""
        return (self.wins - self.losses) / self.n if self.n else math.nan

    def __add__(self, other: "WinCounts") -> "WinCounts":
        return WinCounts(self.n + other.n, self.wins + other.wins, self.losses + other.losses, self.ties + other.ties)


EMPTY = WinCounts(0, 0, 0, 0)


def win_counts(means_a: Sequence[float], means_b: Sequence[float], higher_is_better: bool = True) -> WinCounts:
    """Counts over the items of two aligned arrays of item means (NaN: no mean, not matched)."""
    a = np.asarray(means_a, dtype=float)
    b = np.asarray(means_b, dtype=float)
    matched = ~(np.isnan(a) | np.isnan(b))
    a = np.round(a[matched], TIE_DECIMALS)
    b = np.round(b[matched], TIE_DECIMALS)
    better = (a > b) if higher_is_better else (a < b)
    worse = (a < b) if higher_is_better else (a > b)
    w, lo = int(better.sum()), int(worse.sum())
    n = int(matched.sum())
    return WinCounts(n, w, lo, n - w - lo)


def item_means(rows: pd.DataFrame, metric: str, by: Sequence[str] = ("task", "knowledge_level")) -> dict[tuple, pd.DataFrame]:
    """Per ``by`` group, a table of item means (index ``item_id``, one column per condition) of
    ``metric`` over the group's rows (the caller passes ok sessions; NaN values are skipped)."""
    out: dict[tuple, pd.DataFrame] = {}
    if rows.empty or metric not in rows.columns:
        return out
    keep = rows[[*by, "item_id", "condition", metric]]
    keep = keep[keep[metric].notna()]
    for key, g in keep.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        out[key] = g.pivot_table(index="item_id", columns="condition", values=metric, aggfunc="mean")
    return out


def pair_counts(table: pd.DataFrame, a: str, b: str, higher_is_better: bool) -> WinCounts:
    """:func:`win_counts` of two columns of an :func:`item_means` table (EMPTY if one is absent)."""
    if a not in table.columns or b not in table.columns:
        return EMPTY
    return win_counts(table[a].to_numpy(dtype=float), table[b].to_numpy(dtype=float), higher_is_better)


__all__ = ["EMPTY", "QUANTITY", "WinCounts", "item_means", "pair_counts", "win_counts"]
