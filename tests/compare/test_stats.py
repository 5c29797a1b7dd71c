"""Known answers for the comparison statistics (scipy or hand computation)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from ray_knowsim.compare import stats as S


def test_sign_test_hand_computed():
    # 5 positive, 1 negative, 1 zero (dropped): n=6, P = 2 * (C(6,0) + C(6,1)) / 64
    p, pos, neg = S.sign_test([1, 2, 0.5, 3, 1, -1, 0])
    assert (pos, neg) == (5, 1)
    assert p == pytest.approx(2 * (1 + 6) / 64)


@pytest.mark.parametrize("pos,neg", [(0, 0), (3, 3), (10, 2), (1, 19), (40, 25), (0, 12)])
def test_sign_test_matches_scipy_binomtest(pos, neg):
    diffs = [1.0] * pos + [-2.0] * neg + [0.0] * 3
    p, _, _ = S.sign_test(diffs)
    want = 1.0 if pos + neg == 0 else st.binomtest(pos, pos + neg, 0.5, alternative="two-sided").pvalue
    assert p == pytest.approx(want, rel=1e-12)


def test_holm_hand_computed():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> monotone max 0.06
    assert S.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    out = S.holm([0.5, math.nan, 0.9])
    assert out[0] == pytest.approx(1.0) and math.isnan(out[1]) and out[2] == pytest.approx(1.0)
    assert S.holm([0.2]) == pytest.approx([0.2])


def test_cluster_sums_and_means():
    sums, counts = S.cluster_sums([0, 0, 1, 2, 2, 2], [1.0, 3.0, 5.0, math.nan, 2.0, 4.0], 3)
    assert sums.tolist() == [4.0, 5.0, 6.0] and counts.tolist() == [2.0, 1.0, 2.0]
    w = np.array([[1.0, 1.0, 1.0], [3.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    means = S.cluster_means(w, sums, counts)
    assert means[0] == pytest.approx(15 / 5) and means[1] == pytest.approx(2.0) and math.isnan(means[2])


def test_item_weights_draw_n_items_each():
    w = S.item_weights(7, 500, seed=3)
    assert w.shape == (500, 7) and (w.sum(axis=1) == 7).all()
    assert np.allclose(w.mean(axis=0), 1.0, atol=0.15)
    assert np.array_equal(w, S.item_weights(7, 500, seed=3))


def test_cluster_bootstrap_with_one_cell_per_item_matches_scipy_bootstrap():
    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 1.0, size=40)
    w = S.item_weights(40, 20000, seed=1)
    sums, counts = S.cluster_sums(np.arange(40), x, 40)
    reps = S.cluster_means(w, sums, counts)
    lo, hi = S.percentile_ci(reps)
    ref = st.bootstrap((x,), np.mean, n_resamples=20000, method="percentile", random_state=2).confidence_interval
    assert lo == pytest.approx(ref.low, abs=0.03) and hi == pytest.approx(ref.high, abs=0.03)
    # the bootstrap SE of a mean is sd * sqrt((n-1)/n) / sqrt(n) (plug-in)
    assert S.bootstrap_se(reps) == pytest.approx(x.std(ddof=0) / math.sqrt(40), rel=0.03)


def test_cluster_bootstrap_keeps_items_together():
    # every item's cells are identical within the item: the cluster bootstrap sees 4 values, not 40
    vals = np.repeat([0.0, 1.0, 2.0, 3.0], 10)
    idx = np.repeat(np.arange(4), 10)
    w = S.item_weights(4, 20000, seed=5)
    reps = S.cluster_means(w, *S.cluster_sums(idx, vals, 4))
    item_means = np.array([0.0, 1.0, 2.0, 3.0])
    assert S.bootstrap_se(reps) == pytest.approx(item_means.std(ddof=0) / 2.0, rel=0.03)


def test_percentile_ci_hand():
    lo, hi = S.percentile_ci(np.arange(0, 101, dtype=float), level=0.9)
    assert (lo, hi) == pytest.approx((5.0, 95.0))
    assert all(math.isnan(v) for v in S.percentile_ci(np.array([math.nan])))


def test_prob_best_orientation_and_ties():
    reps = np.array([[1.0, 2.0, 0.0], [3.0, 2.0, 0.0], [2.0, 2.0, 0.0], [math.nan, 1.0, 1.0]])
    hi = S.prob_best(reps, higher_is_better=True)
    assert hi == pytest.approx([(0 + 1 + 0.5) / 3, (1 + 0 + 0.5) / 3, 0.0])
    lo = S.prob_best(reps, higher_is_better=False)
    assert lo == pytest.approx([0.0, 0.0, 1.0])


def test_mde_known_answer():
    # (1.959964 + 0.841621) * se
    assert S.mde(0.1) == pytest.approx(0.2801585, rel=1e-5)
    assert S.mde(0.1, alpha=0.01, power=0.9) == pytest.approx((st.norm.ppf(0.995) + st.norm.ppf(0.9)) * 0.1)
    assert math.isnan(S.mde(math.nan))


def test_normal_ci_known_answer():
    lo, hi = S.normal_ci(1.0, 0.5, 0.95)
    assert (lo, hi) == pytest.approx((1.0 - 1.959964 * 0.5, 1.0 + 1.959964 * 0.5), rel=1e-6)
    lo, hi = S.normal_ci(0.0, 1.0, 1 - 0.05 / 10)
    assert hi == pytest.approx(st.norm.ppf(1 - 0.0025))
    assert all(math.isnan(v) for v in S.normal_ci(math.nan, 1.0))
