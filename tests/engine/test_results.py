"""Shard commits: explicit schemas, atomic marker-based commits, leftovers collected, reruns merged."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pyarrow.parquet as pq

from ray_knowsim.engine.config import parse_run_config
from ray_knowsim.engine.plan import Plan, load_inputs
from ray_knowsim.engine.results import SESSION_SCHEMA, TURN_SCHEMA, RunDir, merge_rerun, rows_table, sort_tables
from ray_knowsim.engine.runner import make_context
from tests.doubles.standin import run_shard
from ray_knowsim.engine.worker import with_initial_states
from ray_knowsim.model.results import SessionRow, TurnRow
from tests.engine.conftest import small_config


def test_schemas_follow_the_row_models():
    assert SESSION_SCHEMA.names == list(SessionRow.model_fields)
    assert TURN_SCHEMA.names == list(TurnRow.model_fields)
    assert SESSION_SCHEMA.field("kg").type == pa.float64() and SESSION_SCHEMA.field("kg").nullable
    assert SESSION_SCHEMA.field("iu_labels").type == pa.list_(pa.string())
    assert not SESSION_SCHEMA.field("session_id").nullable
    assert TURN_SCHEMA.field("overload").type == pa.bool_()


def shard_rows(shard_index: int = 0, **options):
    cfg = parse_run_config(small_config())
    plan = Plan(cfg, load_inputs(cfg))
    ctx = make_context(cfg, "run", "hash")
    shard = with_initial_states(plan.shard(shard_index), ctx)

    async def collect():
        return [r async for r in run_shard(shard, None, ctx, **options)]

    results = asyncio.run(collect())
    sessions = rows_table([r.session for r in results], SESSION_SCHEMA)
    turns = rows_table([t for r in results for t in r.turns], TURN_SCHEMA)
    return shard, sessions, turns


def test_commit_marker_gc_and_rerun(tmp_path):
    rd = RunDir(tmp_path)
    shard, sessions, turns = shard_rows(fail_sessions=["math/demo_math_01/novice/sim:socratic/0"])
    order = [s.session_id for s in shard.sessions]
    sessions, turns = sort_tables(sessions, turns, order)
    m1 = rd.commit_shard(shard.shard_id, "hash", order, sessions, turns, {"x": 1})
    assert set(rd.markers("hash")) == {shard.shard_id} and rd.markers("other") == {}
    assert m1.failed == {"math/demo_math_01/novice/sim:socratic/0": "standin: injected failure"}
    files = rd.data_files("sessions")
    assert pq.read_table(files[0]).schema.equals(SESSION_SCHEMA, check_metadata=False)
    assert list(tmp_path.joinpath(".tmp").iterdir()) == []

    # an interrupted commit leaves files no marker names: collected, committed ones kept
    stray = tmp_path / "sessions" / f"{shard.shard_id}.deadbeef.parquet"
    stray.write_bytes(b"partial")
    (tmp_path / ".tmp" / "x.parquet").write_bytes(b"partial")
    assert rd.collect_garbage(rd.markers("hash").values()) == 1
    assert not stray.exists() and rd.data_files("sessions") == files

    # rerun of the failed session: its rows replaced, the others kept, plan order restored
    _, new_s, new_t = shard_rows()
    keep = [sid == "math/demo_math_01/novice/sim:socratic/0" for sid in new_s.column("session_id").to_pylist()]
    new_s = new_s.filter(pa.array(keep))
    new_t = new_t.filter(pa.array([sid == "math/demo_math_01/novice/sim:socratic/0" for sid in new_t.column("session_id").to_pylist()]))
    old_s, old_t = rd.read_shard_tables(m1)
    merged_s, merged_t = merge_rerun(old_s, old_t, new_s, new_t, order)
    m2 = rd.commit_shard(shard.shard_id, "hash", order, merged_s, merged_t, {}, previous=m1)
    assert m2.attempt == 2 and m2.failed == {}
    assert not (tmp_path / m1.files()["sessions"]).exists()  # old generation removed
    got = pq.read_table(rd.data_files("sessions")[0])
    assert got.column("session_id").to_pylist() == order and set(got.column("status").to_pylist()) == {"ok"}
    _, clean_s, clean_t = shard_rows()
    clean_s, clean_t = sort_tables(clean_s, clean_t, order)
    assert got.equals(clean_s) and pq.read_table(rd.data_files("turns")[0]).equals(clean_t)
