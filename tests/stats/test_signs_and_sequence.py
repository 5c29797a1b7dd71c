"""The paired verdicts: the fixed-design sign test over items with its Clopper-Pearson inversion,
and the anytime-valid Krichevsky-Trofimov confidence sequence (exact known answers)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special as sp
from scipy import stats as st

from ray_knowsim.stats import sequential as Q
from ray_knowsim.stats import signs as G
from ray_knowsim.stats.multiplicity import bonferroni


@pytest.mark.parametrize("pos,neg", [(0, 0), (3, 3), (10, 2), (1, 19), (40, 25), (0, 12)])
def test_sign_test_matches_scipy_binomtest(pos, neg):
    want = 1.0 if pos + neg == 0 else st.binomtest(pos, pos + neg, 0.5).pvalue
    assert G.sign_test(pos, neg) == pytest.approx(want, rel=1e-12)


def test_sign_counts_drop_ties_and_missing_items():
    c = G.sign_counts([1.0, 2.0, 0.0, -0.5, math.nan, 1e-15])
    assert (c.pos, c.neg, c.tied, c.n) == (2, 1, 2, 3)
    assert G.item_means([0, 0, 1, 2], [1.0, 3.0, math.nan, 5.0], 4)[[0, 2]].tolist() == [2.0, 5.0]


def test_test_and_interval_are_one_verdict_for_every_outcome():
    for alpha in (0.05, 0.05 / 6, 0.05 / 96):
        for n in range(0, 41):
            for pos in range(n + 1):
                v = G.verdict(G.SignCounts(pos, n - pos, 0), alpha)
                assert v.significant == (v.p_value < alpha), (alpha, pos, n)
                assert (v.ci_low <= 0.5 <= v.ci_high) != v.significant, (alpha, pos, n)


def test_clopper_pearson_known_answer():
    lo, hi = G.win_rate_interval(7, 3, 0.95)
    assert lo == pytest.approx(st.beta.ppf(0.025, 7, 4)) and hi == pytest.approx(st.beta.ppf(0.975, 8, 3))
    assert G.win_rate_interval(0, 0, 0.95) == (0.0, 1.0)


def test_min_items_is_where_a_unanimous_outcome_first_becomes_significant():
    for alpha in (0.05, 0.01, 0.05 / 27, 0.05 / 384):
        n = G.min_items(alpha)
        assert G.sign_test(n, 0) < alpha <= G.sign_test(n - 1, 0)
    assert G.min_items(0.05) == 6 and G.min_items(0.05 / 384) == 14


def test_mde_has_the_stated_power_and_shift_effect_inverts_the_normal():
    q = G.mde_win_rate(30, 0.05, 0.8)
    rejects = [k for k in range(31) if k > 15 and G.sign_test(k, 30 - k) < 0.05]
    assert st.binom.sf(min(rejects) - 1, 30, q) == pytest.approx(0.8, abs=1e-9)
    assert math.isnan(G.mde_win_rate(3, 0.05))
    assert G.shift_effect(st.norm.cdf(0.5), 2.0) == pytest.approx(1.0)


def test_bonferroni():
    assert bonferroni([0.01, 0.2, math.nan]).tolist()[:2] == pytest.approx([0.02, 0.4])
    assert bonferroni([0.3], m=10).tolist() == [1.0]


def test_mixture_evidence_closed_form_and_martingale():
    # M_n(p0) = B(k + 1/2, n - k + 1/2) / B(1/2, 1/2) / (p0^k (1 - p0)^(n - k))
    k, n, p0 = 7, 10, 0.4
    want = math.exp(sp.betaln(k + 0.5, n - k + 0.5) - sp.betaln(0.5, 0.5)) / (p0 ** k * (1 - p0) ** (n - k))
    assert math.exp(float(Q.log_evidence(k, n, p0))) == pytest.approx(want, rel=1e-12)
    # a martingale under p0: E[M_{n+1} | k of n] = M_n exactly
    for p0 in (0.5, 0.3):
        for n in range(6):
            for k in range(n + 1):
                here = math.exp(float(Q.log_evidence(k, n, p0)))
                nxt = p0 * math.exp(float(Q.log_evidence(k + 1, n + 1, p0))) + (1 - p0) * math.exp(float(Q.log_evidence(k, n + 1, p0)))
                assert nxt == pytest.approx(here, rel=1e-10)


def test_sequence_interval_excludes_half_exactly_when_the_evidence_reached_one_over_alpha():
    alpha = 0.01
    for n in range(1, 40):
        for k in range(n + 1):
            lo, hi = Q.interval(k, n, alpha)
            rejected = float(Q.log_evidence(k, n, 0.5)) >= math.log(1 / alpha)
            assert (lo > 0.5 or hi < 0.5) == rejected, (k, n)
            assert lo <= k / n <= hi


def test_anytime_sequence_keeps_a_decision_and_its_interval_is_the_running_intersection():
    s = Q.AnytimeSequence()
    s.add(0.1, 12, 12)
    assert s.test(0.01) == (1, 0) and s.interval(0.01)[0] > 0.5
    s.add(0.2, 20, 13)  # later losses do not undo it: the sequence is the intersection
    assert s.test(0.01) == (1, 0) and s.interval(0.01)[0] >= Q.interval(12, 12, 0.01)[0]


def test_equivalence_evidence_is_anytime_valid_and_ties_make_equivalence_reachable():
    # all ties: the tie-inclusive win rate is 1/2 exactly; 40 tied items show |theta - 1/2| < 0.15
    assert Q.equivalent(0, 40, 0, 0.15, 0.05) and not Q.equivalent(0, 5, 0, 0.15, 0.05)
    assert not Q.equivalent(30, 0, 10, 0.15, 0.05)  # 0.75 is not within 0.5 +- 0.15
    # at theta exactly on the margin, looked at after every item: P(ever claimed) <= alpha
    rng = np.random.default_rng(3)
    theta0 = 0.65
    ever = 0
    for _ in range(300):
        y = rng.random(150) < theta0  # wins with probability 0.65, no ties: on the margin
        w = np.cumsum(y)
        n = np.arange(1, 151)
        ev = [Q.equivalence_evidence(int(a), 0, int(b - a), theta0, below=True) for a, b in zip(w[::5], n[::5])]
        ever += max(ev) >= math.log(1 / 0.05)
    assert ever / 300 <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300)


def test_ville_bound_by_simulation_and_one_item_never_decides():
    # 2000 fair sequences of 200 items, looked at after every item: P(ever >= 1/alpha) <= alpha
    rng = np.random.default_rng(0)
    wins = rng.random((2000, 200)) < 0.5
    k = np.cumsum(wins, axis=1)
    n = np.arange(1, 201)
    ever = (Q.log_evidence(k, n[None, :], 0.5) >= math.log(1 / 0.05)).any(axis=1)
    assert ever.mean() <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 2000)
    assert float(Q.log_evidence(1, 1, 0.5)) < math.log(2.0)
