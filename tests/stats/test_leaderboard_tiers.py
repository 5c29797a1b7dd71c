"""Issue 49 (items 4 and 5): a leaderboard's positions are tiers from the significant verdicts --
a winner never shares a tier with its loser, no verdict means one tier, a cycle is named -- and
every order says the run's smallest detectable effect and marks a step with no verdict n.s."""

from __future__ import annotations

from pathlib import Path
import itertools

import numpy as np

from ray_knowsim.stats.leaderboard import Detectable, board, board_line, contradicts, tier_note
from ray_knowsim.stats.signs import sign_test


def test_a_winner_and_its_loser_never_share_a_tier_even_at_equal_mean_item_ranks():
    # the example: three conditions at mean item rank 2.0, a beats c 15-0 with 15 ties of 30
    # (b wins 3/4 of its items against a and against c -- not significant -- so every mean item rank is 2.0)
    theta = {("a", "c"): (15 + 15 / 2) / 30, ("a", "b"): 0.25, ("b", "c"): 0.25}
    b = board(["a", "b", "c"], theta, [("a", "c")])
    assert {round(v, 9) for v in b.mean_item_rank.values()} == {2.0}
    assert b.tier["a"] < b.tier["c"]  # the old pairwise sharing gave {a: 1, b: 1, c: 1}
    assert b.tier["b"] == 1  # nobody beats b: it may share with a (no verdict separates them)
    assert not contradicts(b.order, [("a", "c")]) and not b.cycles
    assert tier_note(b, "c") == "below a; n.s. vs b"
    assert board_line(b).startswith("tier 1: a, b (n.s. between them) > tier 2: c [c: below a; n.s. vs b]")


def test_no_verdict_gives_one_tier_whatever_the_means():
    rng = np.random.default_rng(49)
    conds = list("ABCD")
    for _ in range(50):  # A/A: noisy win rates, no verdict
        theta = {(i, j): float(rng.uniform(0.3, 0.7)) for i, j in itertools.combinations(conds, 2)}
        b = board(conds, theta, [])
        assert set(b.tier.values()) == {1} and b.star is None
        assert board_line(b).startswith("tier 1: ") and " > tier" not in board_line(b) and "(n.s. between them)" in board_line(b)


def test_a_total_order_of_verdicts_gives_distinct_tiers():
    conds = ["D", "C", "B", "A"]
    beats = [(w, l) for w, l in itertools.combinations("ABCD", 2)]  # A beats B, C, D; B beats C, D; C beats D
    b = board(conds, {p: 0.9 for p in beats}, beats)
    assert b.tier == {"A": 1, "B": 2, "C": 3, "D": 4} and b.order == list("ABCD") and b.star == "A"
    assert "n.s." not in board_line(b)


def test_a_chain_without_the_long_verdict_marks_the_step_not_significant():
    # a beats b, b beats c, a vs c not significant: tiers follow the chain, the missing verdict is said
    b = board(list("abc"), {}, [("a", "b"), ("b", "c")])
    assert b.tier == {"a": 1, "b": 2, "c": 3}
    assert tier_note(b, "c") == "below b"
    b2 = board(list("abcd"), {}, [("a", "b"), ("d", "c")])
    assert b2.tier == {"a": 1, "d": 1, "b": 2, "c": 2}
    assert tier_note(b2, "b") == "below a; n.s. vs d" and tier_note(b2, "c") == "below d; n.s. vs a"


def test_a_cycle_shares_one_tier_and_is_named_and_what_it_beats_is_below():
    beats = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]
    b = board(list("abcd"), {}, beats)
    assert b.tier == {"a": 1, "b": 1, "c": 1, "d": 2} and b.cycles == [["a", "b", "c"]]
    assert "tier 1: a, b, c (cycle a > b > c > a: no order among them)" in board_line(b)
    assert tier_note(b, "a") == "cycle a > b > c > a" and tier_note(b, "d") == "below c; n.s. vs a, b"


def test_tiers_never_hold_a_winner_with_its_loser_on_random_verdicts():
    rng = np.random.default_rng(4)
    conds = list("ABCDEF")
    for _ in range(100):
        beats = [(i, j) if rng.random() < 0.5 else (j, i) for i, j in itertools.combinations(conds, 2) if rng.random() < 0.3]
        b = board(conds, {}, beats)
        for w, l in beats:
            assert b.tier[w] < b.tier[l] or any({w, l} <= set(cy) for cy in b.cycles)  # a shared tier only in a named cycle
        for c in conds:  # every step down has a verdict under it: tier t > 1 (or its cycle) has a beater in tier t - 1
            group = next((set(cy) for cy in b.cycles if c in cy), {c})
            if b.tier[c] > 1:
                assert any(b.tier[w] == b.tier[c] - 1 and group & set(b.beats[w]) for w in conds)


def test_the_smallest_detectable_effect_is_the_families_mde():
    d = Detectable(30, 0.05, 72)
    assert round(d.win_rate, 3) == 0.867  # the figure: 30 items, a family of 72, power 0.8
    assert "a win rate of 0.867" in d.text() and "family of 72" in d.text()
    assert sign_test(30, 0) < 0.05 / 72
    few = Detectable(8, 0.05, 72)
    assert np.isnan(few.win_rate) and "none" in few.text()
    assert board(["a"], {}, [], d).detectable is d


def test_every_surface_says_how_positions_are_made_in_the_same_words():
    """The report's results tables, its notes and compare's page once described the old rule (an
    order of mean item ranks "never against a significant verdict") in three wordings."""
    import inspect

    from ray_knowsim.compare.pipeline import QUANTITY_NOTE
    from ray_knowsim.report import html_page
    from ray_knowsim.report.tables import POSITION_LEAD
    from ray_knowsim.stats.leaderboard import TIER_RULE

    for text in (POSITION_LEAD, QUANTITY_NOTE):
        assert TIER_RULE in text
    assert "TIER_RULE" in inspect.getsource(html_page)
    docs = (Path(__file__).resolve().parents[2] / "docs" / "decisions.md").read_text()
    for text in (POSITION_LEAD, QUANTITY_NOTE, docs):
        assert "never against a significant verdict" not in text
