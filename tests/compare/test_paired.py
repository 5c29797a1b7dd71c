"""Paired comparisons on synthetic session rows with hand-computable answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from ray_knowsim.compare.paired import CompareOptions, analyse, beats_matrix


def rows(values: dict[str, dict[tuple[str, str, int], float]], metric: str = "kg") -> pd.DataFrame:
    out = []
    for cond, cells in values.items():
        for (item, level, trial), v in cells.items():
            out.append({"task": "math", "item_id": item, "knowledge_level": level, "trial": trial, "match": "s",
                        "condition": cond, metric: v})
    return pd.DataFrame(out)


def test_hand_computed_pair_and_marginal():
    a = {("i1", "novice", 0): 3.0, ("i2", "novice", 0): 2.0, ("i3", "novice", 0): 4.0,
         ("i1", "advanced", 0): 1.0, ("i2", "advanced", 0): 1.0, ("i3", "advanced", 0): 0.0}
    b = {("i1", "novice", 0): 1.0, ("i2", "novice", 0): 2.0, ("i3", "novice", 0): 1.0,
         ("i1", "advanced", 0): 0.0, ("i2", "advanced", 0): 2.0}  # i3/advanced missing for b
    t = analyse(rows({"A": a, "B": b}), options=CompareOptions(n_boot=500))
    p = t["paired"].set_index("knowledge_level")
    nov = p.loc["novice"]
    assert nov["condition_a"] == "A" and nov["n_pairs"] == 3
    assert nov["mean_diff"] == pytest.approx((2 + 0 + 3) / 3)
    assert (nov["n_pos"], nov["n_neg"]) == (2, 0)
    assert nov["p_value"] == pytest.approx(0.5)  # 2 of 2 non-zero: 2 * 0.25
    adv = p.loc["advanced"]
    assert adv["n_pairs"] == 2 and adv["mean_diff"] == pytest.approx(0.0)
    al = p.loc["all"]
    assert al["mean_diff"] == pytest.approx(((5 / 3) + 0.0) / 2)
    # marginal test units: (item, trial) means over levels of the cell differences
    assert al["n_pairs"] == 3 and (al["n_pos"], al["n_neg"]) == (2, 1)  # i1 1.5, i2 -0.5, i3 3
    best = t["best"]
    nb = best[(best.knowledge_level == "novice")].set_index("condition")
    assert nb.loc["A", "mean"] == pytest.approx(3.0) and nb.loc["A", "rank"] == 1
    assert nb.loc["A", "prob_best"] + nb.loc["B", "prob_best"] == pytest.approx(1.0)
    allb = best[(best.knowledge_level == "all")].set_index("condition")
    assert allb.loc["A", "mean"] == pytest.approx((3.0 + 2 / 3) / 2)


def test_holm_family_is_the_pairs_of_one_level_and_metric():
    rng = np.random.default_rng(1)
    cells = [(f"i{k}", "novice", t) for k in range(12) for t in range(2)]
    base = {c: float(rng.normal()) for c in cells}
    vals = {"A": base, "B": {c: v + float(rng.normal(0, 0.5)) for c, v in base.items()},
            "C": {c: v + 2.0 for c, v in base.items()}}
    t = analyse(rows(vals), options=CompareOptions(n_boot=400, family="level_metric"))
    p = t["paired"][t["paired"].knowledge_level == "novice"]
    assert len(p) == 3 and (p["family_size"] == 3).all()
    order = np.argsort(p["p_value"].to_numpy())
    raw = p["p_value"].to_numpy()[order]
    want = np.maximum.accumulate(np.minimum(1, raw * np.array([3, 2, 1])))
    assert p["p_holm"].to_numpy()[order] == pytest.approx(want)
    # C = A + 2 in every cell: 24 of 24 pairs positive for C over A
    ac = p[(p.condition_a == "A") & (p.condition_b == "C")].iloc[0]
    assert ac["p_value"] == pytest.approx(st.binomtest(0, 24, 0.5).pvalue)
    assert ac["mean_diff"] == pytest.approx(-2.0) and ac["ci_low"] == pytest.approx(-2.0) and ac["ci_high"] == pytest.approx(-2.0)
    assert ac["better"] == "C" and ac["significant"]
    conds, wins = beats_matrix(t["paired"], "math", "novice")
    assert set(conds) == {"A", "B", "C"} and wins[("C", "A")] == ["kg"]


def test_lower_is_better_orientation():
    cells = [(f"i{k}", "novice", 0) for k in range(10)]
    vals = {"A": {c: 0.1 for c in cells}, "B": {c: 0.6 for c in cells}}
    t = analyse(rows(vals, "co"), options=CompareOptions(n_boot=200, metrics=["co"]))
    r = t["paired"].iloc[0]
    assert not r["higher_is_better"] and r["mean_diff"] == pytest.approx(-0.5) and r["better"] == "A"
    b = t["best"][t["best"].knowledge_level == "novice"].set_index("condition")
    assert b.loc["A", "prob_best"] == pytest.approx(1.0) and b.loc["A", "rank"] == 1


def test_aa_noise_is_not_flagged_and_mde_reported():
    rng = np.random.default_rng(7)
    flagged = 0
    for rep in range(20):
        cells = [(f"i{k}", lvl, 0) for k in range(10) for lvl in ("novice", "intermediate", "advanced")]
        vals = {"A": {c: float(rng.normal()) for c in cells}, "A2": {c: float(rng.normal()) for c in cells}}
        t = analyse(rows(vals), options=CompareOptions(n_boot=200, seed=rep))
        flagged += int(t["paired"]["significant"].any())
    assert flagged <= 3  # 4 families per replicate at alpha 0.05: a handful at most by chance
    m = t["mde"]
    assert (m["mde"] > 0).all() and (m["mde_holm"] >= m["mde"]).all()
    assert m["mde"].iloc[0] == pytest.approx(2.8015852 * m["se"].iloc[0], rel=1e-6)


def test_run_family_spans_levels_metrics_and_pairs():
    rng = np.random.default_rng(2)
    cells = [(f"i{k}", lvl, 0) for k in range(8) for lvl in ("novice", "advanced")]
    out = []
    for cond in ("A", "B", "C"):
        for (item, level, trial) in cells:
            out.append({"task": "math", "item_id": item, "knowledge_level": level, "trial": trial, "match": "s",
                        "condition": cond, "kg": float(rng.normal()), "co": float(rng.random())})
    t = analyse(pd.DataFrame(out), options=CompareOptions(n_boot=200))
    p = t["paired"]
    assert len(p) == 3 * 3 * 2 and (p["family_size"] == 18).all()
    order = np.argsort(p["p_value"].to_numpy(), kind="stable")
    raw = p["p_value"].to_numpy()[order]
    want = np.maximum.accumulate(np.minimum(1, raw * np.arange(18, 0, -1)))
    assert p["p_holm"].to_numpy()[order] == pytest.approx(want)
