"""The exact group-sequential sign test over a known, finite pool of items.

A pair's evidence after each look is its cumulative counts over matched items (:mod:`.winrate`):
``n`` decisive items (wins + losses) of which ``W`` are wins of the first condition. Under "win
rate 1/2" and conditional on which items tie, the decisive items' signs are independent fair
coins, so ``W`` is a random walk whose law at every look is computed **exactly** by dynamic
programming over the looks (a binomial convolution per look, the paths that already crossed a
boundary removed). The ties are random, so the decisive counts of the looks are not fixed in
advance: the boundaries of a look are computed from the decisive counts observed so far (the
ties carry no information on the signs, so the conditional error is exact).

**Alpha spending** (Lan & DeMets): the error a test may have spent by information time ``t`` is
``alpha * f(t)``, ``t`` the share of the pool scheduled so far (the calendar of the design, fixed
before round 1; the last round of the pool is t = 1). Per side ``alpha / 2``; at each look the
boundary is the most extreme count whose exact crossing probability (paths not stopped before)
fits what is left of the side's budget; what discreteness leaves unspent carries to the next
look. Spending functions: Hwang–Shih–DeCani ``(1 - e^(-g t)) / (1 - e^(-g))`` (``g`` = gamma;
-4 is close to O'Brien–Fleming, 1 to Pocock; the default -6 keeps most of the budget for the pool's
end: measured in docs/adaptive.md, "Planted best-of-4") and the Lan–DeMets Pocock type ``ln(1 + (e - 1) t)``.
A look is allowed every round: a look with no new decisive item re-tests the same counts with
the budget grown since.

**Validity with dropped conditions.** A pair stops getting items when one of its conditions
leaves play (because of other pairs' data). The pair is only looked at when it got new matched
items, so its looks are the first looks of the full design (every round, all items); its
boundaries at those looks are the full design's, and its crossing event is a sub-event of the
full design's, whose exact error is at most alpha.

**Intervals** come from the same boundaries: the repeated confidence interval of the decisive
win rate ``q = P(a wins | not tied)`` is the set of ``q0`` whose own test (the same spending at
``q0``, binomial(q0) steps) has not crossed at any look so far. It excludes 1/2 exactly when the
test of 1/2 crossed, so the interval and the verdict are one. A single look at ``t = 1`` is the
fixed design's exact central sign test and its Clopper–Pearson-type inversion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, Sequence

import numpy as np
from scipy import special as _sp

SpendingKind = Literal["hsd", "pocock"]
_EPS = 1e-13  # relative slack for floating-point sums against the budget


@dataclass(frozen=True)
class Spending:
    kind: SpendingKind = "hsd"
    gamma: float = -6.0  # hsd only (the default design's; docs/adaptive.md, "Planted best-of-4")

    def fraction(self, t: float) -> float:
        """f(t): the share of the budget spendable by information time ``t`` (f(1) = 1)."""
        t = min(max(float(t), 0.0), 1.0)
        if t >= 1.0:
            return 1.0
        if self.kind == "pocock":
            return math.log1p((math.e - 1.0) * t)
        g = self.gamma
        if abs(g) < 1e-12:
            return t
        return math.expm1(-g * t) / math.expm1(-g)

    def describe(self) -> str:
        return "Lan-DeMets Pocock-type" if self.kind == "pocock" else f"Hwang-Shih-DeCani (gamma {self.gamma:g})"


@lru_cache(maxsize=4096)
def _pmf_half(m: int) -> np.ndarray:
    k = np.arange(m + 1)
    out = np.exp(_sp.gammaln(m + 1) - _sp.gammaln(k + 1) - _sp.gammaln(m - k + 1) - m * math.log(2.0))
    out.setflags(write=False)
    return out


@lru_cache(maxsize=1024)
def _pmf(m: int, p: float) -> np.ndarray:
    """binomial(m, p) pmf (cached: an interval's bisection probes one q0 over looks of equal growth)."""
    if p == 0.5:
        return _pmf_half(m)
    k = np.arange(m + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = (_sp.gammaln(m + 1) - _sp.gammaln(k + 1) - _sp.gammaln(m - k + 1)
                + _sp.xlogy(k, p) + _sp.xlog1py(m - k, -p))
    out = np.exp(logp)
    out.setflags(write=False)
    return out


def _beta_binomial(m: int, a: float, b: float) -> np.ndarray:
    """The beta-binomial(m, a, b) pmf over 0..m."""
    k = np.arange(m + 1)
    log = (_sp.gammaln(m + 1) - _sp.gammaln(k + 1) - _sp.gammaln(m - k + 1)
           + _sp.betaln(k + a, m - k + b) - _sp.betaln(a, b))
    return np.exp(log)


@dataclass(frozen=True)
class Look:
    """One look at a pair: information time and cumulative counts."""

    t: float  # share of the pool scheduled so far (1 at the pool's last round)
    decisive: int  # cumulative wins + losses
    wins: int  # cumulative wins of the first condition


@dataclass(frozen=True)
class _State:
    """The exact DP of one test (one side level, one q0) after a calendar prefix; ``children``
    caches the states after each next look (boundaries depend on the calendar, never on the wins,
    so sequences with the same calendar share them)."""

    dist: np.ndarray  # sub-probability of W over 0..n for paths not stopped
    n: int
    spent_up: float
    spent_down: float
    bound: tuple[int, int]  # this look's (lower, upper): reject W <= lower or W >= upper
    children: dict = field(default_factory=dict, compare=False, repr=False)


_ROOTS: dict[tuple, _State] = {}  # (side alpha, spending, q0) -> the state before any look
_NODES = [0]
_MAX_NODES = 500_000


def _root(side_alpha: float, spending: Spending, q0: float) -> _State:
    key = (side_alpha, spending, q0)
    root = _ROOTS.get(key)
    if root is None:
        if len(_ROOTS) > 256:
            _ROOTS.clear()
        root = _ROOTS[key] = _State(np.ones(1), 0, 0.0, 0.0, (-1, 1))
    return root


def _step(state: _State, t: float, decisive: int, side_alpha: float, spending: Spending, q0: float) -> _State:
    child = state.children.get((t, decisive))
    if child is not None:
        return child
    grow = decisive - state.n
    if grow < 0:
        raise ValueError(f"decisive counts must not decrease ({state.n} -> {decisive})")
    dist = np.convolve(state.dist, _pmf(grow, q0)) if grow else state.dist.copy()
    budget = side_alpha * spending.fraction(t)
    upper_tail = np.cumsum(dist[::-1])[::-1]  # P(W >= u), u = 0..n
    lower_tail = np.cumsum(dist)  # P(W <= l)
    upper = int(np.searchsorted(-upper_tail, -(budget - state.spent_up) * (1 + _EPS), side="left"))
    lower = int(np.searchsorted(lower_tail, (budget - state.spent_down) * (1 + _EPS), side="right")) - 1
    lower = min(lower, upper - 1)  # (only at huge alpha) keep the regions apart
    spent_up, spent_down = state.spent_up, state.spent_down
    if upper <= decisive:
        spent_up += float(upper_tail[upper])
        dist[upper:] = 0.0
    if lower >= 0:
        spent_down += float(lower_tail[lower])
        dist[: lower + 1] = 0.0
    child = _State(dist, decisive, spent_up, spent_down, (lower, upper))
    if q0 == 0.5:  # cache the null's boundaries only (intervals probe arbitrary q0)
        _NODES[0] += 1
        if _NODES[0] > _MAX_NODES:
            _ROOTS.clear()
            _NODES[0] = 0
        state.children[(t, decisive)] = child
    return child


def boundaries(calendar: Sequence[tuple[float, int]], side_alpha: float, spending: Spending,
               q0: float = 0.5) -> list[tuple[int, int]]:
    """Per look of ``calendar`` ((information time, cumulative decisive items) per look), the
    (lower, upper) boundary of the wins: the test crosses at a look when W <= lower or W >= upper.
    Each side spends ``side_alpha * f(t)`` exactly (DP over the looks, unspent error carried)."""
    state = _root(side_alpha, spending, q0)
    out = []
    for t, n in calendar:
        state = _step(state, float(t), int(n), side_alpha, spending, q0)
        out.append(state.bound)
    return out


def _crossing(looks: Sequence[Look], side_alpha: float, spending: Spending, q0: float) -> tuple[int, int | None]:
    """(+1 the wins crossed the upper boundary first / -1 the lower / 0 neither, the look)."""
    state = _root(side_alpha, spending, q0)
    for j, look in enumerate(looks):
        state = _step(state, look.t, look.decisive, side_alpha, spending, q0)
        lo, hi = state.bound
        if look.wins >= hi:
            return 1, j
        if look.wins <= lo:
            return -1, j
    return 0, None


@dataclass
class PairSequence:
    """A pair's looks and its exact group-sequential test at any family level (Holm asks for
    several levels as hypotheses are rejected)."""

    spending: Spending = field(default_factory=Spending)
    looks: list[Look] = field(default_factory=list)

    def add(self, t: float, decisive: int, wins: int) -> None:
        if self.looks and t < self.looks[-1].t:
            raise ValueError("information time must not decrease")
        self.looks.append(Look(float(t), int(decisive), int(wins)))

    def test(self, level: float) -> tuple[int, int | None]:
        """(direction, index of the look it was decided at) at two-sided level ``level``."""
        if not self.looks:
            return 0, None
        return _crossing(self.looks, level / 2.0, self.spending, 0.5)

    def boundaries(self, level: float) -> tuple[tuple[int, int], ...]:
        return boundaries([(lk.t, lk.decisive) for lk in self.looks], level / 2.0, self.spending)

    def chances(self, level: float, remaining: int, decisive_share: float) -> tuple[float, float]:
        """The predictive probability that the test crosses up / down at the pool's end (t = 1)
        at two-sided ``level`` if the pair keeps running: ``remaining`` more matched items, of
        which ``decisive_share`` are decisive, their wins beta-binomial (a uniform prior on the
        decisive win rate updated by the wins so far). 0 for a side that cannot cross even if
        every remaining item went its way (curtailment). A look at t = 1 straight after the last
        one (the intermediate looks' extra spending left out): a guide for when to stop a pair,
        which any rule may decide without touching the error (module docstring, "Validity")."""
        if not self.looks or self.looks[-1].t >= 1.0 or remaining <= 0:
            return 0.0, 0.0
        cal = [(lk.t, lk.decisive) for lk in self.looks]
        last = self.looks[-1]
        side = level / 2.0
        most = boundaries([*cal, (1.0, last.decisive + remaining)], side, self.spending)[-1]
        can_up, can_down = last.wins + remaining >= most[1], last.wins <= most[0]
        more = min(remaining, max(0, int(round(remaining * decisive_share))))
        lo, hi = boundaries([*cal, (1.0, last.decisive + more)], side, self.spending)[-1]
        pmf = _beta_binomial(more, 1.0 + last.wins, 1.0 + last.decisive - last.wins)
        up = float(pmf[max(0, hi - last.wins):].sum()) if can_up else 0.0
        down = float(pmf[: max(0, lo - last.wins + 1)].sum()) if can_down else 0.0
        return max(up, 1e-300 if can_up else 0.0), max(down, 1e-300 if can_down else 0.0)

    def interval(self, level: float, tol: float = 1e-7) -> tuple[float, float]:
        """The repeated confidence interval of the decisive win rate at ``level``, intersected
        over the looks so far ((0, 1) before any decisive item)."""
        if not self.looks or self.looks[-1].decisive == 0:
            return 0.0, 1.0
        side = level / 2.0

        def status(q0: float) -> int:
            return _crossing(self.looks, side, self.spending, q0)[0]

        points = [lk.wins / lk.decisive for lk in reversed(self.looks) if lk.decisive]
        inside = next((q for q in [*points, *np.linspace(0.005, 0.995, 100)] if status(float(q)) == 0), None)
        if inside is None:  # the intersection of the looks' intervals is empty (probability <= level)
            return points[0], points[0]
        lo = _bisect(lambda q: status(q) == 1, 0.0, float(inside), tol)
        hi = _bisect(lambda q: status(q) == -1, 1.0, float(inside), tol)
        return lo, hi


def _bisect(rejected, outside: float, inside: float, tol: float) -> float:
    """The boundary between ``outside`` (an end of [0, 1]) and the accepted ``inside``; the end
    itself when it is accepted."""
    if not rejected(outside):
        return outside
    while abs(inside - outside) > tol:
        mid = 0.5 * (inside + outside)
        if rejected(mid):
            outside = mid
        else:
            inside = mid
    return inside


def fixed_design_rejects(wins: int, losses: int, level: float) -> int:
    """The fixed design (one look at t = 1): +1 / -1 / 0 -- the exact central sign test."""
    seq = PairSequence()
    seq.add(1.0, wins + losses, wins)
    return seq.test(level)[0]


__all__ = ["Look", "PairSequence", "boundaries", "Spending", "SpendingKind", "fixed_design_rejects"]
