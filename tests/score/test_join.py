"""The join of score sets onto session rows (no Ray): primary fills, others add columns, a
baseline's early stop comes from the termination judge only where the simulation left none."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from ray_knowsim.score.store import RunScores, ScoreDir, ScoreRow
from ray_knowsim.validate.simdata import aggregate_metrics, open_table


def sessions() -> pa.Table:
    return pa.table({
        "session_id": ["a", "b", "c"], "task": ["math"] * 3, "condition": ["x", "x", "baseline:zs"],
        "knowledge_level": ["novice"] * 3, "status": ["ok", "ok", "ok"],
        "simulator": ["structured", "structured", "zero-shot"], "assistant_model": ["m"] * 3, "assistant_strategy": ["s"] * 3,
        "iq": pa.array([None, None, None], pa.float64()), "tokens_judge": pa.array([0, 0, 0], pa.int64()),
        "early_stop_turn": pa.array([2, None, None], pa.int64()), "early_stop_reason": ["mastery", None, None],
    })  # fmt: skip


def commit(run, name, rows):
    ScoreDir(run, name).write_info({"name": name})
    ScoreDir(run, name).commit("shard-000000", "tok", [ScoreRow(name=name, judge_model=name, judges="", **r) for r in rows], {})


def test_primary_fills_and_other_sets_add_columns(tmp_path):
    commit(tmp_path, "first", [
        {"session_id": "a", "iq": 7.0, "tokens_judge": 11},
        {"session_id": "c", "iq": 5.0, "judge_early_stop_turn": 3, "judge_early_stop_reason": "satisfied"},
    ])  # fmt: skip
    commit(tmp_path, "second", [{"session_id": "a", "iq": 2.0}, {"session_id": "b", "judge_error": "interaction_quality: x"}])
    rs = RunScores.load(tmp_path)
    assert rs.primary == "first"
    out = rs.attach(sessions()).to_pydict()
    assert out["iq"] == [7.0, None, 5.0] and out["tokens_judge"] == [11, 0, 0]
    assert out["early_stop_turn"] == [2, None, 3]  # the simulation's own stop is kept
    assert out["early_stop_reason"] == ["mastery", None, "satisfied"]
    assert out["iq@second"] == [2.0, None, None] and out["judge_error@second"] == [None, "interaction_quality: x", None]


def test_validation_reads_the_joined_iq(tmp_path):
    commit(tmp_path, "first", [{"session_id": "a", "iq": 7.0}, {"session_id": "b", "iq": 9.0}])
    pq.write_table(sessions(), tmp_path / "sessions.parquet")  # a plain layout: no markers, no manifest
    table = open_table(tmp_path, "sessions")
    agg = aggregate_metrics(table, ["iq"], scores=RunScores.load(tmp_path))
    row = agg[agg["condition"] == "x"].iloc[0]
    assert row["n"] == 2 and row["sum"] == 16.0
    plain = aggregate_metrics(table, ["iq"])
    assert plain.empty or (plain["n"] == 0).all()


def test_rows_read_without_a_schema_take_the_scores_types(tmp_path):
    """Rows turned back into a table (the report's shown conversations) have all-null columns."""
    commit(tmp_path, "first", [{"session_id": "a", "iq": 7.0}])
    rows = pa.Table.from_pylist([{"session_id": "a", "iq": None, "early_stop_turn": None, "early_stop_reason": None}])
    out = RunScores.load(tmp_path).attach(rows).to_pylist()
    assert out[0]["iq"] == 7.0
