"""A plugin's metric column (docs/extending.md, "Adding a metric") survives the run directory's
own machinery: a commit written with it, the fold of such commits, and the reader -- which keeps
the column without importing the plugin (a run's commits share its config, hence its plugins)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ray_knowsim.io.commits import SESSION_SCHEMA, conform_sessions, fold_commits, read_commit_tables, read_markers, session_schema, write_commit
from ray_knowsim.io.rundir import RunReader
from tests.doubles.crash import copy

FIXTURES = Path(__file__).parent / "fixtures" / "commits"
COLUMN = "plugin_score"


def test_an_outside_column_is_committed_folded_and_read_back(tmp_path):
    root = tmp_path / "run"
    copy(FIXTURES / "run_format2", root)
    whole = next(c for c in RunReader.open(root).index.live() if c.shard_id == "shard-000000")
    sessions, turns = read_commit_tables(root, whole)
    assert COLUMN not in sessions.column_names and sessions.schema.equals(SESSION_SCHEMA, check_metadata=False)
    order = list(whole.sessions)
    for k, sid in enumerate(order):  # each session again, as a step commit with the plugin's column
        s = sessions.filter(pc.equal(sessions.column("session_id"), sid))
        s = s.set_column(s.schema.get_field_index("attempt"), "attempt", pa.array([2], pa.int64()))
        s = s.append_column(pa.field(COLUMN, pa.float64()), pa.array([0.25 * (k + 1)], pa.float64()))
        write_commit(root, shard_id="shard-000000", config_hash=whole.config_hash, sessions=conform_sessions(s),
                     turns=turns.filter(pc.equal(turns.column("session_id"), sid)))
    steps = [c for c in read_markers(root) if c.shard_id == "shard-000000" and c.name != whole.name]
    assert len(steps) == len(order) >= 2

    def read_back() -> dict:
        reader = RunReader.open(root)
        assert COLUMN in reader.sessions.names
        rows = reader.sessions.read(["session_id", COLUMN]).to_pylist()
        return {r["session_id"]: r[COLUMN] for r in rows if r["session_id"] in order}

    want = {sid: 0.25 * (k + 1) for k, sid in enumerate(order)}
    assert read_back() == want
    folded = fold_commits(root, steps, order)
    assert folded is not None
    folded_sessions, _ = read_commit_tables(root, folded)
    assert folded_sessions.schema.field(COLUMN).type == pa.float64()
    assert read_back() == want


def test_without_outside_columns_the_schema_is_the_built_in_one():
    assert session_schema() == SESSION_SCHEMA
    extra = SESSION_SCHEMA.append(pa.field(COLUMN, pa.float64()))
    assert session_schema(extra).names == [*SESSION_SCHEMA.names, COLUMN]
    # a column of another kind is no metric: not carried over
    assert session_schema(SESSION_SCHEMA.append(pa.field("note", pa.string()))) == SESSION_SCHEMA
