"""Statistics of paired condition comparisons, pure (numpy + scipy, no Ray, no I/O).

The unit of pairing is a *matched cell*: the same task, item, knowledge level, trial and initial
state under two conditions (the engine gives every condition of a cell the same init seed, so its
learners start from the same knowledge state). Items are the clusters: several cells share an
item (levels, trials), and items, not cells, are what a benchmark samples from a population.

* :func:`sign_test` — the **exact two-sided sign test** on the paired differences (zeros dropped).
  Chosen over the Wilcoxon signed-rank test because KnowSim metrics are bounded and discrete
  (KG counts state steps, CO is a share of turns, IQ an integer score): paired differences have
  many ties and zeros, and their distribution need not be symmetric. The sign test is exact under
  those conditions (it assumes only that, under H0, a non-zero difference is as likely positive
  as negative), while Wilcoxon's exact null assumes symmetry and no ties (with ties scipy falls
  back to a normal approximation). The price is some power, paid knowingly.
* :func:`holm` — Holm's step-down adjustment (controls the family-wise error rate, any dependence).
* :func:`item_weights` + :func:`cluster_means` — the **cluster bootstrap over items**: each
  replicate draws items with replacement and keeps all their cells; a replicate's statistic is
  the cell-weighted mean of the drawn items' values. Percentile intervals from the replicates.
* :func:`prob_best` — per replicate, which condition is best (ties share the win).
* :func:`mde` — the minimum detectable effect of a two-sided test at level ``alpha`` with power
  ``power``, normal approximation on the bootstrap standard error:
  ``(z(1 - alpha/2) + z(power)) * se``.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats as _st


def sign_test(diffs: Sequence[float]) -> tuple[float, int, int]:
    """Exact two-sided sign test of H0 "median difference 0". Returns (p, n_pos, n_neg); zeros
    (and NaNs) are dropped; no non-zero difference gives p = 1."""
    d = np.asarray(diffs, dtype=float)
    d = d[~np.isnan(d)]
    pos, neg = int((d > 0).sum()), int((d < 0).sum())
    n = pos + neg
    if n == 0:
        return 1.0, 0, 0
    k = min(pos, neg)
    p = 2.0 * float(_st.binom.cdf(k, n, 0.5))
    return min(1.0, p), pos, neg


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (same order as given; NaN stays NaN and is not counted)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    have = np.flatnonzero(~np.isnan(p))
    m = have.size
    if m == 0:
        return out
    order = have[np.argsort(p[have], kind="stable")]
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        out[idx] = running
    return out


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


def normal_ci(estimate: float, se: float, level: float = 0.95) -> tuple[float, float]:
    """``estimate -/+ z((1 + level) / 2) * se`` (NaN, NaN when either is not finite)."""
    if estimate is None or se is None or not (np.isfinite(estimate) and np.isfinite(se)):
        return math.nan, math.nan
    z = float(_st.norm.ppf(0.5 + level / 2.0))
    return float(estimate - z * se), float(estimate + z * se)


def bootstrap_se(replicates: np.ndarray) -> float:
    r = np.asarray(replicates, dtype=float)
    r = r[np.isfinite(r)]
    return float(r.std(ddof=1)) if r.size > 1 else math.nan


def prob_best(replicates: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """``replicates``: ``(n_boot, n_conditions)`` replicate means. The share of replicates in which
    each condition is best; a tie shares the replicate equally; a replicate with a NaN is skipped."""
    r = np.asarray(replicates, dtype=float)
    ok = np.all(np.isfinite(r), axis=1)
    r = r[ok]
    if r.shape[0] == 0:
        return np.full(replicates.shape[1], np.nan)
    best = r.max(axis=1, keepdims=True) if higher_is_better else r.min(axis=1, keepdims=True)
    winners = np.isclose(r, best, rtol=0.0, atol=1e-12)
    share = winners / winners.sum(axis=1, keepdims=True)
    return share.mean(axis=0)


def mde(se: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect (absolute, in the metric's units) of a two-sided test."""
    if se is None or not np.isfinite(se):
        return math.nan
    return float((_st.norm.ppf(1.0 - alpha / 2.0) + _st.norm.ppf(power)) * se)


__all__ = [
    "bootstrap_se", "cluster_means", "cluster_sums", "holm", "item_weights", "mde", "normal_ci", "percentile_ci",
    "prob_best", "sign_test",
]
