"""``agreement``'s rank agreement is on the quantity the verdicts test (issue 28: one quantity):
the mean item rank of the item win rates, not the condition means, which can put first a condition
that loses most items."""

from __future__ import annotations

import math

import pandas as pd

from ray_knowsim.compare.agreement import rank_and_item_tables


def _sessions(diff_of_item) -> pd.DataFrame:
    """Two conditions over 40 items at one level; A's KG = B's + diff_of_item(k)."""
    rows = []
    for k in range(40):
        for cond, kg in (("A", 5.0 + diff_of_item(k)), ("B", 5.0)):
            rows.append({"task": "math", "knowledge_level": "novice", "item_id": f"q{k:02d}", "condition": cond, "kg": kg})
    return pd.DataFrame(rows)


def test_the_top_is_on_the_item_win_rate_not_the_mean():
    wins_most = _sessions(lambda k: 1.0 if k < 26 else -3.0)  # A wins 26 of 40 items; B has the higher mean
    flipped = _sessions(lambda k: -1.0 if k < 26 else 3.0)  # B wins 26 of 40; A has the higher mean
    assert wins_most.groupby("condition")["kg"].mean().idxmax() == "B"
    rank, _ = rank_and_item_tables({"ref": wins_most, "same": wins_most.copy(), "other": flipped}, "ref", ["A", "B"], ["kg"])
    rank = rank.set_index(["run", "knowledge_level"])
    same, other = rank.loc[("same", "all")], rank.loc[("other", "all")]
    assert same["top_reference"] == same["top_run"] == "A" and same["same_top"] and same["tau"] == 1.0
    assert other["top_run"] == "B" and not other["same_top"] and other["tau"] == -1.0
    assert same["n_items"] == 40 and same["n_conditions"] == 2


def test_a_tie_on_the_win_rate_names_no_top():
    even = _sessions(lambda k: 1.0 if k < 20 else -1.0)  # 20 wins, 20 losses
    rank, _ = rank_and_item_tables({"ref": even, "b": even.copy()}, "ref", ["A", "B"], ["kg"])
    r = rank.iloc[0]
    assert r["top_reference"] is None and not r["same_top"] and math.isnan(r["tau"])  # a constant ranking has no tau
