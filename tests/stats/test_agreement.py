"""Agreement statistics against known answers: hand-computed cases and Krippendorff's own worked
example (Krippendorff 2011, "Computing Krippendorff's alpha-reliability": 4 coders, 12 units)."""

from __future__ import annotations

import math

import pytest

from ray_knowsim.stats.agreement import cohen_kappa, kendall_tau, krippendorff_alpha, rates

N = None
#: the worked example: nominal alpha 0.743, interval alpha 0.849 (published, to 3 decimals)
EXAMPLE = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]


def test_krippendorff_alpha_matches_the_published_example():
    assert krippendorff_alpha(EXAMPLE, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(EXAMPLE, "interval") == pytest.approx(0.849, abs=5e-4)


def test_krippendorff_alpha_by_hand():
    assert krippendorff_alpha([[1, 2, 3], [1, 2, 3]]) == pytest.approx(1.0)
    # two raters who swap: D_o = 1, D_e = 2/3 -> alpha = -0.5
    assert krippendorff_alpha([[1, 2], [2, 1]]) == pytest.approx(-0.5)
    # missing values: a unit with one value is not pairable and changes nothing
    assert krippendorff_alpha([[1, 2, 7], [2, 1, float("nan")]]) == pytest.approx(-0.5)
    assert math.isnan(krippendorff_alpha([[3, 3], [3, 3]]))  # no variation: undefined
    assert math.isnan(krippendorff_alpha([[1, N], [N, 2]]))  # nothing pairable


def test_cohen_kappa_and_rates_by_hand():
    # p_o = 3/4, p_e = 0.5 * 0.25 + 0.5 * 0.75 = 1/2 -> kappa = 1/2
    assert cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    assert cohen_kappa(list("abcab"), list("abcab")) == pytest.approx(1.0)
    assert cohen_kappa(["x", "y"], ["y", "x"]) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa(["x", "x"], ["x", "x"]))
    r = rates(["w", "w", "n", "n", "w"], ["w", "n", "n", "w", "w"], positive="w")
    assert (r.positives, r.negatives) == (3, 2) and r.tpr == pytest.approx(2 / 3) and r.tnr == pytest.approx(1 / 2)
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 2])


def test_kendall_tau_by_hand():
    # 5 concordant, 1 discordant pair of 6 -> 2/3
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))
    assert kendall_tau([1, 2, float("nan"), 3], [1, 2, 5, 3]) == pytest.approx(1.0)
