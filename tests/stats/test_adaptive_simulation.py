"""The adaptive procedure validated by simulation, statistics only (no model calls), through the
same :class:`~ray_knowsim.stats.adaptive.Procedure` the runner and the planning replay use
(tests/stats/simulate.py). Fixed seeds; replicate counts chosen so that each claim is checked
with a margin of three binomial standard errors.

* A/A (exchangeable conditions, skewed discrete item means with many ties): the rate of benchmarks
  with any false claim stays at or under alpha, looking after every round.
* A planted best-of-4 (adjacent item win rates 0.62, 0.62, 0.66; a pool of 100; rounds of 5):
  the exact group-sequential design makes at least as many decisions as the fixed design the
  product ran before (exact sign test, Bonferroni over the family) with at most 0.85 of its
  sessions, and never names a wrong winner.
* A win-rate cycle (A>B 0.70, B>C 0.70, C>A 0.60): a winner -- which another condition beats --
  is named in at most alpha of the benchmarks.
"""

from __future__ import annotations

import math

import numpy as np

from tests.stats.simulate import cycle3, null_discrete, run_once, shifted_normals

ALPHA = 0.05


def margin(n: int, p: float = ALPHA) -> float:
    return 3.0 * math.sqrt(p * (1 - p) / n)


def test_a_a_false_decisions_stay_under_alpha_with_a_look_every_round():
    rng = np.random.default_rng(20)
    reps = 400
    out = [run_once(null_discrete(3), ["A", "B", "C"], rng, pool=60, per_round=5) for _ in range(reps)]
    false = np.mean([bool(o.claims) for o in out])
    print(f"A/A: benchmarks with a false claim {false:.4f} (fixed design {np.mean([bool(o.fixed_claims) for o in out]):.4f})")
    assert false <= ALPHA + margin(reps)
    assert all(o.sessions == o.sessions_fixed for o in out if not o.claims)  # nothing decided: everything runs


def test_planted_best_of_four_decides_at_least_as_often_as_the_fixed_design_with_fewer_sessions():
    draw, _ = shifted_normals([0.62, 0.62, 0.66])
    rng = np.random.default_rng(11)
    reps = 200
    out = [run_once(draw, ["A", "B", "C", "D"], rng, pool=100, per_round=5) for _ in range(reps)]
    adaptive = np.mean([o.decided for o in out])
    fixed_bonferroni = np.mean([o.bonferroni_decided for o in out])
    fixed_holm = np.mean([o.fixed_decided for o in out])
    share = np.sum([o.sessions for o in out]) / np.sum([o.sessions_fixed for o in out])
    wrong = np.mean([w not in (None, "D") for o in out for w in o.winners])
    print(f"best-of-4: decided {adaptive:.3f} (fixed, Bonferroni {fixed_bonferroni:.3f}; fixed, Holm {fixed_holm:.3f}) "
          f"with {share:.3f} of the sessions; wrong winners {wrong:.3f}")
    assert adaptive >= fixed_bonferroni
    assert share <= 0.85
    assert wrong == 0.0


def test_a_cycle_of_win_rates_names_no_winner_that_another_condition_beats():
    rng = np.random.default_rng(5)
    reps = 300
    out = [run_once(cycle3(), ["A", "B", "C"], rng, pool=100, per_round=5) for _ in range(reps)]
    named = np.mean([o.winners[0] is not None for o in out])
    cycles = np.mean([o.decided and o.winners[0] is None for o in out])
    print(f"cycle: a winner named in {named:.4f} (fixed {np.mean([o.fixed_winners[0] is not None for o in out]):.4f}); "
          f"no winner with the cycle named in {cycles:.4f}")
    assert named <= ALPHA + margin(reps)
