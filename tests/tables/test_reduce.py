"""The pandas half of the reduction on hand-made rows: failed sessions masked, one-item cells
without a CI, intervals clustered by item, level-marginal = unweighted mean of level means,
"min" ties, lower-is-better CO/PO, the mean rank over the headline metrics only."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pytest

from scipy import stats as st

from ray_knowsim.tables.reduce import ITEM_KEYS, SUM_COLUMNS, build_tables, normalise_sums, partial_moments
from ray_knowsim.io.commits import SESSION_SCHEMA


def session(cond: str, level: str, status: str = "ok", item: str = "i1", **metrics) -> dict:
    row = {f.name: None for f in SESSION_SCHEMA}
    row.update(task="math", condition=cond, knowledge_level=level, status=status, item_id=item,
               fm_redundant=1, fm_prereq_blocked=0, fm_effective=3, fm_overload_wasted=0, fm_under_absorbed=0)
    row.update(metrics)
    return row


def tables_of(rows: list[dict]) -> dict[str, pd.DataFrame]:
    table = pa.Table.from_pylist(rows)
    half = table.num_rows // 2  # two "blocks", combined as the groupby combines them
    parts = pd.concat([partial_moments(table.slice(0, half)).to_pandas(), partial_moments(table.slice(half)).to_pandas()])
    return build_tables(normalise_sums(parts.groupby(list(ITEM_KEYS), as_index=False)[list(SUM_COLUMNS)].sum()))


def test_masking_single_values_and_marginals():
    rows = [
        session("a", "novice", kg=1.0, co=0.2), session("a", "novice", item="i2", kg=3.0, co=0.4),
        session("a", "advanced", kg=10.0, co=0.9),
        session("a", "advanced", status="failed", kg=99.0, co=9.0),  # never enters a mean
        session("b", "novice", kg=2.0, co=0.2), session("b", "advanced", kg=10.0, co=0.1),
    ]
    t = tables_of(rows)
    lm = t["level_means"].set_index(["condition", "knowledge_level"])
    assert lm.loc[("a", "novice"), "kg"] == 2.0 and lm.loc[("a", "novice"), "kg_sd"] == pytest.approx(math.sqrt(2))
    assert lm.loc[("a", "advanced"), ["kg", "kg_n", "n_ok", "n_failed"]].tolist() == [10.0, 1, 1, 1]
    assert math.isnan(lm.loc[("a", "advanced"), "kg_sd"]) and math.isnan(lm.loc[("a", "advanced"), "kg_ci_low"])
    # two items, one session each: the t-interval over items
    assert lm.loc[("a", "novice"), "kg_ci_low"] == pytest.approx(2.0 - 12.7062 * math.sqrt(2) / math.sqrt(2), rel=1e-4)
    assert lm.loc[("a", "novice"), "kg_items"] == 2
    assert lm.loc[("a", "novice"), "iq_n"] == 0 and math.isnan(lm.loc[("a", "novice"), "iq"])
    assert list(t["level_means"]["knowledge_level"][:2]) == ["novice", "advanced"]  # paper order
    mg = t["marginal"].set_index("condition")
    assert mg.loc["a", "kg"] == 6.0  # (2 + 10) / 2, not the pooled (1 + 3 + 10) / 3
    assert mg.loc["a", "kg_levels"] == 2 and mg.loc["a", "n_failed"] == 1
    fm = t["failure_modes"].set_index(["condition", "knowledge_level"])
    assert fm.loc[("a", "advanced"), "fm_effective"] == 3 and fm.loc[("a", "advanced"), "fm_effective_share"] == 0.75


def test_intervals_cluster_by_item_not_by_session():
    # 3 items x 4 trials: the sessions of an item are alike, so the interval is the t-interval of
    # the 3 item means (2 degrees of freedom), far wider than an iid one over 12 sessions
    rows = [session("a", "novice", item=f"i{k}", kg=float(k) + 0.01 * t) for k in range(3) for t in range(4)]
    rows += [session("a", "advanced", item=f"i{k}", kg=2.0 * k) for k in range(3)]
    lm = tables_of(rows)["level_means"].set_index(["condition", "knowledge_level"])
    item_means = [k + 0.015 for k in range(3)]
    want = st.t.interval(0.95, 2, loc=sum(item_means) / 3, scale=st.sem(item_means))
    got = lm.loc[("a", "novice"), ["kg_ci_low", "kg_ci_high"]].tolist()
    assert got == pytest.approx(list(want), rel=1e-9)
    iid = st.t.interval(0.95, 11, loc=lm.loc[("a", "novice"), "kg"], scale=lm.loc[("a", "novice"), "kg_sd"] / math.sqrt(12))
    assert got[1] - got[0] > 3 * (iid[1] - iid[0])
    # the level-marginal: per item the mean of its level values, then the t-interval over items
    mg = tables_of(rows)["marginal"].set_index("condition")
    per_item = [(m + 2.0 * k) / 2 for k, m in enumerate(item_means)]
    want = st.t.interval(0.95, 2, loc=sum(per_item) / 3, scale=st.sem(per_item))
    assert mg.loc["a", ["kg_ci_low", "kg_ci_high"]].tolist() == pytest.approx(list(want), rel=1e-9)
    assert mg.loc["a", "kg_items"] == 3


def test_ranks_min_ties_and_direction():
    rows = [session(c, "novice", kg=kg, co=co) for c, kg, co in (("a", 1.0, 0.5), ("b", 2.0, 0.5), ("c", 2.0, 0.1))]
    rk = tables_of(rows)["ranks"]
    marg = rk[rk["scope"] == "marginal"].set_index("condition")
    assert marg["rank_kg"].to_dict() == {"a": 3.0, "b": 1.0, "c": 1.0}  # ties share the best rank
    assert marg["rank_co"].to_dict() == {"a": 2.0, "b": 2.0, "c": 1.0}  # lower is better
    assert marg.loc["c", "mean_rank"] == 1.0 and marg.loc["a", "mean_rank"] == 2.5
    assert marg.loc["a", "mean_rank_used"] == 2  # of KG, DC, CO, IQ only KG and CO have values
    assert rk["condition"].tolist()[:3] == ["c", "b", "a"]  # sorted by mean rank
    assert set(rk["scope"]) == {"marginal", "novice"}


def test_mean_rank_counts_the_headline_metrics_once_each():
    # b wins NKG, IC and PO (the re-measures of KG, DC, CO) but a wins KG, DC and CO: a is first
    rows = [session("a", "novice", kg=3.0, dc=0.5, co=0.1, nkg=0.1, ic=0.1, po=0.9),
            session("b", "novice", kg=2.0, dc=0.4, co=0.2, nkg=0.9, ic=0.9, po=0.1)]
    marg = tables_of(rows)["ranks"].query("scope == 'marginal'").set_index("condition")
    assert marg.loc["a", "mean_rank"] == 1.0 and marg.loc["b", "mean_rank"] == 2.0
    assert marg.loc["b", "rank_nkg"] == 1.0  # still ranked, only not in the mean rank


def test_drift_counts_are_summed_over_every_session_per_cell_and_condition():
    rows = [
        session("a", "novice", kg=1.0, extractor_repairs=2, extractor_refusals=1, llm_truncations=0),
        session("a", "novice", status="failed", extractor_repairs=0, extractor_refusals=2, llm_truncations=1),
        session("a", "advanced", kg=2.0, extractor_repairs=5, extractor_refusals=0, llm_truncations=0),
        session("b", "novice", kg=1.0),  # a run written before the columns existed: nulls read as 0
    ]
    t = tables_of(rows)
    lm = t["level_means"].set_index(["condition", "knowledge_level"])
    assert lm.loc[("a", "novice"), ["extractor_repairs", "extractor_refusals", "llm_truncations"]].tolist() == [2, 3, 1]
    mg = t["marginal"].set_index("condition")
    assert mg.loc["a", ["extractor_repairs", "extractor_refusals", "llm_truncations"]].tolist() == [7, 3, 1]
    assert mg.loc["b", ["extractor_repairs", "extractor_refusals"]].tolist() == [0, 0]
