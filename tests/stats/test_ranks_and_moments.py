"""Ranks with ties, the one mean-rank definition, streaming moments (known answers)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ray_knowsim.stats.descriptive import Moments
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS, higher_is_better, mean_rank, mean_rank_metrics, rank_min


def test_rank_min_ties_share_the_best_rank_and_skip_missing():
    values = {"a": 0.5, "b": 0.7, "c": 0.7, "d": None, "e": 0.1}
    assert rank_min(values, lower_is_better=False) == {"a": 3, "b": 1, "c": 1, "d": None, "e": 4}
    assert rank_min(values, lower_is_better=True) == {"a": 2, "b": 3, "c": 3, "d": None, "e": 1}
    # float noise from summing in another order is a tie, not a rank difference
    assert rank_min({"x": 0.1 + 0.2, "y": 0.3}, False) == {"x": 1, "y": 1}
    assert rank_min({"x": float("nan"), "y": 2.0}, False) == {"x": None, "y": 1}


def test_rank_min_matches_pandas_min_method():
    rng = np.random.default_rng(3)
    vals = {f"c{i}": float(v) for i, v in enumerate(rng.integers(0, 4, 12))}
    ref = pd.Series(vals).rank(method="min", ascending=False).astype(int).to_dict()
    assert rank_min(vals, lower_is_better=False) == ref


def test_mean_rank_skips_missing():
    assert mean_rank([1, 3, None, 2]) == 2.0 and mean_rank([1.0, float("nan")]) == 1.0
    assert mean_rank([None, None]) is None


def test_the_mean_rank_metrics_are_one_per_construct():
    assert MEAN_RANK_METRICS == ("kg", "dc", "co", "iq")
    assert mean_rank_metrics("es", "nkg") == ("nkg_es", "dc_es", "co_es", "iq")
    assert not higher_is_better("co") and not higher_is_better("cost_usd") and higher_is_better("iq@other")


def test_moments_merge_equals_whole():
    rng = np.random.default_rng(0)
    xs = rng.normal(2.0, 1.5, 101)
    parts = Moments()
    for chunk in np.array_split(xs, 7):
        parts = parts.merge(Moments.of(chunk))
    assert parts.n == 101 and parts.mean == pytest.approx(xs.mean(), rel=1e-12)
    assert parts.m2 == pytest.approx(((xs - xs.mean()) ** 2).sum(), rel=1e-9)
    assert parts.sd == pytest.approx(xs.std(ddof=1), rel=1e-9) and parts.sum == pytest.approx(xs.sum())
    assert Moments.of([None, float("nan")]).n == 0 and Moments.of([1.0]).sd is None


def test_item_sums_count_and_sum_each_items_values_skipping_nan():
    from ray_knowsim.stats.descriptive import clustered_mean, item_sums

    counts, sums = item_sums([0, 0, 1, 2, 2, 2], [1.0, 3.0, 5.0, math.nan, 2.0, 4.0], 4)
    assert counts.tolist() == [2.0, 1.0, 2.0, 0.0] and sums.tolist() == [4.0, 5.0, 6.0, 0.0]
    cm = clustered_mean(counts, sums)  # cell-weighted mean of the items with values: (4 + 5 + 6) / 5
    assert cm.mean == pytest.approx(3.0) and cm.n_items == 3
