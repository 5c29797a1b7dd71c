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
    assert new.play == "curtail"  # the default: open_pairs until the family's curtailment says otherwise
    new.update(verdicts, 1)
    assert new.candidates() == ["C", "D"] and new.in_play() == {"A", "B", "C", "D"} and not new.eliminated
    old = Decision("t", "novice", "kg", "best", ["A", "B", "C", "D"], True, play="candidates")
    old.update(verdicts, 1)
    assert old.in_play() == {"C", "D"} and old.eliminated == {"A": 1, "B": 1}
    new.update({("A", "B"): PairVerdict(1)}, 2)  # A vs B resolved: A and B have nothing left to decide
    assert new.in_play() == {"C", "D"} and new.eliminated == {"A": 2, "B": 2}


def test_curtail_stops_a_pair_that_cannot_cross_and_keeps_a_decided_decisions_pairs_for_the_family():
    """``in_play: curtail`` over a family of two decisions (two levels): a pair that cannot cross
    at alpha even if every remaining item went its way stops (and never resumes); a decided
    decision's open pair keeps running while the other decision is open and can still cross; a
    decision no remaining data can decide stops asking for sessions."""
    from ray_knowsim.stats.adaptive import Design, Procedure
    from ray_knowsim.stats.group_sequential import PairSequence
    from ray_knowsim.stats.winrate import WinCounts

    seq = PairSequence()
    seq.add(0.5, 50, 25)  # half the pool at 25-25: it can still cross, but it is unlikely
    up, down = seq.chances(0.05, 50, 1.0)
    assert 0 < up < 0.05 and 0 < down < 0.05
    late = PairSequence()
    late.add(0.9, 90, 45)  # 10 items left at 45-45: no outcome crosses -- curtailment
    assert late.chances(0.05, 10, 1.0) == (0.0, 0.0)
    strong = PairSequence()
    strong.add(0.5, 50, 40)
    assert strong.chances(0.05, 50, 1.0)[0] > 0.99

    proc = Procedure.build(["t"], ["l0", "l1"], ["kg"], ["A", "B", "C"], "best", 0.05, design=Design())
    pool = 100

    def counts(n: int, wins: dict) -> dict:
        return {(i, p): WinCounts(n, w, n - w, 0) for i, d in enumerate(proc.decisions) for p in d.pairs
                for w in [wins[(d.level, p)] * n // 100]}

    # level l0: C beats A and B early (A vs B open, close); level l1: everything close
    rates = {("l0", ("A", "B")): 58, ("l0", ("A", "C")): 5, ("l0", ("B", "C")): 5,
             ("l1", ("A", "B")): 55, ("l1", ("A", "C")): 45, ("l1", ("B", "C")): 50}
    proc.look(counts(20, rates), {"t": 20 / pool}, 4)
    d0, d1 = proc.decisions
    assert d0.decided and d0.winner == "C" and not d1.decided
    assert (0, ("A", "B")) in proc.running()  # a helper: its rejection would pass alpha to l1
    assert proc.in_play()[("t", "l0")] == {"A", "B"}
    # l1 runs on; at 90 of 100 items nothing there can still cross: l1 is unreachable, every pair stops
    flat = {**rates, ("l1", ("A", "B")): 50, ("l1", ("A", "C")): 50, ("l0", ("A", "B")): 50}
    proc.look(counts(90, flat), {"t": 0.9}, 18)
    assert 1 in proc.unreachable and not d1.decided and proc.exhausted
    assert proc.running() == set() and all(not v for v in proc.in_play().values())
    assert d1.eliminated == {"A": 18, "B": 18, "C": 18}
    proc.look(counts(95, rates), {"t": 0.95}, 19)  # a stopped pair never resumes
    assert proc.running() == set()
