"""The one quantity: per-pair win / loss / tie counts of item means."""

from __future__ import annotations

import math

import pandas as pd

from ray_knowsim.stats.winrate import EMPTY, WinCounts, item_means, pair_counts, win_counts


def test_counts_are_oriented_by_the_metric_and_ties_are_equal_to_the_tie_decimals():
    a = [3.0, 1.0, 2.0, 2.0 + 1e-14, math.nan, 5.0]
    b = [1.0, 2.0, 2.0, 2.0, 4.0, math.nan]
    c = win_counts(a, b, higher_is_better=True)
    assert c == WinCounts(n=4, wins=1, losses=1, ties=2)
    assert win_counts(a, b, higher_is_better=False) == WinCounts(4, 1, 1, 2)  # swapped wins and losses: 1 each
    assert win_counts([1, 2, 3], [0, 0, 9], False) == WinCounts(3, 1, 2, 0)
    assert c.win_rate == 0.5 and c.net == 0.0 and c.decisive == 2
    assert math.isnan(EMPTY.win_rate) and (c + c).n == 8


def test_item_means_average_an_items_ok_sessions_per_condition():
    rows = pd.DataFrame({"task": "t", "knowledge_level": "novice", "item_id": ["i1", "i1", "i1", "i2", "i2"],
                         "condition": ["a", "a", "b", "a", "b"], "kg": [1.0, 3.0, 2.0, 5.0, math.nan]})
    table = item_means(rows, "kg")[("t", "novice")]
    assert table.loc["i1", "a"] == 2.0 and math.isnan(table.loc["i2"].get("b", math.nan))
    assert pair_counts(table, "a", "b", True) == WinCounts(1, 0, 0, 1)
    assert pair_counts(table, "a", "zzz", True) == EMPTY
