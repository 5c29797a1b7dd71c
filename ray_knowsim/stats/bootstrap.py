"""The cluster bootstrap over items (pure numpy).

Items are the clusters: several cells share an item (levels, trials), and items, not cells, are
what a benchmark samples from a population. Each replicate draws items with replacement and
keeps all their cells; a replicate's statistic is the cell-weighted mean of the drawn items'
values. (compare's P(best), a share of replicates shown as a probability, went with issue 28:
the leaderboard is on the item win rate, :mod:`.leaderboard`.) compare's intervals are not bootstrap percentiles but the item-clustered
intervals of :mod:`.descriptive` (the run's tables' statistic), and verdicts never rest on the
bootstrap: with few items its percentile intervals (:func:`percentile_ci`) are too narrow
(1 item: zero width), see :mod:`.signs`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def item_weights(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    """``(n_boot, n_items)`` counts: how often each item is drawn in each bootstrap replicate."""
    if n_items <= 0:
        return np.zeros((n_boot, 0))
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=n_boot).astype(float)


def cluster_sums(item_index: Sequence[int], values: Sequence[float], n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-item sum and count of the non-NaN ``values`` (cell -> item via ``item_index``)."""
    idx = np.asarray(item_index, dtype=np.int64)
    v = np.asarray(values, dtype=float)
    keep = ~np.isnan(v)
    sums = np.bincount(idx[keep], weights=v[keep], minlength=n_items).astype(float)
    counts = np.bincount(idx[keep], minlength=n_items).astype(float)
    return sums, counts


def cluster_means(weights: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Replicate means (cell-weighted over the drawn items); NaN for a replicate without cells."""
    num = weights @ sums
    den = weights @ counts
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def percentile_ci(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the finite replicates (NaN, NaN if none)."""
    r = np.asarray(replicates, dtype=float)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return math.nan, math.nan
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(r, [tail, 1.0 - tail])
    return float(lo), float(hi)


def bootstrap_se(replicates: np.ndarray) -> float:
    r = np.asarray(replicates, dtype=float)
    r = r[np.isfinite(r)]
    return float(r.std(ddof=1)) if r.size > 1 else math.nan


__all__ = ["bootstrap_se", "cluster_means", "cluster_sums", "item_weights", "percentile_ci"]
