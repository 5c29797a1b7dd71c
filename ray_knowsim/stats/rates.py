"""Do two conditions fail at rates different enough to bias a comparison of their means?

Metrics are means over ok sessions only, so a condition that fails more often (a verbose tutor
truncating at the cap, an endpoint that times out) is measured on the cases it got through.
The rule, for one pair of conditions in one (task, level): **Fisher's exact test**, two-sided,
on the 2x2 table (failed, ok) x (condition a, condition b), and the gap counts when ``p < alpha``
AND the rates differ by at least ``min_diff`` (5 percentage points by default). Fisher's test is
exact at the small n of a cell (tens of sessions), where a normal two-proportion test is not;
the floor on the difference keeps a large run from flagging a 0.5-point gap that cannot move a
mean. The p-value is not adjusted for the number of pairs: a warning errs on the side of
speaking (a missed bias costs more than a second look).
"""

from __future__ import annotations

from dataclasses import dataclass

from ray_knowsim.stats.defaults import ALPHA

DEFAULT_MIN_DIFF = 0.05


@dataclass(frozen=True)
class RateGap:
    rate_a: float
    rate_b: float
    diff: float  # rate_a - rate_b
    p_value: float  # Fisher's exact test, two-sided, unadjusted
    differs: bool  # p_value < alpha and |diff| >= min_diff


def rate_gap(events_a: int, n_a: int, events_b: int, n_b: int, alpha: float = ALPHA,
             min_diff: float = DEFAULT_MIN_DIFF) -> RateGap:
    """The rule of the module docstring for ``events_a`` of ``n_a`` against ``events_b`` of ``n_b``
    (both n > 0)."""
    from scipy.stats import fisher_exact  # scipy.stats is slow to import: only when a pair is tested

    if n_a <= 0 or n_b <= 0:
        raise ValueError(f"rate_gap needs sessions on both sides (got n_a={n_a}, n_b={n_b})")
    p = float(fisher_exact([[events_a, n_a - events_a], [events_b, n_b - events_b]], alternative="two-sided")[1])
    ra, rb = events_a / n_a, events_b / n_b
    return RateGap(ra, rb, ra - rb, p, bool(p < alpha and abs(ra - rb) >= min_diff))


__all__ = ["DEFAULT_MIN_DIFF", "RateGap", "rate_gap"]
