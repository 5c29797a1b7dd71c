"""stats.rates: Fisher's two-sided p equals the exact hypergeometric sum computed here by
enumeration, and a gap counts only when it is both significant and at least the floor."""

from __future__ import annotations

from math import comb

import pytest

from ray_knowsim.stats.rates import rate_gap


def fisher_by_enumeration(fa: int, na: int, fb: int, nb: int) -> float:
    """Two-sided: the probability, with the margins fixed, of every table as or less likely than the observed."""
    failed, n = fa + fb, na + nb

    def prob(k: int) -> float:
        return comb(na, k) * comb(nb, failed - k) / comb(n, failed)

    observed = prob(fa)
    ks = range(max(0, failed - nb), min(na, failed) + 1)
    return sum(prob(k) for k in ks if prob(k) <= observed * (1 + 1e-7))


@pytest.mark.parametrize("fa,na,fb,nb", [(12, 30, 1, 30), (3, 30, 2, 30), (2, 4, 0, 4), (0, 20, 0, 25), (7, 9, 1, 11)])
def test_p_is_the_exact_hypergeometric_tail(fa, na, fb, nb):
    gap = rate_gap(fa, na, fb, nb)
    assert gap.p_value == pytest.approx(fisher_by_enumeration(fa, na, fb, nb), rel=1e-9)
    assert gap.diff == pytest.approx(fa / na - fb / nb)


def test_a_gap_needs_significance_and_the_floor():
    assert rate_gap(12, 30, 1, 30).differs  # 40% vs 3%: p ~ 0.001
    assert not rate_gap(2, 4, 0, 4).differs  # 50 points apart on 4 sessions each: p ~ 0.43
    big = rate_gap(400, 10_000, 340, 10_000)  # 0.6 points apart: significant, under the 5-point floor
    assert big.p_value < 0.05 and not big.differs
    assert rate_gap(400, 10_000, 340, 10_000, min_diff=0.005).differs
    with pytest.raises(ValueError):
        rate_gap(0, 0, 1, 3)
