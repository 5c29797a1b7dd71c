"""How well the item-clustered 95 % interval of a mean covers at few items, on KG-like data.

The tables' interval (:func:`ray_knowsim.stats.descriptive.clustered_mean`: item-clustered
standard error, Student-t on items - 1 degrees of freedom) assumes the item means are roughly
normal. Knowledge gain is not: it is a count of IU state steps, zero for many items (an item the
tutor does not move) and long-tailed for the rest. :func:`simulate_coverage` measures the
interval on a KG-like population (:func:`kg_like`: with probability 0.55 an item gains nothing;
else its sessions gain Poisson(lambda) steps with lambda ~ Gamma(1.5, scale 3); one session per
item), through ``clustered_mean`` itself; :data:`MEASURED` holds the figures (20,000 benchmarks
per size, seed 0) and :func:`interval_coverage` is what the report says about an interval over
``n`` items: how far it falls short of 95 %, and how often it has zero width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ray_knowsim.stats.descriptive import clustered_mean

P_ZERO_ITEM = 0.55
GAMMA_SHAPE, GAMMA_SCALE = 1.5, 3.0
TRUE_MEAN = (1.0 - P_ZERO_ITEM) * GAMMA_SHAPE * GAMMA_SCALE


def kg_like(rng: np.random.Generator, n_items: int, trials: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(counts, sums) of one benchmark: ``(1, n_items)`` arrays, as clustered_mean takes them."""
    lam = np.where(rng.random(n_items) < P_ZERO_ITEM, 0.0, rng.gamma(GAMMA_SHAPE, GAMMA_SCALE, n_items))
    sums = rng.poisson(lam[:, None], size=(n_items, trials)).sum(axis=1).astype(float)
    return np.full((1, n_items), float(trials)), sums[None, :]


def simulate_coverage(n_items: int, reps: int = 20_000, seed: int = 0, trials: int = 1) -> tuple[float, float]:
    """(coverage of TRUE_MEAN, share of zero-width intervals) over ``reps`` benchmarks."""
    rng = np.random.default_rng(seed)
    covered = zero = 0
    for _ in range(reps):
        cm = clustered_mean(*kg_like(rng, n_items, trials))
        if math.isnan(cm.ci_low):
            continue
        covered += cm.ci_low <= TRUE_MEAN <= cm.ci_high
        zero += cm.ci_high - cm.ci_low == 0.0
    return covered / reps, zero / reps


#: n_items -> (coverage, zero-width share): simulate_coverage(n, 20_000, seed=0), measured 2026-12-01
MEASURED: dict[int, tuple[float, float]] = {
    3: (0.702, 0.223), 5: (0.807, 0.082), 10: (0.861, 0.006), 20: (0.896, 0.000), 30: (0.910, 0.000),
}

NOMINAL = 0.95


@dataclass(frozen=True)
class Coverage:
    n_items: int
    nominal: float
    measured: float | None  # None: more items than measured (taken to be close to nominal)
    shortfall: float  # nominal - measured (0 when not measured)
    zero_width: float | None  # share of zero-width intervals at this size

    def line(self) -> str:
        if self.measured is None:
            return f"{self.n_items} items: coverage not measured beyond {max(MEASURED)} items"
        return (f"with {self.n_items} items the 95 % interval covers about {self.measured:.0%} on KG-like data "
                f"({self.shortfall:.0%} short; {self.zero_width:.0%} of intervals have zero width)")


def interval_coverage(n_items: int) -> Coverage:
    """The measured coverage at ``n_items`` (the nearest measured size at or below it: coverage
    rises with items, so that is conservative)."""
    sizes = [n for n in sorted(MEASURED) if n <= n_items]
    if not sizes or n_items > max(MEASURED):
        return Coverage(n_items, NOMINAL, None, 0.0, None)
    cov, zero = MEASURED[sizes[-1]]
    return Coverage(n_items, NOMINAL, cov, max(0.0, NOMINAL - cov), zero)


__all__ = ["Coverage", "MEASURED", "NOMINAL", "TRUE_MEAN", "interval_coverage", "kg_like", "simulate_coverage"]
