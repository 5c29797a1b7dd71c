"""Paired comparisons on synthetic session rows with hand-computable answers: items are the unit,
the test and the adjusted interval are one verdict, one item never makes a result."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from ray_knowsim.compare.paired import CompareOptions, analyse, beats_matrix, too_few_items
from ray_knowsim.stats.multiplicity import bonferroni, holm_adjusted, holm_closure


def rows(values: dict[str, dict[tuple[str, str, int], float]], metric: str = "kg") -> pd.DataFrame:
    out = []
    for cond, cells in values.items():
        for (item, level, trial), v in cells.items():
            out.append({"task": "math", "item_id": item, "knowledge_level": level, "trial": trial, "match": "s",
                        "condition": cond, metric: v})
    return pd.DataFrame(out)


def test_hand_computed_pair_and_marginal_with_items_as_the_unit():
    a = {("i1", "novice", 0): 3.0, ("i1", "novice", 1): 1.0, ("i2", "novice", 0): 2.0, ("i3", "novice", 0): 4.0,
         ("i1", "advanced", 0): 1.0, ("i2", "advanced", 0): 1.0, ("i3", "advanced", 0): 0.0}
    b = {("i1", "novice", 0): 1.0, ("i1", "novice", 1): 2.0, ("i2", "novice", 0): 2.0, ("i3", "novice", 0): 1.0,
         ("i1", "advanced", 0): 0.0, ("i2", "advanced", 0): 2.0}  # i3/advanced missing for b
    t = analyse(rows({"A": a, "B": b}), options=CompareOptions())
    p = t["paired"].set_index("knowledge_level")
    nov = p.loc["novice"]
    assert nov["condition_a"] == "A" and nov["n_pairs"] == 4 and nov["n_items"] == 3
    assert nov["mean_diff"] == pytest.approx((2 - 1 + 0 + 3) / 4)
    # per item: i1 (2 - 1)/2 = 0.5 > 0, i2 0 (tie), i3 3 > 0
    assert (nov["n_pos"], nov["n_neg"], nov["n_tied"]) == (2, 0, 1)
    assert nov["p_value"] == pytest.approx(0.5) and nov["win_rate"] == 1.0
    al = p.loc["all"]
    assert al["mean_diff"] == pytest.approx((1.0 + 0.0) / 2)  # mean over levels of the level mean diffs
    # marginal unit: per item the mean over levels of its level means: i1 (0.5 + 1)/2, i2 (0 - 1)/2, i3 3
    assert al["n_items"] == 3 and (al["n_pos"], al["n_neg"]) == (2, 1)
    best = t["best"]
    nb = best[(best.knowledge_level == "novice")].set_index("condition")
    assert nb.loc["A", "mean"] == pytest.approx(2.5) and nb.loc["A", "rank"] == 1 and nb.loc["A", "n_items"] == 3
    assert "prob_best" not in best.columns  # a share of bootstrap replicates on means is no verdict (issue 28)
    assert (nov["wins"], nov["losses"], nov["ties"]) == (2, 0, 1) and nov["win_rate_ties_half"] == pytest.approx(2.5 / 3)
    allb = best[(best.knowledge_level == "all")].set_index("condition")
    assert allb.loc["A", "mean"] == pytest.approx((2.5 + 2 / 3) / 2)


def test_the_verdict_is_the_adjusted_win_rate_interval_and_counts_items_not_cells():
    # C = A + 2 on every cell of 12 items x 2 trials: 12 items won, not 24 cells
    rng = np.random.default_rng(1)
    cells = [(f"i{k}", "novice", t) for k in range(12) for t in range(2)]
    base = {c: float(rng.normal()) for c in cells}
    vals = {"A": base, "B": {c: v + float(rng.normal(0, 0.5)) for c, v in base.items()},
            "C": {c: v + 2.0 for c, v in base.items()}}
    t = analyse(rows(vals), options=CompareOptions(family="level_metric"))
    p = t["paired"][t["paired"].knowledge_level == "novice"]
    assert len(p) == 3 and (p["family_size"] == 3).all() and (p["min_items"] == 7).all()
    ac = p[(p.condition_a == "A") & (p.condition_b == "C")].iloc[0]
    assert (ac["n_pos"], ac["n_neg"]) == (0, 12) and ac["p_value"] == pytest.approx(st.binomtest(0, 12).pvalue)
    assert ac["p_adj"] == pytest.approx(3 * ac["p_value"])  # the smallest p of 3: Holm's first step, alpha / 3
    assert ac["level"] == pytest.approx(0.05 / 3)
    assert ac["win_high_adj"] == pytest.approx(st.beta.ppf(1 - 0.05 / 3 / 2, 1, 12))  # Clopper-Pearson at 1 - alpha/3
    assert ac["better"] == "C" and ac["significant"] and ac["mean_diff"] == pytest.approx(-2.0)
    conds, wins = beats_matrix(t["paired"], "math", "novice")
    assert set(conds) == {"A", "B", "C"} and wins[("C", "A")] == ["kg"]
    for _, r in t["paired"].iterrows():  # one verdict: never a p-value and an interval that disagree
        excludes = r["win_low_adj"] > 0.5 or r["win_high_adj"] < 0.5
        assert excludes == r["significant"] == (r["p_adj"] < 0.05)


def test_lower_is_better_orientation():
    cells = [(f"i{k}", "novice", 0) for k in range(10)]
    vals = {"A": {c: 0.1 for c in cells}, "B": {c: 0.6 for c in cells}}
    t = analyse(rows(vals, "co"), options=CompareOptions(metrics=["co"]))
    r = t["paired"].iloc[0]
    assert not r["higher_is_better"] and r["mean_diff"] == pytest.approx(-0.5) and r["better"] == "A"
    b = t["best"][t["best"].knowledge_level == "novice"].set_index("condition")
    assert b.loc["A", "rank"] == 1
    assert (r["wins"], r["losses"]) == (10, 0) and r["win_rate"] == 1.0  # oriented: A overloads less on every item
    assert r["sentence"].startswith("A overloads less (CO) than B on novices: 10 of 10 items won, 0 lost, 0 tied")


def test_one_item_with_many_trials_never_makes_a_result():
    # the interrupted run of issue 20: one item, 12 trials, every trial says A > B by a lot
    cells = [("i1", lvl, t) for lvl in ("novice", "intermediate", "advanced") for t in range(12)]
    vals = {"A": {c: 10.0 + c[2] for c in cells}, "B": {c: 0.0 for c in cells}, "C": {c: 5.0 for c in cells}}
    for family in ("run", "level_metric"):
        t = analyse(rows(vals), options=CompareOptions(family=family))
        p = t["paired"]
        assert not p["significant"].any() and not p["testable"].any() and p["better"].isna().all()
        assert (p["n_items"] == 1).all() and (p["p_value"] == 1.0).all()
        assert "Too few items for any verdict" in too_few_items(p, "math", 0.05)
        assert t["mde"]["mde_win_rate_adj"].isna().all()  # no effect is detectable with one item


def test_aa_noise_is_not_flagged_and_mde_reported():
    rng = np.random.default_rng(7)
    flagged = 0
    for rep in range(20):
        cells = [(f"i{k}", lvl, 0) for k in range(30) for lvl in ("novice", "intermediate", "advanced")]
        vals = {"A": {c: float(rng.normal()) for c in cells}, "A2": {c: float(rng.normal()) for c in cells}}
        t = analyse(rows(vals), options=CompareOptions())
        assert t["paired"]["testable"].all()  # 30 items: a family of 4 can be decided
        flagged += int(t["paired"]["significant"].any())
    assert flagged <= 3
    m = t["mde"]
    q = m["mde_win_rate"].iloc[0]
    n = int(m["n_items"].iloc[0])
    crit = next(k for k in range(n + 1) if 2 * st.binom.sf(k - 1, n, 0.5) < 0.05 and k > n / 2)
    assert st.binom.sf(crit - 1, n, q) == pytest.approx(0.8, abs=1e-6)  # power 0.8 at the MDE win rate
    assert (m["mde_win_rate_adj"] >= m["mde_win_rate"]).all() and (m["mde_adj"] >= m["mde"]).all()


def test_run_family_spans_levels_metrics_and_pairs():
    rng = np.random.default_rng(2)
    cells = [(f"i{k}", lvl, 0) for k in range(8) for lvl in ("novice", "advanced")]
    out = []
    for cond in ("A", "B", "C"):
        for (item, level, trial) in cells:
            out.append({"task": "math", "item_id": item, "knowledge_level": level, "trial": trial, "match": "s",
                        "condition": cond, "kg": float(rng.normal()), "co": float(rng.random())})
    p = analyse(pd.DataFrame(out), options=CompareOptions())["paired"]
    assert len(p) == 3 * 3 * 2 and (p["family_size"] == 18).all()
    assert p["p_adj"].to_numpy() == pytest.approx(holm_adjusted(p["p_value"].to_numpy()))
    assert (p["p_adj"] >= p["p_value"]).all() and (p["level"] >= 0.05 / 18 - 1e-15).all()
    assert (p["min_items"] == 10).all() and not p["testable"].any()  # 8 items cannot decide a family of 18


def test_holm_passes_alpha_on_and_decides_what_bonferroni_cannot():
    # 3 conditions, 15 items: C beats A and B on every item (15-0, p = 2^-14); B beats A on 12, loses 3 (p = 0.035):
    # above Bonferroni's alpha / 3, below the alpha / 1 Holm tests it at once the other two are rejected
    items = [f"i{k}" for k in range(15)]
    a = {(it, "novice", 0): 0.0 for it in items}
    c = {(it, "novice", 0): 10.0 for it in items}
    b = {(it, "novice", 0): (5.0 if k < 12 else -1.0) for k, it in enumerate(items)}  # B > A on 12, < on 2
    t = analyse(rows({"A": a, "B": b, "C": c}), options=CompareOptions(family="level_metric"))
    p = t["paired"][t["paired"].knowledge_level == "novice"].set_index(["condition_a", "condition_b"])
    pv = p["p_value"]
    assert pv[("A", "C")] == pytest.approx(2 ** -14) and pv[("A", "B")] == pytest.approx(st.binomtest(3, 15).pvalue)
    assert pv[("A", "B")] > 0.05 / 3  # Bonferroni (alpha / 3 for every row) leaves A-B open ...
    assert p.loc[("A", "B"), "significant"] and p.loc[("A", "B"), "better"] == "B"  # ... Holm tests it at alpha / 1
    assert p.loc[("A", "B"), "level"] == pytest.approx(0.05) and p.loc[("A", "B"), "win_high_adj"] < 0.5
    assert p.loc[("A", "B"), "p_adj"] == pytest.approx(pv[("A", "B")])  # Holm's adjusted p at the last step
    # the one canonical closure: compare's verdicts are holm_closure's over the rows' sign tests
    closed = holm_closure(list(pv.index), lambda k, lv: pv[k] < lv, 0.05)
    assert {k: r.rejected for k, r in closed.items()} == p["significant"].to_dict()
    for _, r in t["paired"].iterrows():  # one verdict: never a p-value and an interval that disagree
        assert (r["win_low_adj"] > 0.5 or r["win_high_adj"] < 0.5) == r["significant"] == (r["p_adj"] < 0.05)
    # with an equivalence margin the rows stay at Bonferroni's alpha / m (equivalence claims share the row's level)
    e = analyse(rows({"A": a, "B": b, "C": c}), options=CompareOptions(family="level_metric", effect=0.2))["paired"]
    e = e[e.knowledge_level == "novice"].set_index(["condition_a", "condition_b"])
    assert not e.loc[("A", "B"), "significant"] and e["level"].to_numpy() == pytest.approx([0.05 / 3] * 3)
    assert e["p_adj"].to_numpy() == pytest.approx(bonferroni(e["p_value"].to_numpy(), 3))
