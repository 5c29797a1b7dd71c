"""``decide: pairs`` with an effect (issue 49, items 1 and 2), statistics only, no Ray.

* An equivalence claim passes no alpha on: it leaves "no difference" possibly true, so counting it
  as a rejection in Holm's closure raised the other pairs' direction levels (A/A, 4 conditions,
  a pool of 150, effect 0.2: a false direction claim in 0.16 of the benchmarks). Checked by
  construction (the level of a direction test never rises with equivalence claims) and by
  simulation (fixed and adaptive, at most alpha within three binomial standard errors).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ray_knowsim.stats.adaptive import Procedure
from ray_knowsim.stats.sequential import equivalent
from ray_knowsim.stats.signs import sign_test
from ray_knowsim.stats.winrate import WinCounts
from tests.doubles.adaptive_sim import normals, run_once

ALPHA = 0.05
EFFECT = 0.2


def margin(n: int, p: float = ALPHA) -> float:
    return 3.0 * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("family", ["run", "decision"])
@pytest.mark.parametrize("adaptive", [False, True])
def test_an_equivalence_claim_never_raises_the_level_of_a_direction_test(family, adaptive):
    """(a, b) and (a, c): 29 wins, 13 losses, 18 ties, sign test p = 0.0195, between alpha/3 and
    alpha/2; (b, c): 60 ties, within the effect at any level. Before, (b, c)'s equivalence counted
    as a rejection and (a, b), (a, c) were claimed at alpha/2; with another level whose three pairs
    are all within the effect (``family: run``), at alpha/3 of a family of 6 they were claimed too."""
    differ, tied = WinCounts(60, 29, 13, 18), WinCounts(60, 0, 0, 60)
    assert ALPHA / 3 < sign_test(29, 13) < ALPHA / 2 and not equivalent(29, 18, 13, EFFECT, ALPHA / 2)
    levels = ["l0"] if family == "decision" else ["l0", "l1"]
    proc = Procedure.build(["t"], levels, ["kg"], ["a", "b", "c"], "pairs", ALPHA, EFFECT, family=family)
    counts = {(0, ("a", "b")): differ, (0, ("a", "c")): differ, (0, ("b", "c")): tied}
    counts |= {(1, p): tied for p in proc.decisions[0].pairs if len(levels) == 2}
    if adaptive:
        proc.look(counts, {"t": 1.0}, 1)
        out = proc
    else:
        out = proc.fixed(counts)
    m = 3 * len(levels) if family == "run" else 3
    d = out.decisions[0]
    assert d.verdicts[("b", "c")].within and d.better(("b", "c")) is None
    for pair in [("a", "b"), ("a", "c")]:
        assert d.better(pair) is None, pair
        assert out.level_of((0, pair)) == pytest.approx(ALPHA / m)
    assert not d.decided
    assert "Bonferroni" in out.describe()


def test_without_an_effect_holm_still_passes_alpha_on():
    """``best``: a rejected direction frees its share (Holm's closure), as before."""
    proc = Procedure.build(["t"], ["l0"], ["kg"], ["a", "b", "c"], "best", ALPHA)
    strong = WinCounts(40, 30, 0, 10)
    out = proc.fixed({(0, ("a", "b")): WinCounts(60, 29, 13, 18), (0, ("a", "c")): strong, (0, ("b", "c")): strong})
    d = out.decisions[0]
    assert d.better(("a", "b")) == "a" and out.level_of((0, ("a", "b"))) == pytest.approx(ALPHA / 2)  # crossed at alpha / 2
    assert "Holm" in out.describe() and "Bonferroni" not in out.describe()


def test_a_a_pairs_with_an_effect_keeps_the_family_wise_error_under_alpha():
    """A/A, 4 conditions (6 pairs), a pool of 150 in 3 rounds, effect 0.2: equivalence is shown for
    most pairs, so the old closure tested the rest at up to alpha -- 0.160 false (fixed 0.165) on
    these 200 seeds; now 0.040 (0.035)."""
    reps = 200
    out = [run_once(normals([0.0] * 4), list("ABCD"), np.random.default_rng(900 + r), pool=150, per_round=50, kind="pairs",
                    effect=EFFECT) for r in range(reps)]
    adaptive = np.mean([bool(o.claims) for o in out])  # under A/A every direction claim is false
    fixed = np.mean([bool(o.fixed_claims) for o in out])
    print(f"A/A pairs, effect {EFFECT}: any false direction claim {adaptive:.3f} (fixed {fixed:.3f})")
    assert adaptive <= ALPHA + margin(reps) and fixed <= ALPHA + margin(reps)
    assert np.mean([o.decided for o in out]) > 0.2  # equivalence is still shown
