"""The anytime-valid paired verdict for open-ended adaptive runs: a confidence sequence for the win rate.

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

import functools
import math
from dataclasses import dataclass, field

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


@dataclass
class AnytimeSequence:
    """The open-ended design: a pair's looks and its Krichevsky–Trofimov confidence sequence, with
    the same interface as :class:`ray_knowsim.stats.group_sequential.PairSequence` (the
    information time is ignored: no horizon is assumed)."""

    looks: list[tuple[int, int]] = field(default_factory=list)  # (decisive, wins) per look

    def add(self, t: float, decisive: int, wins: int) -> None:
        self.looks.append((int(decisive), int(wins)))

    def test(self, level: float) -> tuple[int, int | None]:
        thresh = math.log(1.0 / level)
        for j, (n, k) in enumerate(self.looks):
            if n and float(log_evidence(k, n, 0.5)) >= thresh:
                return (1 if 2 * k > n else -1), j
        return 0, None

    def interval(self, level: float) -> tuple[float, float]:
        lo, hi = 0.0, 1.0
        for n, k in self.looks:
            a, b = interval(k, n, level)
            lo, hi = max(lo, a), min(hi, b)
        return lo, max(lo, hi)


#: the betting fractions mixed by :func:`equivalence_evidence` (a uniform mixture of fixed bets)
BET_FRACTIONS = np.linspace(0.05, 0.95, 19)


def equivalence_evidence(wins, ties, losses, theta0: float, below: bool):
    """log of the evidence that the tie-inclusive win rate theta = E[y] (y = 1 win, 1/2 tie, 0
    loss) lies below ``theta0`` (``below``) or above it: a uniform mixture over fixed betting
    fractions of the capital ``prod (1 + lambda (y - theta0))``, a non-negative supermartingale
    under the opposite hypothesis, so anytime-valid (Ville) and a function of the counts only.
    Vectorised over arrays of counts (a float for scalar counts), so that
    :func:`equivalence_reachable` tries every outcome with the same arithmetic."""
    c = BET_FRACTIONS
    if below:  # lambda = -c / (1 - theta0) < 0: gains when y < theta0
        lam = -c / (1.0 - theta0)
    else:
        lam = c / theta0
    w, t, l = (np.asarray(x, dtype=float)[..., None] for x in (wins, ties, losses))
    with np.errstate(divide="ignore"):
        logw = w * np.log1p(lam * (1.0 - theta0)) + t * np.log1p(lam * (0.5 - theta0)) + l * np.log1p(-lam * theta0)
    top = np.max(logw, axis=-1)
    out = top + np.log(np.mean(np.exp(logw - top[..., None]), axis=-1))
    return float(out) if out.ndim == 0 else out


def equivalent(wins: int, ties: int, losses: int, effect: float, level: float) -> bool:
    """Shown within 1/2 +- ``effect`` in tie-inclusive win rate: both one-sided hypotheses
    (theta >= 1/2 + effect, theta <= 1/2 - effect) rejected at ``level`` (an intersection-union
    test: each side at the full level).

    THE equivalence test of every design (issue 28: one statistic per question): an adaptive run's
    ``pairs`` decisions (a look every round), the fixed design of a replay, and ``compare
    --effect`` (one look) all call it, so the same counts at the same level give the same verdict
    whatever the design. Anytime-valid implies valid at one look; what that costs a fixed design,
    measured against the fixed-only Clopper-Pearson construction it replaced (tie share x
    conditional win rate, Bonferroni over the two), in matched items needed, at alpha 0.05 and
    0.05/6: all items tied, effect 0.1: 21 / 31 (was 20 / 28); 0.15: 13 / 19 (13 / 18); 0.25:
    7 / 10 (7 / 9); half the items tied and the rest split evenly, effect 0.1: 108 / 158 (was
    102 / 160); 0.15: 44 / 66 (52 / 80); 0.25: 16 / 22 (22 / 34) -- a few items more where almost
    everything ties, markedly fewer where it does not."""
    thresh = math.log(1.0 / level)
    return (equivalence_evidence(wins, ties, losses, 0.5 + effect, below=True) >= thresh
            and equivalence_evidence(wins, ties, losses, 0.5 - effect, below=False) >= thresh)


@functools.lru_cache(maxsize=8192)  # a pure function of the counts; compare's rows repeat them (all-tied metrics)
def equivalence_interval(wins: int, ties: int, losses: int, level: float) -> tuple[float, float]:
    """The interval of :func:`equivalent`'s test for the tie-inclusive win rate theta: the
    theta0 that neither one-sided test rejects at ``level`` (each bound a one-sided test at the
    full level, so two-sided coverage >= 1 - 2 level, at any number of looks). Each bet's capital
    is monotone in theta0, so the rejected sets are intervals and the bounds are found by
    bisection; ``equivalent(..., effect, level)`` holds exactly when the interval lies inside
    1/2 +- effect (up to the bisection's 1e-12). (0, 1) without items."""
    if wins + ties + losses == 0:
        return 0.0, 1.0
    thresh = math.log(1.0 / level)
    eps = 1e-12

    def bound(below: bool) -> float:
        # below=False: "theta <= theta0" is rejected for theta0 up to the lower bound (evidence falls with theta0)
        # below=True: "theta >= theta0" is rejected for theta0 from the upper bound on (evidence rises with theta0)
        def rejected(t: float) -> bool:
            return equivalence_evidence(wins, ties, losses, t, below=below) >= thresh
        lo_t, hi_t = eps, 1.0 - eps
        if below:
            if not rejected(hi_t):
                return 1.0
            if rejected(lo_t):
                return 0.0
            for _ in range(60):  # lo_t not rejected, hi_t rejected
                mid = 0.5 * (lo_t + hi_t)
                lo_t, hi_t = (lo_t, mid) if rejected(mid) else (mid, hi_t)
            return hi_t
        if not rejected(lo_t):
            return 0.0
        if rejected(hi_t):
            return 1.0
        for _ in range(60):  # lo_t rejected, hi_t not rejected
            mid = 0.5 * (lo_t + hi_t)
            lo_t, hi_t = (mid, hi_t) if rejected(mid) else (lo_t, mid)
        return lo_t

    return bound(below=False), bound(below=True)


def equivalence_reachable(wins: int, ties: int, losses: int, remaining: int, effect: float, level: float) -> bool:
    """Whether some outcome of ``remaining`` more items could still show the pair within the
    effect (:func:`equivalent` at ``level``): curtailment for the equivalence claim, so that an
    adaptive ``pairs`` decision stops a pair only when neither of its claims can be reached.

    Only the best outcomes need trying: two ties raise every bet's capital more than a win and a
    loss (the products differ by lambda^2 / 4), so a best outcome is ties plus items of one kind,
    ``j`` losses or ``j`` wins -- 2 r + 1 outcomes, tried at once."""
    r = max(0, int(remaining))
    j = np.arange(-r, r + 1)
    w, t, l = wins + np.maximum(0, -j), ties + r - np.abs(j), losses + np.maximum(0, j)
    thresh = math.log(1.0 / level)
    ok = ((equivalence_evidence(w, t, l, 0.5 + effect, below=True) >= thresh)
          & (equivalence_evidence(w, t, l, 0.5 - effect, below=False) >= thresh))
    return bool(ok.any())


__all__ = ["AnytimeSequence", "BET_FRACTIONS", "PRIOR", "equivalence_evidence", "equivalence_interval", "equivalence_reachable",
           "equivalent", "interval", "log_evidence"]
