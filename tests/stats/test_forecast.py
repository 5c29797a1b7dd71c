"""The adaptive design's forecast (stats/forecast.py, issue 49): its simulation agrees with the
exact power calculation where both apply, the fixed design reaches the stated power at the pool
``items_needed`` plans, and the figure is deterministic and sized to a dry run's time."""

from __future__ import annotations

import pytest

from ray_knowsim.config.adaptive import AdaptiveConfig
from ray_knowsim.stats.feasibility import exact_power, items_needed
from ray_knowsim.stats.forecast import MIN_BENCHMARKS, benchmarks_for, forecast

POWER = 0.8


def _build(metrics=("kg",), conditions=("a", "b"), levels=("novice",), **spec):
    ad = AdaptiveConfig.model_validate({"decide": "best", "metrics": list(metrics), "alpha": 0.05, **spec})
    return lambda: ad.procedure(["t"], list(levels), list(conditions))


@pytest.mark.parametrize("win_rate", [0.65, 0.72])
def test_the_simulated_fixed_design_has_the_exact_power(win_rate):
    """One pair, one decision (a family of 1): the fixed design's share decided is the exact sign
    test's power, within the simulation's noise."""
    f = forecast(_build(), {"t": 40}, 5, win_rate, benchmarks=400, seed=3)
    exact = exact_power(40, win_rate, 0.05)
    assert abs(f.fixed_decided.mean - exact) <= 3 * f.fixed_decided.se + 0.01, (f.fixed_decided, exact)


def test_at_the_planned_pool_the_fixed_design_reaches_the_stated_power():
    """items_needed's pool, simulated: the power is reached (within noise), one item fewer falls short."""
    n = items_needed(0.7, 0.05, 1, POWER)
    at = forecast(_build(), {"t": n}, 5, 0.7, benchmarks=600, seed=5)
    assert at.fixed_decided.mean >= POWER - 3 * at.fixed_decided.se, (n, at.fixed_decided)
    assert exact_power(n - 1, 0.7, 0.05) < POWER <= exact_power(n, 0.7, 0.05)
    # the adaptive design stops early and spends fewer sessions; what it decides is stated beside
    assert at.sessions.mean < 1.0 and 0.0 < at.decided.mean <= 1.0


def test_a_forecast_is_deterministic_for_its_seed_and_says_its_figures():
    a = forecast(_build(metrics=("dc", "co")), {"t": 30}, 5, 0.65, benchmarks=50, seed=42)
    b = forecast(_build(metrics=("dc", "co")), {"t": 30}, 5, 0.65, benchmarks=50, seed=42)
    assert a == b and a.benchmarks == 50
    line = a.line()
    assert f"decides {a.decided.text()} of its decisions (the fixed design {a.fixed_decided.text()})" in line
    assert f"with {a.sessions.text()} of the fixed design's sessions" in line


def test_the_number_of_benchmarks_is_sized_to_the_design():
    small = _build()()
    assert benchmarks_for(small, 6) == 200
    big = _build(metrics=("kg", "dc", "co"), conditions=("a", "b", "c", "d"), levels=("n", "i", "a"))()
    assert benchmarks_for(big, 20) == 0  # 54 pairs in one family over 20 rounds: too slow for a dry run
    per_decision = _build(metrics=("kg", "dc", "co"), conditions=("a", "b", "c", "d"), levels=("n", "i", "a"),
                          family="decision")()
    assert benchmarks_for(per_decision, 20) >= MIN_BENCHMARKS


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="win_rate"):
        forecast(_build(), {"t": 30}, 5, 0.5)
    with pytest.raises(ValueError, match="every task needs items"):
        forecast(_build(), {"t": 0}, 5, 0.65)
