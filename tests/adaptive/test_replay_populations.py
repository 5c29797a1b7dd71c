"""An independent check of the adaptive decisions, as the issue's checker does it: planted
populations written here (none of them the populations the design was tuned on) run through the
public planning entry point ``ray_knowsim.adaptive.replay(rows, spec)`` -- per-session rows in, what
``decisions.json`` would hold out -- never through internal functions. Statistics only, fixed seeds.

Each replay holds many independent benchmarks: one task per benchmark (its own pool of items,
in its own seeded order), ``family: decision`` (each decision its own Holm family), so one call
replays dozens of benchmarks. Counted per decision: decided, winner, the claims of its pair
verdicts (a claim against the population's direction, or any claim on an equal pair, is false),
and the sessions the replay ran against its ``sessions_fixed``; the fixed design of the same rows
is the replay's own ``fixed_design``.

Bounds (issue 28, item 7): A/A false decisions <= alpha; adjacent effects: at least as many
decisions as the fixed design with at most 0.85 of its sessions (the issue's planted best-of-4,
and populations the design was not tuned on: at least as many, fewer sessions); a cycle: no
winner that another condition beats (<= alpha); many ties (most items tie): no false decision
beyond alpha, and at least the fixed design's decisions. Each error bound is checked with a margin
of three binomial standard errors of its replicate count. Every replayed record also goes through
the report's verdicts (``report.verdicts.from_record``: the leaderboards the results tables take
their positions and ★ from): no board places a condition below one it significantly beats, and
the ★ is exactly the decision's winner.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from ray_knowsim.adaptive import replay

ALPHA = 0.05
BENCH = 20  # benchmarks per population in the timed tests (the slow test runs each with 150)


def rows_of(means: np.ndarray, names: list[str], trials: int = 1) -> pd.DataFrame:
    """Per-session rows from per-(benchmark, item, trial, condition) KG values: one task per
    benchmark, one knowledge level."""
    b, n, t, k = means.shape
    idx = np.indices(means.shape).reshape(4, -1)
    return pd.DataFrame({
        "task": np.char.add("t", idx[0].astype(str)), "knowledge_level": "novice",
        "condition": np.array(names)[idx[3]], "item_id": np.char.add("q", idx[1].astype(str)),
        "trial": idx[2], "status": "ok", "kg": means.reshape(-1)})


def run(means: np.ndarray, names: list[str], per_round: int = 5, decide: str = "best") -> dict:
    trials = means.shape[2]
    return replay(rows_of(means, names, trials), {"decide": decide, "metrics": ["kg"], "alpha": ALPHA, "family": "decision",
                                                  "round": {"items": per_round, "trials": trials}}, seed=11)


def claims(decision: dict, key: str = "pairs") -> list[tuple[str, str]]:
    out = []
    for p in decision[key]:
        if p["verdict"] in ("a_better", "b_better"):
            win = p["condition_a"] if p["verdict"] == "a_better" else p["condition_b"]
            out.append((win, p["condition_b"] if win == p["condition_a"] else p["condition_a"]))
    return out


def board_disagreements(out: dict) -> list[str]:
    """The report's leaderboards of the replayed record (``report.verdicts.from_record``, what the
    results tables take their positions and ★ from) against the record's own significant verdicts:
    a winner placed below its loser, or a ★ on a condition that does not beat every other."""
    from ray_knowsim.report.verdicts import from_record
    from ray_knowsim.schema.decisions import DecisionsFile

    record = DecisionsFile.model_validate({k: v for k, v in out.items() if k not in ("fixed_design", "sessions_available")})
    verdicts = from_record(record)
    bad = []
    for p in verdicts.significant():
        board = verdicts.boards[(p.task, p.level, p.metric)]
        loser = p.b if p.better == p.a else p.a
        same_cycle = any(p.better in c and loser in c for c in board.cycles)
        if board.position[p.better] > board.position[loser] or (board.position[p.better] == board.position[loser] and not same_cycle):
            bad.append(f"{p.task}/{p.level}: {p.better} beats {loser} but is placed {board.position[p.better]} vs {board.position[loser]}")
    for d in record.decisions:
        star = verdicts.stars.get((d.task, d.knowledge_level, d.metric))
        if star != d.winner:
            bad.append(f"{d.task}: star {star} but winner {d.winner}")
    return bad


def summary(out: dict, better: set[tuple[str, str]]) -> dict:
    assert board_disagreements(out) == []  # the leaderboard never orders a pair against its own verdict
    ds, fx = out["decisions"], out["fixed_design"]["decisions"]
    return {
        "n": len(ds),
        "decided": np.mean([d["decided"] for d in ds]), "fixed": np.mean([d["decided"] for d in fx]),
        "fixed_only": np.mean([f["decided"] and not d["decided"] for d, f in zip(ds, fx)]),
        "false": np.mean([any(c not in better for c in claims(d)) for d in ds]),
        "fixed_false": np.mean([any(c not in better for c in claims(f)) for f in fx]),
        "share": out["sessions_run"] / out["sessions_fixed"],
        "winners": [d["winner"] for d in ds],
    }


def margin(n: int, p: float = ALPHA) -> float:
    return 3.0 * math.sqrt(p * (1 - p) / n)


def kg_like(rng, shape, rate_scale=1.0) -> np.ndarray:
    """Skewed, discrete, zero-heavy session KG: about half of the sessions gain nothing."""
    rates = rng.gamma(1.5, 1.0 / 3.0, size=shape) * rate_scale
    return np.where(rng.random(shape) < 0.5, 0.0, rng.poisson(3 * rates)).astype(float)


def adjacent(rng, b, n, win_rates) -> np.ndarray:
    """Normal item means with an item effect, spaced for the adjacent item win rates."""
    from scipy import stats as st

    mu = np.concatenate([[0.0], np.cumsum([math.sqrt(2) * st.norm.ppf(q) for q in win_rates])])
    return (rng.normal(size=(b, n, 1, 1)) + mu + rng.normal(size=(b, n, 1, len(mu))))


def test_a_a_with_kg_like_ties_makes_no_more_false_decisions_than_alpha(b=BENCH):
    rng = np.random.default_rng(2801)
    names = ["p", "q", "r"]
    means = kg_like(rng, (b, 40, 2, 3))  # 40 items, 2 trials per item
    s = summary(run(means, names), set())
    print(f"A/A, 3 conditions, KG-like: false {s['false']:.3f} (fixed {s['fixed_false']:.3f}), sessions {s['share']:.3f}")
    assert s["false"] <= ALPHA + margin(s["n"])
    assert s["share"] < 1.0  # curtailment: a pair that can no longer cross stops before the pool's end


def test_the_issues_best_of_four_decides_as_often_as_fixed_with_at_most_085_of_the_sessions(b=BENCH):
    rng = np.random.default_rng(2802)
    means = adjacent(rng, b, 100, [0.62, 0.62, 0.66])
    s = summary(run(means, list("ABCD")), {(a, b) for a, b in combinations("DCBA", 2)})
    print(f"best-of-4 (issue): decided {s['decided']:.3f} vs fixed {s['fixed']:.3f}, fixed only {s['fixed_only']:.3f}, "
          f"sessions {s['share']:.3f}, false {s['false']:.3f}")
    assert s["decided"] >= s["fixed"] and s["share"] <= 0.85
    assert all(w in (None, "D") for w in s["winners"])


def cycle_means(rng, b, n, shares=(0.42, 0.32, 0.26)) -> np.ndarray:
    """Per item one of the orders p>q>r, q>r>p, r>p>q (shares): P(p>q) = 0.68, P(q>r) = 0.74,
    P(r>p) = 0.58 -- every condition is beaten by another on its item win rate."""
    orders = np.array([[2, 1, 0], [0, 2, 1], [1, 0, 2]], dtype=float)
    return orders[rng.choice(3, size=(b, n), p=list(shares))][:, :, None, :] + rng.normal(0, 0.01, size=(b, n, 1, 3))


def test_a_cycle_never_names_a_winner_that_another_condition_beats(b=BENCH):
    rng = np.random.default_rng(2803)
    out = run(cycle_means(rng, b, 100), ["p", "q", "r"])
    assert board_disagreements(out) == []
    named = np.mean([d["winner"] is not None for d in out["decisions"]])
    cycles = [d["cycle"] for d in out["decisions"] if d["decided"] and d["winner"] is None]
    print(f"cycle: a winner named in {named:.3f}; no winner with the cycle named in {len(cycles) / len(out['decisions']):.3f}; "
          f"sessions {out['sessions_run'] / out['sessions_fixed']:.3f}")
    assert named <= ALPHA + margin(len(out["decisions"]))
    assert all(c and c[0] == c[-1] and len(c) == 4 for c in cycles)


def many_ties(rng, b, n, tie_share=0.85, decisive_win=0.85) -> np.ndarray:
    """Most items tie exactly (every condition gains the same); on the rest u beats v and w
    (v and w exchangeable) with probability ``decisive_win``."""
    base = rng.poisson(1.0, size=(b, n, 1, 1)).astype(float)
    tie = rng.random((b, n, 1, 1)) < tie_share
    u = np.where(rng.random((b, n, 1, 1)) < decisive_win, 1.0, -1.0)
    vw = rng.integers(0, 2, size=(b, n, 1, 2)).astype(float)
    x = np.concatenate([base + 1.5 + 0.5 * u, base + vw], axis=3)
    return np.where(tie, base, x)


def test_many_ties_make_no_false_decision_and_decide_as_often_as_fixed(b=BENCH):
    rng = np.random.default_rng(2804)
    out = run(many_ties(rng, b, 100, decisive_win=0.8), ["u", "v", "w"])
    s = summary(out, {("u", "v"), ("u", "w")})
    ties = np.mean([p["ties"] / p["matched"] for d in out["decisions"] for p in d["pairs"] if p["matched"]])
    print(f"many ties ({ties:.2f} of matched items tie): decided {s['decided']:.3f} vs fixed {s['fixed']:.3f}, fixed only "
          f"{s['fixed_only']:.3f}, sessions {s['share']:.3f}, false {s['false']:.3f}")
    assert ties > 0.5
    assert s["false"] <= ALPHA + margin(s["n"]) and all(w in (None, "u") for w in s["winners"])
    assert s["decided"] >= s["fixed"] and s["share"] < 1.0


def test_adjacent_effects_the_design_was_not_tuned_on_decide_as_often_as_fixed_with_fewer_sessions(b=BENCH):
    rng = np.random.default_rng(2805)
    means = adjacent(rng, b, 80, [0.66, 0.70])  # best-of-3, a pool of 80
    s = summary(run(means, ["x", "y", "z"], per_round=8), {("z", "y"), ("z", "x"), ("y", "x")})
    print(f"adjacent 0.66, 0.70, pool 80, rounds of 8: decided {s['decided']:.3f} vs fixed {s['fixed']:.3f}, fixed only "
          f"{s['fixed_only']:.3f}, sessions {s['share']:.3f}, false {s['false']:.3f}")
    assert s["decided"] >= s["fixed"] and s["share"] < 0.85
    assert all(w in (None, "z") for w in s["winners"])


@pytest.mark.slow
@pytest.mark.parametrize("check", [test_a_a_with_kg_like_ties_makes_no_more_false_decisions_than_alpha,
                                   test_the_issues_best_of_four_decides_as_often_as_fixed_with_at_most_085_of_the_sessions,
                                   test_a_cycle_never_names_a_winner_that_another_condition_beats,
                                   test_many_ties_make_no_false_decision_and_decide_as_often_as_fixed,
                                   test_adjacent_effects_the_design_was_not_tuned_on_decide_as_often_as_fixed_with_fewer_sessions],
                         ids=lambda f: f.__name__[5:40])
def test_the_same_bounds_hold_over_150_benchmarks(check):
    check(150)
