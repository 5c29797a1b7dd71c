"""The anytime-valid paired verdict for adaptive runs: a confidence sequence for the win rate.

The observations are the same as the fixed design's (:mod:`.signs`): per item, the sign of its
mean paired difference, ties dropped; after ``n`` non-tied items, ``k`` were won by the first
condition. The evidence against a win rate ``p0`` is the **Beta(1/2, 1/2) mixture martingale**
(the Krichevsky–Trofimov universal bettor)::

    M_n(p0) = B(k + 1/2, n - k + 1/2) / B(1/2, 1/2) / (p0^k (1 - p0)^(n - k))

a mixture of likelihood ratios, so a non-negative martingale with M_0 = 1 when the true win rate
is p0. Ville's inequality gives P(M_n(p0) >= 1/alpha for SOME n) <= alpha: the run may look after
every round, stop whenever it likes, and the error stays under alpha. The confidence sequence is
``{p0 : M_n(p0) < 1/alpha}`` (an interval: -log M is convex in p0 and smallest at k/n), intersected
over the looks taken so far; it excludes 1/2 exactly when the evidence against 1/2 reached
1/alpha at some look, so the interval and the test are one verdict, as in the fixed design.

Why this procedure (docs/adaptive.md has the measurements): it needs only counts (the same
decisions whatever the order of items inside a round), it has no tuning constant, its evidence
after n unanimous items is 2^n / sqrt(pi n) -- within a factor sqrt(pi n)/2 of the exact
fixed-n sign test's 2^(n-1) -- and the win rate is bounded exactly, unlike bounded-mean
confidence sequences on the differences themselves, whose a-priori bounds (KG: 3 x the IUs) are
tens of times wider than the differences and cost tens of items per decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _sp

PRIOR = 0.5  # Beta(PRIOR, PRIOR) mixing distribution (Jeffreys / Krichevsky–Trofimov)
_LOG_B0 = float(_sp.betaln(PRIOR, PRIOR))


def log_evidence(k, n, p0=0.5):
    """log M_n(p0), vectorised over numpy arrays of counts (k wins of n non-tied items)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    p0 = np.asarray(p0, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_lik0 = np.where(k > 0, k * np.log(p0), 0.0) + np.where(n - k > 0, (n - k) * np.log1p(-p0), 0.0)
    return _sp.betaln(k + PRIOR, n - k + PRIOR) - _LOG_B0 - log_lik0


def _bound(k: int, n: int, log_level: float, upper: bool) -> float:
    """The end of {p0 : log M_n(p0) < log_level} on one side of k/n, by bisection (the function
    is monotone on each side of its minimum at k/n, where it is <= 0)."""
    inside = k / n
    outside = 1.0 if upper else 0.0
    if float(log_evidence(k, n, outside)) < log_level:  # never leaves: the bound is the end of [0, 1]
        return outside
    for _ in range(60):
        mid = 0.5 * (inside + outside)
        if float(log_evidence(k, n, mid)) < log_level:
            inside = mid
        else:
            outside = mid
    return inside


def interval(k: int, n: int, alpha: float) -> tuple[float, float]:
    """``{p0 : M_n(p0) < 1/alpha}`` at one look ((0, 1) before any evidence)."""
    if n == 0:
        return 0.0, 1.0
    level = math.log(1.0 / alpha)
    return _bound(k, n, level, upper=False), _bound(k, n, level, upper=True)


@dataclass(frozen=True)
class SequenceState:
    """A pair's confidence sequence after the looks so far (the running intersection).

    The decision needs only where the sequence stands against three points (1/2, and 1/2 +-
    ``margin`` when an effect is stated), which cost one evaluation each; the interval's ends are
    computed (by bisection) only when ``bounds`` is asked for, for the record."""

    k: int = 0  # wins of the first condition (non-tied items)
    n: int = 0  # non-tied items
    max_log_evidence: float = 0.0  # running max of log M(1/2) over the looks
    direction: int = 0  # +1 the first condition wins more items, -1 the second, 0 undecided
    low_above: bool = False  # the sequence has excluded 1/2 - margin from below (low end > 1/2 - margin)
    high_below: bool = False  # ... and 1/2 + margin from above
    low: float = 0.0
    high: float = 1.0

    def look(self, k: int, n: int, alpha: float, margin: float | None = None, bounds: bool = False) -> "SequenceState":
        """The state after a look at cumulative counts ``(k, n)``."""
        level = math.log(1.0 / alpha)
        ev = float(log_evidence(k, n, 0.5)) if n else 0.0
        direction = self.direction
        if direction == 0 and ev >= level:
            direction = 1 if 2 * k > n else -1
        low_above, high_below = self.low_above, self.high_below
        if margin is not None and n:
            low_above = low_above or (k / n > 0.5 - margin and float(log_evidence(k, n, 0.5 - margin)) >= level)
            high_below = high_below or (k / n < 0.5 + margin and float(log_evidence(k, n, 0.5 + margin)) >= level)
        lo, hi = interval(k, n, alpha) if bounds else (0.0, 1.0)
        return SequenceState(k, n, max(self.max_log_evidence, ev), direction, low_above, high_below,
                             max(self.low, lo), min(self.high, hi))

    @property
    def p_value(self) -> float:
        """Anytime-valid p-value of "win rate 1/2": 1 / the largest evidence seen."""
        return float(min(1.0, math.exp(-self.max_log_evidence)))

    @property
    def within(self) -> bool:
        """The sequence lies within 1/2 +- margin: shown smaller than the stated effect."""
        return self.low_above and self.high_below


__all__ = ["PRIOR", "SequenceState", "interval", "log_evidence"]
