"""Can a design decide at all, and with how many items? (pure; what ``--dry-run`` says before spending)

Every verdict is an exact sign test on the item win rate (:mod:`.winrate`), and the first
rejection of a Holm family of ``m`` pairs is at ``alpha / m``; the most lopsided outcome of ``n``
decisive items (all one way) has two-sided p = 2^(1-n). So below :func:`min_items` decisive items
no design -- fixed, group-sequential or anytime -- can ever reach a verdict at that family size
(a group-sequential look spends at most ``alpha f(t) <= alpha``; the anytime sequence needs more).

:func:`items_needed` is the fixed design's exact binomial power calculation, ties included:
``N`` matched items of which a share ``tie_rate`` tie; the decisive ones are won with
``q = (theta - tie_rate / 2) / (1 - tie_rate)`` for a tie-inclusive win rate ``theta``. The
group-sequential design needs a few per cent more items for the same power at its last look
(docs/adaptive.md has the measured figures).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

from ray_knowsim.stats.signs import min_items as _min_items_at
from ray_knowsim.stats.defaults import POWER, WIN_RATE


def min_items(alpha: float, family_size: int) -> int:
    """Fewest decisive items at which a unanimous outcome is significant at ``alpha / family_size``."""
    return _min_items_at(alpha / max(1, int(family_size)))


def _decisive_rate(win_rate: float, tie_rate: float) -> float:
    if not 0.0 <= tie_rate < 1.0:
        raise ValueError(f"tie_rate must be in [0, 1) (got {tie_rate})")
    q = (win_rate - tie_rate / 2.0) / (1.0 - tie_rate)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"win rate {win_rate} is impossible with tie rate {tie_rate}")
    return q


def exact_power(n_items: int, win_rate: float, alpha: float, family_size: int = 1, tie_rate: float = 0.0) -> float:
    """Exact power of the fixed design's two-sided sign test at ``alpha / family_size`` with
    ``n_items`` matched items (ties random at ``tie_rate``) and tie-inclusive ``win_rate``."""
    level = alpha / max(1, int(family_size))
    q = _decisive_rate(win_rate, tie_rate)
    total = 0.0
    ds = np.arange(n_items + 1)
    p_d = _st.binom.pmf(ds, n_items, 1.0 - tie_rate)
    for d, pd_ in zip(ds, p_d):
        if pd_ < 1e-15 or d == 0:
            continue
        ks = np.arange(d + 1)
        central = np.minimum(1.0, 2.0 * np.minimum(_st.binom.cdf(ks, d, 0.5), _st.binom.sf(ks - 1, d, 0.5)))
        reject = central <= level
        total += pd_ * float(_st.binom.pmf(ks[reject], d, q).sum())
    return total


def items_needed(win_rate: float, alpha: float, family_size: int, power: float = POWER,
                 tie_rate: float = 0.0, limit: int = 20_000) -> int | None:
    """Fewest matched items for the fixed design to detect ``win_rate`` with ``power``
    (None: win rate 1/2, or more than ``limit``)."""
    if abs(win_rate - 0.5) < 1e-12:
        return None
    lo = max(1, math.ceil(min_items(alpha, family_size) / max(1e-9, 1.0 - tie_rate)))
    hi = lo
    while exact_power(hi, win_rate, alpha, family_size, tie_rate) < power:
        if hi >= limit:
            return None
        lo, hi = hi, min(limit, hi * 2)
    while lo < hi:  # (power is nearly monotone in n; the bisection finds a first crossing)
        mid = (lo + hi) // 2
        if exact_power(mid, win_rate, alpha, family_size, tie_rate) >= power:
            hi = mid
        else:
            lo = mid + 1
    return hi


@dataclass(frozen=True)
class Feasibility:
    n_items: int  # items the design has (per decision: the pool of its task)
    alpha: float
    family_size: int
    level: float  # alpha / family_size: the first Holm step
    min_items: int  # below this many decisive items nothing can be decided
    can_decide: bool  # n_items >= min_items
    win_rate: float  # the effect planned for (tie-inclusive item win rate)
    power: float  # wanted
    tie_rate: float
    items_needed: int | None  # matched items for that effect at that power (fixed design)
    power_at_n: float  # the power the design has at n_items for that effect

    def line(self) -> str:
        if not self.can_decide:
            return (f"can never decide: {self.n_items} items < the {self.min_items} an exact sign test needs at alpha "
                    f"{self.alpha:g} over a family of {self.family_size} (alpha/m = {self.level:.2g})")
        need = "more than the limit" if self.items_needed is None else f"{self.items_needed}"
        return (f"can decide: {self.n_items} items >= {self.min_items}; a win rate of {self.win_rate:.2f} is found with "
                f"power {self.power_at_n:.2f} at these items ({need} items for power {self.power:.2f})")


def feasibility(n_items: int, alpha: float, family_size: int, *, win_rate: float = WIN_RATE, power: float = POWER,
                tie_rate: float = 0.0) -> Feasibility:
    """Per decision: can the design ever reach a verdict with ``n_items`` items at this alpha and
    family size, and how many items a ``win_rate`` effect needs at ``power``."""
    need_min = min_items(alpha, family_size)
    return Feasibility(n_items=int(n_items), alpha=alpha, family_size=int(family_size), level=alpha / max(1, family_size),
                       min_items=need_min, can_decide=n_items >= need_min, win_rate=win_rate, power=power,
                       tie_rate=tie_rate, items_needed=items_needed(win_rate, alpha, family_size, power, tie_rate),
                       power_at_n=float(exact_power(int(n_items), win_rate, alpha, family_size, tie_rate)) if n_items else 0.0)


__all__ = ["Feasibility", "exact_power", "feasibility", "items_needed", "min_items"]
