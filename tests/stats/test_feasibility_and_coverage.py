"""Feasibility before spending, and the measured coverage of the item-clustered interval."""

from __future__ import annotations

import math

import pytest
from scipy import stats as st

from ray_knowsim.stats import coverage as C
from ray_knowsim.stats.feasibility import exact_power, feasibility, items_needed, min_items
from ray_knowsim.stats.signs import sign_test


def test_a_design_below_the_minimum_items_can_never_decide():
    # the own-tutor recipe's 7 items over a family of 18 pairs at alpha 0.05: a unanimous 7-0 is p = 2^-6
    f = feasibility(7, 0.05, 18)
    assert not f.can_decide and f.min_items == 10 and "can never decide" in f.line()
    assert sign_test(f.min_items, 0) < 0.05 / 18 <= sign_test(f.min_items - 1, 0)
    assert feasibility(100, 0.05, 6, win_rate=0.66).can_decide
    assert min_items(0.05, 1) == 6


def test_items_needed_has_the_stated_power_and_ties_cost_items():
    n = items_needed(0.7, 0.05, 1, 0.8)
    assert exact_power(n, 0.7, 0.05) >= 0.8 > exact_power(n - 1, 0.7, 0.05) - 0.02
    # no ties: the power is the binomial tail beyond the sign test's critical value
    crit = min(k for k in range(n + 1) if k > n / 2 and sign_test(k, n - k) <= 0.05)
    assert exact_power(n, 0.7, 0.05) == pytest.approx(st.binom.sf(crit - 1, n, 0.7) + st.binom.cdf(n - crit, n, 0.7), rel=1e-9)
    # the same decisive win rate 0.65 with 30 % of items tied (tie-inclusive 0.605) needs more items
    assert items_needed(0.65 * 0.7 + 0.15, 0.05, 6, 0.8, tie_rate=0.3) > items_needed(0.65, 0.05, 6, 0.8)
    assert items_needed(0.5, 0.05, 1) is None
    with pytest.raises(ValueError):
        exact_power(10, 0.95, 0.05, tie_rate=0.5)  # a 0.95 win rate is impossible with half the items tied


def test_the_measured_coverage_table_is_what_the_simulation_gives():
    for n in (3, 5):
        cov, zero = C.simulate_coverage(n, reps=2000, seed=1)
        want, want_zero = C.MEASURED[n]
        assert abs(cov - want) <= 3 * math.sqrt(want * (1 - want) / 2000) + 0.005
        assert abs(zero - want_zero) <= 3 * math.sqrt(max(want_zero, 0.01) / 2000) + 0.005
    c = C.interval_coverage(5)
    assert c.measured == C.MEASURED[5][0] and c.shortfall == pytest.approx(0.95 - C.MEASURED[5][0])
    assert "short" in c.line() and C.interval_coverage(4).measured == C.MEASURED[3][0]  # the size below: conservative
    assert C.interval_coverage(100).measured is None
