"""Known answers for the cluster bootstrap over items (scipy or hand computation)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from ray_knowsim.stats import bootstrap as S


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
