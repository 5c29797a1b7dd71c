"""The leaderboard is on the verdicts' quantity (the item win rate) and never orders a pair
against its own significant verdict; the star needs a win over every other condition; verdicts
carry their counts and sentences; ties make equivalence reachable; zero-width intervals say so."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ray_knowsim.compare.leaderboard import leaderboard, ranked_set_text, render_html
from ray_knowsim.compare.paired import CompareOptions, analyse
from ray_knowsim.stats.leaderboard import contradicts


def sessions(item_values: dict[str, list[float]], metric: str = "kg", level: str = "novice") -> pd.DataFrame:
    rows = []
    for cond, values in item_values.items():
        for k, v in enumerate(values):
            rows.append({"task": "math", "item_id": f"i{k:03d}", "knowledge_level": level, "trial": 0, "match": "s",
                         "condition": cond, metric: float(v)})
    return pd.DataFrame(rows)


def test_leaderboard_follows_the_win_rate_verdict_where_the_means_point_the_other_way():
    # the population: A - B = +1 on 65 % of items, -3 on 35 %: the mean difference is -0.4
    # (B has the higher mean), but A wins 65 of 100 items: the sign test says A
    n = 100
    base = np.random.default_rng(3).integers(3, 9, n).astype(float)
    diff = np.where(np.arange(n) < 65, 1.0, -3.0)
    t = analyse(sessions({"A": base + diff, "B": base}), options=CompareOptions(metrics=["kg"]))
    p = t["paired"]
    row = p[p.knowledge_level == "all"].iloc[0]
    assert row["mean_diff"] < 0 and row["significant"] and row["better"] == "A"
    assert (row["wins"], row["losses"], row["ties"], row["n_items"]) == (65, 35, 0, 100)
    best = t["best"][t["best"].knowledge_level == "all"].set_index("condition")
    assert best.loc["B", "rank"] == 1  # the mean-based rank points at B ...
    board = leaderboard(t["best"], p)
    assert list(board["condition"]) == ["A", "B"] and list(board["position"]) == [1, 2]  # ... the leaderboard follows the verdict
    assert board.set_index("condition").loc["A", "star"] and not board.set_index("condition").loc["B", "star"]
    assert board.set_index("condition").loc["A", "mean_item_rank"] == 1 + (1 - 0.65)
    assert "A teaches more (KG) than B over all levels: 65 of 100 items won, 35 lost, 0 tied; exact sign test p_adj = " in row["sentence"]


def test_no_star_without_a_win_over_every_other_and_a_cycle_is_named_not_ordered():
    # A beats B on every item; C wins half the items against A and loses the other half: A is
    # never beaten, but it does not beat C, so it gets no star (the old "nobody beat it" did)
    n = 30
    vals = {"A": [2.0] * n, "B": [1.0] * n, "C": [3.0 if k % 2 else 1.0 for k in range(n)]}
    t = analyse(sessions(vals), options=CompareOptions(metrics=["kg"], family="level_metric"))
    board = leaderboard(t["best"], t["paired"])
    sig = [(r.better, r.condition_b if r.better == r.condition_a else r.condition_a)
           for r in t["paired"][t["paired"].knowledge_level == "all"].itertuples() if isinstance(r.better, str)]
    assert ("A", "B") in sig and not any("A" in p and "C" in p for p in sig)
    assert not contradicts(list(board["condition"]), sig)
    assert not board["star"].any()
    # a win-rate cycle among significant verdicts: A > B on items 0-19 wins..., constructed per item
    k = 60
    a = np.zeros(k); b = np.zeros(k); c = np.zeros(k)
    # items 0-19: A 3 B 2 C 1 ; 20-39: B 3 C 2 A 1 ; 40-59: C 3 A 2 B 1 -> each beats the next on 40 of 60 items
    a[:20], b[:20], c[:20] = 3, 2, 1
    b[20:40], c[20:40], a[20:40] = 3, 2, 1
    c[40:], a[40:], b[40:] = 3, 2, 1
    t = analyse(sessions({"A": a, "B": b, "C": c}), options=CompareOptions(metrics=["kg"], alpha=0.5, family="level_metric"))
    board = leaderboard(t["best"], t["paired"])
    assert set(board["position"]) == {1}  # one shared position: no strict order is claimed
    assert all(cy for cy in board["cycle"]) and not board["star"].any()


def test_counts_equivalence_with_ties_and_zero_width_intervals():
    n = 25
    vals = {"A": [1.0] * n, "B": [1.0] * n}  # every item ties
    t = analyse(sessions(vals), options=CompareOptions(metrics=["kg"], family="level_metric", effect=0.1))
    r = t["paired"][t["paired"].knowledge_level == "novice"].iloc[0]
    assert (r["wins"], r["losses"], r["ties"]) == (0, 0, 25)
    assert not r["significant"] and r["equivalent"]  # ties are the evidence of no difference
    assert -0.2 < r["net_low_adj"] < 0 < r["net_high_adj"] < 0.2  # the win rate within 1/2 +- 0.1
    assert r["zero_width"] and r["ci_low"] == r["ci_high"] == 0.0
    assert "differ by less than the effect on KG on novices: win rate within 1/2 ± 0.1" in r["sentence"]
    # the same pair with 3 items can show neither
    t3 = analyse(sessions({"A": [1.0] * 3, "B": [1.0] * 3}), options=CompareOptions(metrics=["kg"], family="level_metric", effect=0.1))
    r3 = t3["paired"].iloc[0]
    assert not r3["equivalent"] and "no verdict" in r3["sentence"] and "cannot decide" in r3["sentence"]
    board = leaderboard(t["best"], t["paired"])
    page = render_html(board, t["paired"], ["kg"], "lb")
    assert "(zero width: every item has the same mean)" in page


def test_a_leaderboard_of_several_runs_says_it_ranks_another_set():
    assert "ranks 4 conditions of 2 runs together: its mean rank is not comparable" in ranked_set_text(
        ["a/x", "a/y", "b/x", "b/y"], {"a/x": "a", "a/y": "a", "b/x": "b", "b/y": "b"})
    assert "one run" in ranked_set_text(["x", "y"], {})
