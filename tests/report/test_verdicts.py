"""The report's verdicts: an adaptive run's own sequential verdicts (never a re-test), with counts,
sentences and a ★ only for a condition that beats every other; the Method text says what is computed."""

from __future__ import annotations

from types import SimpleNamespace as NS

from ray_knowsim.report.verdicts import from_record


def pair(a, b, better, **counts):
    return NS(condition_a=a, condition_b=b, better=better, within_effect=False, **counts)


def record(pairs, kind="best"):
    d = NS(task="math", knowledge_level="novice", metric="kg", kind=kind, decided=True, after_round=3, pairs=pairs)
    return NS(decisions=[d], procedure="exact sign group-sequential", alpha=0.05, family_size=len(pairs), spec={"effect": None})


def test_adaptive_verdicts_come_from_the_record_with_their_counts():
    rec = record([pair("A", "B", "A", matched=20, wins=14, losses=2, ties=4),
                  pair("A", "C", "A", matched=20, wins=12, losses=1, ties=7),
                  pair("B", "C", None, matched=20, wins=5, losses=5, ties=10)])
    v = from_record(rec)
    assert v.source == "adaptive" and "not re-tested with a fixed-sample test" in v.method
    first = v.pairs[0]
    assert (first.wins, first.losses, first.ties) == (14, 2, 4)
    assert first.sentence == ("A teaches more (KG) than B on novices: 14 of 20 items won, 2 lost, 4 tied; "
                              "sequential test over items, decided after round 3")
    assert v.stars == {("math", "novice", "kg"): "A"}  # A beats both others
    assert v.boards[("math", "novice", "kg")].order[0] == "A"
    assert [p.a + p.b for p in v.significant()] == ["AB", "AC"]


def test_no_star_for_an_unbeaten_condition_that_beats_not_every_other():
    rec = record([pair("A", "B", "A", matched=20, wins=14, losses=2, ties=4),
                  pair("A", "C", None, matched=20, wins=8, losses=8, ties=4),
                  pair("B", "C", None, matched=20, wins=6, losses=6, ties=8)])
    assert from_record(rec).stars == {}


def test_older_records_without_ties_say_so_and_are_oriented():
    rec = record([pair("A", "B", "B", wins_a=15, items=16)])
    rec.decisions[0].metric = "co"  # lower is better: a's raw wins (a - b > 0) are its losses
    p = from_record(rec).pairs[0]
    assert (p.wins, p.losses, p.ties) == (1, 15, None)
    assert p.sentence.startswith("B overloads less (CO) than A on novices: 15 of 16 items won, 1 lost")
    assert "ties not recorded" in p.sentence


def test_the_report_says_how_far_few_items_intervals_fall_short():
    from ray_knowsim.report.tables import Cell, LevelBlock, LevelRow, coverage_note
    from ray_knowsim.stats.descriptive import ClusteredMean, Moments

    ci = ClusteredMean(1.0, 0.5, 5, 5, 1, 0.0, 2.0)
    block = LevelBlock("novice", [LevelRow("A", 5, {"kg": Cell(Moments(5, 1.0, 1.0), ci)})])
    note = coverage_note([block])
    assert note is not None and "with 5 items the 95 % interval covers about 81%" in note and "14% short" in note
    many = ClusteredMean(1.0, 0.5, 500, 500, 1, 0.0, 2.0)
    assert coverage_note([LevelBlock("novice", [LevelRow("A", 500, {"kg": Cell(Moments(500, 1.0, 1.0), many)})])]) is None


def test_the_report_leaderboard_follows_the_verdicts():
    from ray_knowsim.report.decisions import _board_sections

    # B has the better mean item rank against C, but C significantly beats B: C is above B
    rec = record([pair("A", "B", "A", matched=20, wins=14, losses=2, ties=4),
                  pair("A", "C", "A", matched=20, wins=15, losses=1, ties=4),
                  pair("B", "C", "C", matched=20, wins=0, losses=9, ties=11)])
    h, md = _board_sections(from_record(rec), None)
    tiers = "tier 1: A ★ &gt; tier 2: C [C: below A] &gt; tier 3: B [B: below A, C]"
    assert tiers in h and any(tiers.replace("&gt;", ">") in line for line in md)
    assert "mean item rank (descriptive)" in h and "Smallest detectable effect: a win rate of 0.842" in h  # family of 3, 20 items
