"""Known answers for the pure statistics (the paper's binomial counts, hand-worked deltas/rhos)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_knowsim.stats.association import binomial_p_greater, cliffs_delta, jaccard, sign, spearman, zscores

PAPER_COUNTS = [
    (27, 37, 0.0038), (26, 35, 0.0030), (13, 17, 0.0245), (14, 20, 0.0577),
    (16, 20, 0.0059), (10, 15, 0.1509), (13, 13, 0.0001), (10, 12, 0.0193),
]


@pytest.mark.parametrize("k,n,p", PAPER_COUNTS)
def test_one_sided_binomial_matches_the_paper(k, n, p):
    assert round(binomial_p_greater(k, n), 4) == p


def test_binomial_edges():
    assert binomial_p_greater(0, 5) == 1.0
    assert binomial_p_greater(5, 5) == pytest.approx(1 / 32)
    assert math.isnan(binomial_p_greater(0, 0))
    with pytest.raises(ValueError):
        binomial_p_greater(6, 5)


@pytest.mark.parametrize(
    "x,y,delta",
    [
        ([3, 4, 5], [1, 2, 3], 8 / 9),  # 8 pairs x>y, one tie (3,3)
        ([1, 2, 3], [2, 2], 0.0),
        ([1, 5], [2, 3, 4], 0.0),
        ([1, 2], [3], -1.0),
        ([2, 4, 6, 8], [1, 5], 0.5),  # greater 6, less 2 of 8
        ([2, 0, 0.5, 1], [0, 0, 1, 1, 1], 0.15),  # 5 - 3 - 1 + 2 = 3 of 20
    ],
)
def test_cliffs_delta_hand_cases(x, y, delta):
    assert cliffs_delta(x, y) == pytest.approx(delta, abs=1e-15)


def test_cliffs_delta_needs_values():
    with pytest.raises(ValueError):
        cliffs_delta([], [1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=12), st.lists(st.integers(0, 6), min_size=1, max_size=12))
def test_cliffs_delta_equals_brute_force_and_is_antisymmetric(x, y):
    brute = sum((a > b) - (a < b) for a in x for b in y) / (len(x) * len(y))
    assert cliffs_delta(x, y) == pytest.approx(brute, abs=1e-12)
    assert cliffs_delta(y, x) == pytest.approx(-brute, abs=1e-12)


def test_spearman_hand_cases():
    # no ties: d = (0, -1, 1, 0) -> 1 - 6*2 / (4*15) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4])[0] == pytest.approx(0.8)
    # ties: y ranks (1, 2, 3.5, 5, 3.5) -> 8 / sqrt(10 * 9.5)
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7])[0] == pytest.approx(8 / math.sqrt(95))
    assert spearman([1, 2, 3], [3, 2, 1])[0] == pytest.approx(-1.0)
    assert all(math.isnan(v) for v in spearman([1, 2], [1, 2]))
    assert all(math.isnan(v) for v in spearman([1, 2, 3], [4, 4, 4]))


def test_zscores_population_sd():
    assert zscores([1, 2, 3]) == pytest.approx([-math.sqrt(1.5), 0.0, math.sqrt(1.5)])
    assert zscores([5, 5, 5]) == [0.0, 0.0, 0.0]
    assert zscores([]) == []


def test_jaccard_and_sign():
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard({"a"}, set()) == 0.0
    assert jaccard(set(), set()) is None
    assert [sign(v) for v in (-0.2, 0, 3, None, float("nan"))] == [-1, 0, 1, 0, 0]
