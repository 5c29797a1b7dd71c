"""Reductions behind the report's tables: ranks with ties, level-marginal means, streaming moments
per item, item-clustered intervals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ray_knowsim.report.aggregate import RunSummary, pick_sample
from ray_knowsim.report.metrics import fmt, metric_specs
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS
from ray_knowsim.report.tables import failure_table, marginal_table, paper_rank_rows, per_level_table


def test_marginal_is_the_unweighted_mean_of_level_means_with_an_item_clustered_interval():
    rows = [_row("A", "novice", float(k), 0.1, 0.5, 5.0, sid=f"n{k}", item_id=f"i{k}") for k in range(4)]
    rows += [_row("A", "advanced", 10.0 + k, 0.1, 0.5, 5.0, sid=f"a{k}", item_id=f"i{k}") for k in range(2)]
    s = _summary_from(rows)
    marg = {r.condition: r for r in marginal_table(s, metric_specs())}["A"]
    assert marg.values["kg"] == pytest.approx((1.5 + 10.5) / 2)  # not the pooled 22 / 6
    blocks = {b.level: b for b in per_level_table(s, metric_specs())}
    cell = blocks["novice"].rows[0].cells["kg"]
    from scipy import stats

    want = stats.t.interval(0.95, 3, loc=1.5, scale=stats.sem([0, 1, 2, 3]))
    assert (cell.ci.ci_low, cell.ci.ci_high) == pytest.approx(want, rel=1e-9)
    assert marg.intervals["kg"].n_items == 4


def _summary_from(rows: list[dict], batch: int = 2) -> RunSummary:
    specs = metric_specs("final", "kg")
    s = RunSummary(tuple(sp.column for sp in specs), sample_per_cell=2, seed=1)
    table = pa.Table.from_pylist(rows)
    for b in table.to_batches(max_chunksize=batch):
        s.add(b)
    return s


def _row(cond, level, kg, co, dc, iq, status="ok", sid=None, item_id="i0", **fm):
    r = {"session_id": sid or f"{cond}/{level}/{kg}/{co}", "condition": cond, "knowledge_level": level, "status": status,
         "item_id": item_id, "kg": kg, "co": co, "dc": dc, "iq": iq}
    for m in ("redundant", "prereq_blocked", "effective", "overload_wasted", "under_absorbed"):
        r[f"fm_{m}"] = fm.get(m, 0)
    return r


HAND_ROWS = [
    # condition A: novice has 3 conversations, advanced 1 -> pooled mean != mean of level means
    _row("A", "novice", 1.0, 0.2, 0.5, 8.0, effective=3, redundant=1),
    _row("A", "novice", 2.0, 0.4, 0.3, 6.0, effective=1),
    _row("A", "novice", 3.0, 0.6, 0.4, None),
    _row("A", "advanced", 10.0, 0.1, 0.9, 9.0, redundant=4),
    _row("B", "novice", 2.0, 0.2, 0.5, 6.5, overload_wasted=2),
    _row("B", "novice", 9.0, 0.9, 0.1, 5.0, status="failed"),  # excluded from every mean
    _row("B", "advanced", 4.0, 0.1, 0.9, 9.0, prereq_blocked=1),
]


def test_tables_on_a_hand_computed_run():
    s = _summary_from(HAND_ROWS)
    specs = metric_specs()
    assert s.levels == ["novice", "advanced"] and s.conditions == ["A", "B"]
    assert s.n_ok("B", "novice") == 1 and s.n_status("failed") == 1

    blocks = {b.level: b for b in per_level_table(s, specs)}
    nov = {r.condition: r for r in blocks["novice"].rows}
    assert nov["A"].cells["kg"].value == pytest.approx(2.0)
    assert nov["A"].cells["iq"].moments.n == 2 and nov["A"].cells["iq"].value == pytest.approx(7.0)
    assert nov["B"].cells["kg"].value == pytest.approx(2.0)  # the failed 9.0 is not counted
    # novice: kg tie A=B=2.0 -> both rank 1; CO A 0.4 vs B 0.2 (lower better) -> B 1, A 2
    assert (nov["A"].cells["kg"].rank_of_mean, nov["B"].cells["kg"].rank_of_mean) == (1, 1)
    assert (nov["A"].cells["co"].rank_of_mean, nov["B"].cells["co"].rank_of_mean) == (2, 1)
    assert nov["A"].cells["dc"].rank_of_mean == 2 and nov["B"].cells["dc"].rank_of_mean == 1  # 0.4 vs 0.5
    assert nov["A"].cells["iq"].rank_of_mean == 1 and nov["B"].cells["iq"].rank_of_mean == 2  # 7.0 vs 6.5
    assert all(c.position is None and not c.best for c in nov["A"].cells.values())  # no verdicts, no position, no star
    assert nov["A"].mean_rank == pytest.approx((1 + 2 + 2 + 1) / 4)

    marg = {r.condition: r for r in marginal_table(s, specs)}
    # hand: A kg = mean(2.0, 10.0) = 6.0 (pooled would be 4.0); B kg = mean(2.0, 4.0) = 3.0
    assert marg["A"].values["kg"] == pytest.approx(6.0)
    assert marg["B"].values["kg"] == pytest.approx(3.0)
    assert marg["A"].values["co"] == pytest.approx((0.4 + 0.1) / 2)
    assert marg["A"].values["iq"] == pytest.approx((7.0 + 9.0) / 2)
    assert marg["B"].values["co"] == pytest.approx((0.2 + 0.1) / 2)
    assert marg["A"].ranks_of_mean == {"kg": 1, "co": 2, "dc": 2, "iq": 1}
    assert marg["B"].ranks_of_mean == {"kg": 2, "co": 1, "dc": 1, "iq": 2}
    assert marg["A"].mean_rank == marg["B"].mean_rank == 1.5
    assert [r.condition for r in marginal_table(s, specs)] == ["A", "B"]  # the run's order, not an order of means
    paper = [(r.scope, r.condition, r.mean_rank) for r in paper_rank_rows(list(blocks.values()), list(marg.values()), specs)]
    assert paper[:2] == [("all levels", "A", 1.5), ("all levels", "B", 1.5)] and ("novice", "A", 1.5) in paper
    assert marg["A"].n == 4 and marg["B"].n == 2

    fm = {(r.level, r.condition): r for r in failure_table(s)}
    assert fm[("novice", "A")].counts["effective"] == 4 and fm[("novice", "A")].total == 5
    assert fm[("novice", "A")].share("effective") == pytest.approx(0.8)
    assert fm[("novice", "B")].counts["overload_wasted"] == 2  # the failed row's counts are excluded
    assert fm[("advanced", "A")].per_conversation("redundant") == 4.0


def test_streaming_summary_equals_pandas_on_the_whole_table():
    rng = np.random.default_rng(7)
    rows = [
        _row(f"c{rng.integers(3)}", ["novice", "intermediate", "advanced"][rng.integers(3)], float(rng.normal()), float(rng.random()),
             float(rng.random()), None if rng.random() < 0.2 else float(rng.integers(1, 11)), sid=f"s{i}")
        for i in range(300)
    ]
    s = _summary_from(rows, batch=37)
    df = pd.DataFrame(rows)
    ref = df.groupby(["condition", "knowledge_level"])[["kg", "co", "dc", "iq"]].agg(["mean", "count", "std"])
    for (c, lv), r in ref.iterrows():
        for col in ("kg", "co", "dc", "iq"):
            m = s.cell(c, lv, col)
            assert m.n == r[(col, "count")]
            assert m.mean == pytest.approx(r[(col, "mean")], rel=1e-12)
            if m.n >= 2:
                assert m.sd == pytest.approx(r[(col, "std")], rel=1e-9)


def test_sample_is_spread_over_cells_and_independent_of_batching():
    rows = [_row(c, lv, 1.0, 0.5, 0.5, 5.0, sid=f"{c}-{lv}-{i}") for c in "AB" for lv in ("novice", "advanced") for i in range(5)]
    a = pick_sample(_summary_from(rows, batch=3), 4)
    b = pick_sample(_summary_from(list(reversed(rows)), batch=11), 4)
    assert a == b
    assert {sid.split("-", 1)[1].rsplit("-", 1)[0] for sid in a} == {"novice", "advanced"}
    assert len({sid.split("-")[0] for sid in a}) == 2
    assert len(pick_sample(_summary_from(rows), 100)) == 8  # two per cell were kept


def test_metric_choice_is_explicit():
    final = [s.column for s in metric_specs("final", "kg")]
    es = [s.column for s in metric_specs("es", "nkg")]
    assert final == ["kg", "dc", "co", "iq"] == list(MEAN_RANK_METRICS)  # one column order: the mean rank's (issue 28)
    assert es == ["nkg_es", "dc_es", "co_es", "iq"]
    assert [s.lower_is_better for s in metric_specs()] == [False, False, True, False]
    with pytest.raises(ValueError):
        metric_specs("middle")
    assert fmt(None, 3) == "–" and fmt(math.nan, 2) == "–" and fmt(0.12345, 3) == "0.123"


def test_positions_and_stars_come_from_the_verdicts_boards_only():
    """An adaptive run's verdicts are per level: its boards give the per-level cells positions and
    the ★, the marginal none, and each table says where its positions are (or that there are none)."""
    from ray_knowsim.report.tables import NO_POSITION_LEAD, OTHER_TABLE_LEAD, POSITION_LEAD, apply_verdicts, has_positions, position_lead
    from ray_knowsim.stats.leaderboard import board

    s = _summary_from(HAND_ROWS)
    specs = metric_specs()
    blocks, marg = per_level_table(s, specs), marginal_table(s, specs)
    assert has_positions(blocks, marg) == (False, False) and position_lead(False, False) == NO_POSITION_LEAD
    # B beats A on novices' KG although their KG means tie there (2.0 and 2.0): the position follows the verdict
    apply_verdicts(blocks, marg, specs, {("novice", "kg"): board(["A", "B"], {("A", "B"): 0.2}, [("B", "A")])})
    nov = {r.condition: r for r in next(b for b in blocks if b.level == "novice").rows}
    assert (nov["B"].cells["kg"].position, nov["A"].cells["kg"].position) == (1, 2)
    assert nov["B"].cells["kg"].best and not nov["A"].cells["kg"].best
    assert nov["A"].cells["co"].position is None and not any(c.best for c in nov["B"].cells.values() if c is not nov["B"].cells["kg"])
    assert all(p is None for r in marg for p in r.positions.values()) and not any(b for r in marg for b in r.best.values())
    assert has_positions(blocks, marg) == (False, True)
    assert position_lead(False, True) == OTHER_TABLE_LEAD and position_lead(True, True) == POSITION_LEAD
