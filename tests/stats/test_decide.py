""""best" beats every other condition directly; cycles are named; what stays in play."""

from __future__ import annotations

from ray_knowsim.stats.decide import Decision, PairVerdict, find_cycle


def decision(kind="best", conds=("A", "B", "C")) -> Decision:
    return Decision("t", "novice", "kg", kind, list(conds), True)


def test_best_needs_direct_wins_over_every_other_condition():
    d = decision()
    d.update({("A", "B"): PairVerdict(1), ("B", "C"): PairVerdict(1)}, 1)  # A > B > C, A vs C open
    assert not d.decided and d.winner is None  # transitivity is not a test: A has not beaten C
    assert d.candidates() == ["A"] and d.in_play() == {"A", "C"}  # B is done: beaten, its pair with A resolved
    assert d.eliminated == {"B": 1}
    d.update({("A", "C"): PairVerdict(1)}, 2)
    assert d.decided and d.winner == "A" and d.after_round == 2 and d.in_play() == set()


def test_a_cycle_of_significant_beats_is_no_winner_and_named():
    d = decision()
    d.update({("A", "B"): PairVerdict(1), ("B", "C"): PairVerdict(1), ("A", "C"): PairVerdict(-1)}, 3)
    assert d.decided and d.winner is None and d.cycle == ["A", "B", "C", "A"]
    r = decision("ranking")
    r.update({("A", "B"): PairVerdict(1), ("B", "C"): PairVerdict(1), ("A", "C"): PairVerdict(-1)}, 3)
    assert r.decided and r.order is None and r.cycle == ["A", "B", "C", "A"]
    assert find_cycle({"A": {"B"}, "B": set()}, ["A", "B"]) is None


def test_pairs_decided_by_direction_or_equivalence_and_ranking_order():
    p = decision("pairs", ("A", "B"))
    p.update({("A", "B"): PairVerdict(0, within=True)}, 1)
    assert p.decided
    r = decision("ranking")
    r.update({("A", "B"): PairVerdict(-1), ("B", "C"): PairVerdict(1), ("A", "C"): PairVerdict(1)}, 1)
    assert r.order == ["B", "A", "C"]
