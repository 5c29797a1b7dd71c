"""The exact group-sequential sign test: its error is exact (checked by enumerating every path),
a single look is the fixed sign test, its interval is its own inversion, and Holm's closure over
a family of such tests."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ray_knowsim.stats import group_sequential as GS
from ray_knowsim.stats.multiplicity import holm_closure
from ray_knowsim.stats.signs import sign_test, win_rate_interval


def test_spending_functions():
    for sp in (GS.Spending("hsd", -4), GS.Spending("hsd", 1), GS.Spending("hsd", 0), GS.Spending("pocock")):
        f = [sp.fraction(t) for t in np.linspace(0, 1, 11)]
        assert f[0] == 0 and f[-1] == 1 and all(x < y for x, y in zip(f, f[1:]))
    assert GS.Spending("hsd", 0).fraction(0.3) == pytest.approx(0.3)
    assert GS.Spending("pocock").fraction(0.5) == pytest.approx(math.log(1 + (math.e - 1) / 2))


def test_one_look_is_the_exact_sign_test_and_its_interval_clopper_pearson():
    for alpha in (0.05, 0.01, 0.05 / 36):
        for n in range(0, 31):
            for w in range(n + 1):
                assert (GS.fixed_design_rejects(w, n - w, alpha) != 0) == (sign_test(w, n - w) <= alpha), (alpha, w, n)
    seq = GS.PairSequence()
    seq.add(1.0, 20, 15)
    assert seq.interval(0.05) == pytest.approx(win_rate_interval(15, 5, 0.95), abs=1e-6)


@pytest.mark.parametrize("spending", [GS.Spending("hsd", -4), GS.Spending("pocock"), GS.Spending("hsd", 1)])
def test_error_is_exact_by_enumerating_every_path_with_ties(spending):
    """Looks after 4 rounds of 4 items; a fixed pattern of ties (decisive counts 3, 6, 10, 13);
    every one of the 2^13 sign paths enumerated: P(cross) per side <= alpha / 2, and the DP's
    boundaries are the ones enumeration finds."""
    alpha = 0.2
    cal = [(0.25, 3), (0.5, 6), (0.75, 10), (1.0, 13)]
    bounds = GS.boundaries(cal, alpha / 2, spending)
    up = down = 0.0
    for signs in itertools.product((0, 1), repeat=13):
        w = np.cumsum(signs)
        for (t, n), (lo, hi) in zip(cal, bounds):
            if w[n - 1] >= hi:
                up += 0.5 ** 13
                break
            if w[n - 1] <= lo:
                down += 0.5 ** 13
                break
    assert up <= alpha / 2 + 1e-12 and down <= alpha / 2 + 1e-12
    assert up == pytest.approx(down)
    # each look spends at most its share: cumulative crossing by look k <= alpha/2 * f(t_k)
    for k in range(1, len(cal) + 1):
        sub = GS.boundaries(cal[:k], alpha / 2, spending)
        assert sub == bounds[:k]  # boundaries of a look never depend on later looks


def test_a_a_error_with_random_ties_and_a_look_every_round():
    rng = np.random.default_rng(0)
    reps, alpha, hits = 1500, 0.05, 0
    for _ in range(reps):
        seq, dec, w = GS.PairSequence(), 0, 0
        for k in range(1, 21):
            m = int(rng.binomial(5, 0.6))
            dec, w = dec + m, w + int(rng.binomial(m, 0.5))
            seq.add(k / 20, dec, w)
        hits += seq.test(alpha)[0] != 0
    assert hits / reps <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)


def test_interval_excludes_half_exactly_when_the_test_crossed():
    rng = np.random.default_rng(1)
    for _ in range(40):
        seq, dec, w = GS.PairSequence(), 0, 0
        q = rng.choice([0.5, 0.7, 0.85])
        for k in range(1, 7):
            m = int(rng.binomial(5, 0.8))
            dec, w = dec + m, w + int(rng.binomial(m, q))
            seq.add(k / 6, dec, w)
        lo, hi = seq.interval(0.05)
        crossed = seq.test(0.05)[0]
        assert (lo > 0.5 or hi < 0.5) == (crossed != 0), (lo, hi, crossed)


def test_holm_closure_equals_holms_step_down_for_monotone_tests():
    p = {"a": 0.001, "b": 0.013, "c": 0.02, "d": 0.3}
    res = holm_closure(p, lambda k, level: p[k] <= level, 0.05)
    # Holm: 0.001 <= 0.05/4, 0.013 <= 0.05/3, 0.02 <= 0.05/2, 0.3 > 0.05
    assert {k for k, r in res.items() if r.rejected} == {"a", "b", "c"}
    assert res["a"].level == pytest.approx(0.05 / 4) and not res["d"].rejected
    assert holm_closure([], lambda k, lv: True, 0.05) == {}
