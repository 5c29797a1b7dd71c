"""The fixed-design paired verdict: items are the unit, the exact sign test decides, and its own
inversion is the interval, so the test and the interval are ONE verdict.

Per pair of conditions (and scope: a level, or the level-marginal), each item contributes the
sign of its mean paired difference (mean over its matched cells: trials, and levels for the
marginal). Ties (an item whose mean difference is 0) carry no evidence and are dropped, as in
every sign test. The parameter is the **win rate** ``q = P(d > 0 | d != 0)`` over items: 1/2
when neither condition wins more items than the other.

* :func:`sign_test` — exact, two-sided, central (twice the smaller binomial tail). Why signs and
  not a t-test or a bounded-mean test on the differences: KnowSim metrics are bounded and
  discrete with many ties and skew, and their theoretical bounds (e.g. KG up to 3 x the number
  of IUs) are far wider than the differences seen, so a test valid for bounded means would need
  tens of items per decision; the sign of an item's difference is bounded exactly. A t-test is
  not valid at the tiny levels a family of many comparisons needs (alpha / m ~ 1e-4) with few
  items.
* :func:`win_rate_interval` — Clopper–Pearson for ``q``: exactly the set of win rates the central
  binomial test does not reject, so "significant" <=> "the interval excludes 1/2".
* "smaller than the effect" (equivalence, ties counted) is not here: ONE test answers it in every
  design, fixed or sequential -- :func:`ray_knowsim.stats.sequential.equivalent` and its interval
  :func:`ray_knowsim.stats.sequential.equivalence_interval`.
* :func:`min_items` — below this many non-tied items no outcome can be significant at the level.
* :func:`mde_win_rate` / :func:`shift_effect` — the minimum detectable win rate at the run's n
  (exact binomial power), and the same in the metric's units under a normal location shift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special as _sp
from scipy import stats as _st

from ray_knowsim.stats.defaults import POWER


@dataclass(frozen=True)
class SignCounts:
    pos: int  # items where a - b > 0
    neg: int
    tied: int

    @property
    def n(self) -> int:
        """Items that carry evidence (non-tied)."""
        return self.pos + self.neg


def sign_counts(item_differences: Sequence[float], tol: float = 1e-12) -> SignCounts:
    """Signs of per-item mean differences; |d| <= tol is a tie; NaN (no matched cell) is skipped."""
    d = np.asarray(item_differences, dtype=float)
    d = d[~np.isnan(d)]
    return SignCounts(int((d > tol).sum()), int((d < -tol).sum()), int((np.abs(d) <= tol).sum()))


def item_means(item_index: Sequence[int], values: Sequence[float], n_items: int) -> np.ndarray:
    """Per-item mean of ``values`` (NaN for an item without a value)."""
    idx = np.asarray(item_index, dtype=np.int64)
    v = np.asarray(values, dtype=float)
    keep = ~np.isnan(v)
    s = np.bincount(idx[keep], weights=v[keep], minlength=n_items)
    c = np.bincount(idx[keep], minlength=n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c > 0, s / np.maximum(c, 1), np.nan)


def sign_test(pos: int, neg: int) -> float:
    """Exact two-sided central sign test of ``q = 1/2`` (1.0 when no item carries evidence)."""
    n = pos + neg
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * _st.binom.cdf(min(pos, neg), n, 0.5)))


def win_rate_interval(pos: int, neg: int, level: float) -> tuple[float, float]:
    """Clopper–Pearson interval for the win rate at ``level`` ((0, 1) when n = 0)."""
    n = pos + neg
    tail = (1.0 - level) / 2.0
    lo = 0.0 if pos == 0 else float(_sp.betaincinv(pos, n - pos + 1, tail))
    hi = 1.0 if neg == 0 else float(_sp.betaincinv(pos + 1, n - pos, 1.0 - tail))
    return lo, hi


@dataclass(frozen=True)
class Verdict:
    p_value: float  # unadjusted exact sign test
    ci_low: float  # win-rate interval at 1 - alpha_adj
    ci_high: float
    significant: bool  # the interval excludes 1/2 (<=> p_value < alpha_adj)
    direction: int  # +1: a wins more items, -1: b does, 0: no verdict


def verdict(counts: SignCounts, alpha_adj: float) -> Verdict:
    """Test and interval at the family-adjusted level, as one verdict."""
    p = sign_test(counts.pos, counts.neg)
    lo, hi = win_rate_interval(counts.pos, counts.neg, 1.0 - alpha_adj)
    direction = 1 if lo > 0.5 else -1 if hi < 0.5 else 0
    return Verdict(p, lo, hi, direction != 0, direction)


def min_items(alpha_adj: float) -> int:
    """Fewest non-tied items at which the most lopsided outcome (all one way) is significant."""
    # 2 * 0.5**n < alpha_adj  <=>  n > log2(2 / alpha_adj)
    return int(math.floor(math.log2(2.0 / alpha_adj))) + 1


def mde_win_rate(n: int, alpha_adj: float, power: float = POWER) -> float:
    """Smallest win rate q > 1/2 that a run with ``n`` non-tied items detects with ``power``
    (NaN when no outcome of n items can be significant)."""
    if n < min_items(alpha_adj):
        return math.nan
    ks = np.arange(n + 1)
    p_upper = 2.0 * _st.binom.sf(ks - 1, n, 0.5)  # central p of an outcome k >= n/2
    crit = int(ks[(ks > n / 2) & (p_upper < alpha_adj)].min())
    # P_q(X >= crit) = I_q(crit, n - crit + 1): solve for q
    return float(_sp.betaincinv(crit, n - crit + 1, power))


def shift_effect(win_rate: float, sd_item_diff: float) -> float:
    """The mean difference that gives ``win_rate`` under a normal location shift of per-item
    differences with standard deviation ``sd_item_diff``: sd * Phi^-1(q). An approximation to put
    a win rate in the metric's units; the verdict never uses it."""
    if not (np.isfinite(win_rate) and np.isfinite(sd_item_diff)):
        return math.nan
    return float(sd_item_diff * _st.norm.ppf(win_rate))


__all__ = ["SignCounts", "Verdict", "item_means", "mde_win_rate", "min_items", "shift_effect",
           "sign_counts", "sign_test", "verdict", "win_rate_interval"]
