"""A run's cost per decision (issue 50): dollars when priced above $0, tokens with why otherwise,
and a plain sentence -- never a division by zero -- when no decision was reached."""

from __future__ import annotations

import math

from ray_knowsim.schema.price import NO_PRICE
from ray_knowsim.stats.leaderboard import Detectable
from ray_knowsim.stats.per_decision import PRICED_AT_ZERO, Spent, cost_per_decision


def test_a_priced_run_says_dollars_per_decision_and_in_all():
    per = cost_per_decision(Spent(1.27, 40_000), 3)
    assert per.unit == "usd" and math.isclose(per.per_decision, 1.27 / 3)
    assert per.line == "$0.42 per decision (3 decisions reached, $1.27 in all)"


def test_one_decision_is_singular_and_a_cheap_one_never_reads_as_zero_dollars():
    per = cost_per_decision(Spent(0.012, 100), 1)
    assert per.line == "$0.0120 per decision (1 decision reached, $0.0120 in all)"


def test_an_unpriced_run_counts_tokens_and_says_why():
    per = cost_per_decision(Spent(None, 37_035), 3)
    assert per.unit == "tokens" and per.per_decision == 12_345
    assert per.line == f"12,345 tokens per decision (3 decisions reached, 37,035 tokens in all; cost: {NO_PRICE})"
    assert cost_per_decision(Spent(float("nan"), 37_035), 3).line == per.line  # the cost table's NaN: no price


def test_a_run_priced_at_zero_counts_tokens_too():
    per = cost_per_decision(Spent(0.0, 900), 2)
    assert per.unit == "tokens"
    assert per.line == f"450 tokens per decision (2 decisions reached, 900 tokens in all; cost: {PRICED_AT_ZERO})"


def test_no_decision_says_what_was_spent_and_what_could_have_been_detected():
    per = cost_per_decision(Spent(1.27, 40_000), 0, detectable=Detectable(20, 0.05, 42))
    assert per.per_decision is None and per.decisions == 0
    assert per.line.startswith("no decision reached: $1.27 spent; the smallest detectable effect was a win rate of 0.")
    assert "(20 items, alpha 0.05 over a family of 42, power 0.8)" in per.line
    bare = cost_per_decision(Spent(None, 5_000), 0)
    assert bare.line == f"no decision reached: 5,000 tokens spent; cost: {NO_PRICE}"
    hopeless = cost_per_decision(Spent(2.0, 1), 0, detectable=Detectable(4, 0.05, 64))
    assert "no effect was detectable: no outcome of 4 items, alpha 0.05 over a family of 64 can be significant" in hopeless.line


def test_the_dry_run_figure_is_labelled_at_best():
    per = cost_per_decision(Spent(12.6, 1), 30, at_best=True)
    assert per.line == "at best $0.42 per decision ($12.60 estimated over the at most 30 decisions the design can reach)"
    none = cost_per_decision(Spent(12.6, 1), 0, at_best=True)
    assert none.per_decision is None and none.line.startswith("no decision reachable: $12.60 estimated")
