"""Means and their item-clustered intervals.

A condition's mean at one level (a cell of the tables) averages sessions that cluster by item:
trials of an item share its graph and question, and a benchmark samples items, not sessions.
The interval therefore treats items as the unit, with the **item-clustered (sandwich) standard
error** and a Student-t quantile on (items - 1) degrees of freedom. Why this and not a cluster
bootstrap (there is none in ray_knowsim: it went with P(best), issue 28): it is computed from per-(cell, item) sums, which the
Ray Data reduction already produces (no resampling pass over sessions, no seed), and with few
items the t quantile widens the interval honestly while bootstrap percentiles stay too narrow
(one item: zero width). With one session per item it is the ordinary t-interval over items.

The level-marginal (spec §11's recommendation) is the unweighted mean of the level means; its
standard error is the same sandwich over items of the linearised estimator (an item's influence
is its deviations summed over the levels it appears in), so the correlation of one item's levels
is accounted for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtrit  # inverse Student-t CDF; far lighter to import than scipy.stats

CI_LEVEL = 0.95


@dataclass
class Moments:
    """Count, mean and sum of squared deviations of one cell's non-missing values; merged
    pairwise (Chan et al.), so a stream of batches reduces in memory bounded by the cells."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def of(cls, values) -> "Moments":
        arr = np.asarray(values, dtype=float)  # None -> nan
        arr = arr[~np.isnan(arr)]
        if arr.size == 0:
            return cls()
        mean = float(arr.mean())
        return cls(int(arr.size), mean, float(((arr - mean) ** 2).sum()))

    def merge(self, other: "Moments") -> "Moments":
        if other.n == 0:
            return self
        if self.n == 0:
            return Moments(other.n, other.mean, other.m2)
        n = self.n + other.n
        delta = other.mean - self.mean
        mean = self.mean + delta * other.n / n
        m2 = self.m2 + other.m2 + delta * delta * self.n * other.n / n
        return Moments(n, mean, m2)

    @property
    def value(self) -> float | None:
        return self.mean if self.n else None

    @property
    def sum(self) -> float:
        return self.mean * self.n

    @property
    def sd(self) -> float | None:
        return math.sqrt(self.m2 / (self.n - 1)) if self.n >= 2 else None


@dataclass(frozen=True)
class ClusteredMean:
    mean: float  # NaN without data
    se: float  # item-clustered standard error (NaN below 2 items)
    n: int  # values
    n_items: int  # items with a value
    levels: int  # levels that had a value (1 for a cell)
    ci_low: float
    ci_high: float


def item_sums(item_index, values, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """(counts, sums) per item of the non-NaN ``values`` (cell -> item via ``item_index``): the
    input of :func:`clustered_mean` for cells given one value at a time (compare's paired differences)."""
    idx = np.asarray(item_index, dtype=np.int64)
    v = np.asarray(values, dtype=float)
    keep = ~np.isnan(v)
    sums = np.bincount(idx[keep], weights=v[keep], minlength=n_items).astype(float)
    counts = np.bincount(idx[keep], minlength=n_items).astype(float)
    return counts, sums


def clustered_mean(counts: np.ndarray, sums: np.ndarray, level: float = CI_LEVEL) -> ClusteredMean:
    """The unweighted mean over levels of the level means, with its item-clustered interval.

    ``counts`` and ``sums``: ``(levels, items)`` arrays of per-item value counts and sums (one row
    for a single cell). Levels without any value are left out of the mean (as the tables do)."""
    counts = np.atleast_2d(np.asarray(counts, dtype=float))
    sums = np.atleast_2d(np.asarray(sums, dtype=float))
    per_level = counts.sum(axis=1)
    have = per_level > 0
    if not have.any():
        return ClusteredMean(math.nan, math.nan, 0, 0, 0, math.nan, math.nan)
    c, s, tot = counts[have], sums[have], per_level[have]
    mu = s.sum(axis=1) / tot
    est = float(mu.mean())
    # influence of item i: (1/L) sum_l (s_li - n_li mu_l) / N_l
    psi = ((s - c * mu[:, None]) / tot[:, None]).sum(axis=0) / have.sum()
    psi = psi[c.sum(axis=0) > 0]
    g = psi.size
    if g < 2:
        return ClusteredMean(est, math.nan, int(tot.sum()), g, int(have.sum()), math.nan, math.nan)
    se = math.sqrt(g / (g - 1) * float((psi ** 2).sum()))
    half = float(stdtrit(g - 1, 0.5 + level / 2.0)) * se
    return ClusteredMean(est, se, int(tot.sum()), g, int(have.sum()), est - half, est + half)


def sample_sd(n: int, s1: float, s2: float) -> float:
    """Sample standard deviation from count, sum and sum of squares (NaN below 2 values)."""
    if n < 2:
        return math.nan
    mean = s1 / n
    return math.sqrt(max(0.0, (s2 - n * mean * mean) / (n - 1)))


__all__ = ["CI_LEVEL", "ClusteredMean", "Moments", "clustered_mean", "item_sums", "sample_sd"]
