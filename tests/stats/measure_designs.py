"""The figures of docs/adaptive.md: decisions made and sessions used by each design on planted
populations (statistics only). Run: ``python -m tests.stats.measure_designs [REPS]``.

Designs: the exact group-sequential sign test (HSD gamma -4, and the Lan-DeMets Pocock type),
the anytime Krichevsky-Trofimov sequence, the fixed exact sign test (Holm closure, and Bonferroni
as compare adjusts), and a fixed mean-difference design (paired t-test on item differences, Holm).
"""

from __future__ import annotations

import sys
from itertools import combinations

import numpy as np
from scipy import stats as st

from ray_knowsim.stats.adaptive import Design
from ray_knowsim.stats.decide import Decision, PairVerdict
from ray_knowsim.stats.group_sequential import Spending
from ray_knowsim.stats.multiplicity import holm_closure
from tests.stats.simulate import cycle3, null_discrete, run_once, shifted_normals

DESIGNS = {
    "group-sequential sign, HSD(-4)": Design("group_sequential", Spending("hsd", -4.0)),
    "group-sequential sign, Pocock type": Design("group_sequential", Spending("pocock")),
    "anytime KT sequence": Design("anytime"),
}


def t_design(draw, names, rng, pool=100, alpha=0.05) -> int:
    """Fixed mean-difference design: paired t over the pool's item differences, Holm closure."""
    x = draw(rng, pool)
    d = Decision("t", "l0", "kg", "best", list(names), True)
    pvals, signs = {}, {}
    for a, b in combinations(names, 2):
        diff = x[:, names.index(a)] - x[:, names.index(b)]
        res = st.ttest_1samp(diff, 0.0)
        pvals[(a, b)], signs[(a, b)] = float(res.pvalue), int(np.sign(diff.mean()))
    res = holm_closure(list(pvals), lambda k, lv: pvals[k] <= lv, alpha)
    d.update({k: PairVerdict(signs[k]) for k, r in res.items() if r.rejected}, 1)
    return int(d.decided and d.winner is not None)


def main(reps: int = 200) -> None:
    names = ["A", "B", "C", "D"]
    draw, _ = shifted_normals([0.62, 0.62, 0.66])
    print(f"planted best-of-4 (adjacent item win rates 0.62, 0.62, 0.66), pool 100, rounds of 5, {reps} benchmarks")
    for label, design in DESIGNS.items():
        out = [run_once(draw, names, np.random.default_rng(1000 + r), design=design) for r in range(reps)]
        share = sum(o.sessions for o in out) / sum(o.sessions_fixed for o in out)
        print(f"  {label}: decided {np.mean([o.decided for o in out]):.3f}, sessions {share:.3f} of the fixed design; "
              f"fixed exact sign (Holm) {np.mean([o.fixed_decided for o in out]):.3f}, "
              f"fixed exact sign (Bonferroni) {np.mean([o.bonferroni_decided for o in out]):.3f}")
    t = [t_design(draw, names, np.random.default_rng(1000 + r)) for r in range(reps)]
    print(f"  fixed paired t-test on mean differences (Holm): decided {np.mean(t):.3f}, sessions 1.000")
    for label, drw, nm in (("A/A (3 exchangeable, discrete, ties)", null_discrete(3), ["A", "B", "C"]),
                           ("cycle A>B 0.70, B>C 0.70, C>A 0.60", cycle3(), ["A", "B", "C"])):
        out = [run_once(drw, nm, np.random.default_rng(5000 + r), pool=100) for r in range(reps)]
        print(f"  {label}: any claim {np.mean([bool(o.claims) for o in out]):.3f} (fixed {np.mean([bool(o.fixed_claims) for o in out]):.3f}); "
              f"winner named {np.mean([o.winners[0] is not None for o in out]):.3f}; "
              f"sessions {sum(o.sessions for o in out) / sum(o.sessions_fixed for o in out):.3f}")
    # the skewed example: item difference +1 on 65 % of items, -3 on 35 %: the two quantities disagree
    rng = np.random.default_rng(9)
    sign_a = t_b = 0
    for _ in range(reps * 5):
        diff = np.where(rng.random(100) < 0.65, 1.0, -3.0)
        w, lo = int((diff > 0).sum()), int((diff < 0).sum())
        sign_a += st.binomtest(w, w + lo, 0.5).pvalue <= 0.05 and w > lo
        r = st.ttest_1samp(diff, 0.0)
        t_b += r.pvalue <= 0.05 and diff.mean() < 0
    print(f"  skewed (+1 on 65 %, -3 on 35 % of 100 items): sign test says A better in {sign_a / (reps * 5):.3f}, "
          f"t-test on means says B better in {t_b / (reps * 5):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
