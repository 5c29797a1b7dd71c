"""The adaptive procedure validated by simulation, statistics only (no model calls): thousands of
benchmarks drawn by resampling items from the offline demo's per-session metric table
(tests/stats/data/offline_demo_sessions.csv: 7 items x 3 levels x 4 strategies x 2 trials),
A/A twins and real (planted by the offline model) differences.

* The rate of false decisions stays at or under alpha, with a margin of three binomial standard
  errors -- and the same check FAILS a naive procedure that peeks with the fixed-n sign test
  after every round, so the margin is tight enough to catch a procedure that is wrong.
* The sessions the procedure saves are measured, and its decisions agree with the fixed design's
  on the same pool.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from ray_knowsim.stats import sequential as Q
from ray_knowsim.stats.adaptive import Procedure
from tests.stats.simulate import population, run_benchmark

TABLE = Path(__file__).parent / "data" / "offline_demo_sessions.csv"
ALPHA = 0.05


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(TABLE)


def margin(n: int, p: float = ALPHA) -> float:
    return 3.0 * math.sqrt(p * (1 - p) / n)


def test_peeking_after_every_item_keeps_the_error_rate_and_the_naive_peek_does_not(table):
    """One A/A pair (two trials of the adaptive tutor, labels swapped at random per item), looked
    at after every one of 100 resampled items, 4000 benchmarks."""
    pop = population(table, {"A": ("adaptive", 0), "A2": ("adaptive", 1)}, ["kg", "co"], ["novice", "advanced"],
                     twins=[("A", "A2")])
    rng = np.random.default_rng(20)
    n_bench, pool = 4000, 100
    rates = {}
    for lv, m in (("novice", "kg"), ("advanced", "co")):
        s = pop.signs[(lv, m, "A", "A2")]
        draws = rng.integers(0, pop.n_items, (n_bench, pool))
        signs = s[draws, rng.integers(0, 2, (n_bench, pool))]
        k, n = np.cumsum(signs > 0, axis=1), np.cumsum(signs != 0, axis=1)
        anytime = (Q.log_evidence(k, n, 0.5) >= math.log(1 / ALPHA)).any(axis=1)
        tail = st.binom.cdf(np.minimum(k, n - k), np.maximum(n, 1), 0.5)
        naive = ((2 * tail < ALPHA) & (n > 0)).any(axis=1)  # the fixed-n sign test, at every look
        rates[(lv, m)] = (anytime.mean(), naive.mean())
        # the vectorised rule above is the procedure's: check it on the first benchmarks
        for b in range(40):
            proc = Procedure.build(["t"], [lv], [m], ["A", "A2"], "ranking", ALPHA)
            decided_at = None
            for t in range(pool):
                proc.look({(0, ("A", "A2")): (int(k[b, t]), int(n[b, t]))}, t + 1)
                if proc.decisions[0].verdicts[("A", "A2")].direction != 0:
                    decided_at = t
                    break
            assert (decided_at is not None) == bool(anytime[b])
    for (lv, m), (anytime_rate, naive_rate) in rates.items():
        assert anytime_rate <= ALPHA + margin(n_bench), (lv, m, anytime_rate)
        assert naive_rate > ALPHA + margin(n_bench), (lv, m, naive_rate)  # the check catches a wrong procedure
    print("A/A false decision rate (anytime, naive peek):", {k: tuple(round(x, 4) for x in v) for k, v in rates.items()})


@pytest.mark.parametrize("conditions,twins", [
    ({"A": ("adaptive", 0), "A2": ("adaptive", 1), "M": ("minimal", 0), "C": ("comprehensive", 0)}, [("A", "A2")]),
    ({"A": ("adaptive", 0), "M": ("minimal", 0), "C": ("comprehensive", 0), "S": ("socratic", 0)}, []),
], ids=["with-aa-twins", "four-strategies"])
def test_family_of_decisions_error_rate_sessions_saved_and_agreement_with_the_fixed_design(table, conditions, twins):
    """decide: best over KG and CO at three levels (36 pairs in the family), pools of 30 items in
    rounds of 5, 500 benchmarks per scenario."""
    pop = population(table, conditions, ["kg", "co"], ["novice", "intermediate", "advanced"], twins=twins)
    rng = np.random.default_rng(7)
    n_bench = 500
    out = [run_benchmark(pop, rng, pool=30, per_round=5, alpha=ALPHA) for _ in range(n_bench)]
    false_rate = np.mean([o.false_claims > 0 for o in out])
    fixed_false = np.mean([o.fixed_false_claims > 0 for o in out])
    share = np.mean([o.sessions / o.sessions_fixed for o in out])
    agree = [o.winners[k] == o.fixed_winners[k] for o in out for k in o.winners
             if o.winners[k] is not None and o.fixed_winners[k] is not None]
    adaptive_decided = np.mean([w is not None for o in out for w in o.winners.values()])
    fixed_decided = np.mean([w is not None for o in out for w in o.fixed_winners.values()])
    print(f"{list(conditions)}: false-decision rate {false_rate:.3f} (fixed {fixed_false:.3f}); sessions used "
          f"{share:.3f} of the fixed design; decisions made {adaptive_decided:.3f} (fixed {fixed_decided:.3f}); "
          f"winners agree {np.mean(agree) if agree else float('nan'):.3f} of {len(agree)}")
    assert false_rate <= ALPHA + margin(n_bench)
    assert fixed_false <= ALPHA + margin(n_bench)
    assert share < 1.0  # eliminated conditions stop costing sessions
    assert agree and np.mean(agree) >= 1 - 2 * ALPHA, len(agree)  # some decisions of both designs, and they agree
    assert adaptive_decided > 0.0
