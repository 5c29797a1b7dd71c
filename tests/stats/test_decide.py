""""best" beats every other condition directly; cycles are named; what stays in play."""

from __future__ import annotations

from ray_knowsim.stats.decide import Decision, PairVerdict, find_cycle


def decision(kind="best", conds=("A", "B", "C")) -> Decision:
    return Decision("t", "novice", "kg", kind, list(conds), True)


def test_best_needs_direct_wins_over_every_other_condition():
    d = decision()
    d.update({("A", "B"): PairVerdict(1), ("B", "C"): PairVerdict(1)}, 1)  # A > B > C, A vs C open (either play rule)
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


def test_open_pairs_keeps_beaten_conditions_whose_pair_is_open_the_design_before_drops_them():
    # D and C beat A and B; A vs B and C vs D open: the closure can still reject A vs B and pass its alpha to C vs D
    verdicts = {("A", "C"): PairVerdict(-1), ("A", "D"): PairVerdict(-1), ("B", "C"): PairVerdict(-1),
                ("B", "D"): PairVerdict(-1)}
    new = decision(conds=("A", "B", "C", "D"))
    assert new.play == "open_pairs"  # the default
    new.update(verdicts, 1)
    assert new.candidates() == ["C", "D"] and new.in_play() == {"A", "B", "C", "D"} and not new.eliminated
    old = Decision("t", "novice", "kg", "best", ["A", "B", "C", "D"], True, play="candidates")
    old.update(verdicts, 1)
    assert old.in_play() == {"C", "D"} and old.eliminated == {"A": 1, "B": 1}
    new.update({("A", "B"): PairVerdict(1)}, 2)  # A vs B resolved: A and B have nothing left to decide
    assert new.in_play() == {"C", "D"} and new.eliminated == {"A": 2, "B": 2}
