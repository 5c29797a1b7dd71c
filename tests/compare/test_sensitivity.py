"""Verdicts recomputed without the flagged sessions: a verdict that rests on flagged sessions
changes, one that does not rest on them holds; both through compare's own verdict procedure."""

from __future__ import annotations

import pandas as pd

from ray_knowsim.compare.sensitivity import changed_lines, verdict_sensitivity
from ray_knowsim.compare.paired import CompareOptions


def sessions(n_items: int = 14) -> pd.DataFrame:
    rows = []
    for k in range(n_items):
        for cond, kg in (("A", 1.0 + 0.01 * k), ("B", 0.0)):
            rows.append({"session_id": f"math/i{k}/novice/{cond}/0", "task": "math", "item_id": f"i{k}", "knowledge_level": "novice",
                         "trial": 0, "match": "m", "condition": cond, "kg": kg})
    return pd.DataFrame(rows)


OPTS = CompareOptions(metrics=["kg"])


def test_a_verdict_resting_on_flagged_sessions_changes():
    data = sessions()
    flagged = {f"math/i{k}/novice/A/0" for k in range(10)}  # A's wins at 10 of 14 items came from flagged sessions
    table = verdict_sensitivity(data, ["A", "B"], flagged, OPTS)
    row = table[(table["knowledge_level"] == "novice")].iloc[0]
    assert row["verdict_all"] == "A better" and row["verdict_unflagged"] == "no verdict" and bool(row["changed"])
    assert (row["n_items_all"], row["n_items_unflagged"], row["n_excluded_a"], row["n_excluded_b"]) == (14, 4, 10, 0)
    lines = changed_lines(table)
    assert lines and "A better with every session, no verdict without the flagged ones" in lines[0]


def test_a_verdict_that_does_not_rest_on_them_holds():
    data = sessions()
    table = verdict_sensitivity(data, ["A", "B"], {"math/i0/novice/A/0"}, OPTS)
    assert not table["changed"].any() and set(table["verdict_unflagged"]) == {"A better"}
    # nothing flagged: the same table, nothing changed
    assert not verdict_sensitivity(data, ["A", "B"], set(), OPTS)["changed"].any()
