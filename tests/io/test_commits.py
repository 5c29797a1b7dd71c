"""The commit protocol (io/commits.py) and the one reader (io/rundir.py) over hand-made run
directories: format-2 commits, a format-1 directory of an earlier release, a shard committed
twice, reruns that outrank earlier rows, stale files of another layout, unreadable markers (which
stop every read and delete nothing), garbage collection, folding a shard's small commits."""

from __future__ import annotations

import asyncio
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ray_knowsim.plan.build import make_context
from ray_knowsim.config import parse_run_config
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.run.worker import with_initial_states
from ray_knowsim.io.commits import (
    SESSION_SCHEMA,
    TURN_SCHEMA,
    CommitIndex,
    MarkerError,
    collect_garbage,
    fold_commits,
    read_markers,
    sort_tables,
    write_commit,
)
from ray_knowsim.io.parquet import rows_table
from ray_knowsim.io.rundir import RunDirError, RunReader
from ray_knowsim.schema.results import SessionRow, TurnRow
from tests.doubles.standin import run_shard
from tests.doubles.run_config import small_config

FAILED = "math/demo_math_01/novice/sim:socratic/0"


def test_schemas_follow_the_row_models():
    assert SESSION_SCHEMA.names == list(SessionRow.model_fields)
    assert TURN_SCHEMA.names == list(TurnRow.model_fields)
    assert SESSION_SCHEMA.field("kg").type == pa.float64() and SESSION_SCHEMA.field("kg").nullable
    assert SESSION_SCHEMA.field("iu_labels").type == pa.list_(pa.string())
    assert not SESSION_SCHEMA.field("session_id").nullable
    assert SESSION_SCHEMA.field("attempt").type == pa.int64() and SESSION_SCHEMA.field("failure_class").nullable
    assert TURN_SCHEMA.field("overload").type == pa.bool_()


def shard_rows(shard_index: int = 0, **options):
    """(shard, sessions table, turns table) of one shard of the small config, from the stand-in."""
    cfg = parse_run_config(small_config())
    plan = Plan(cfg, load_inputs(cfg))
    ctx = make_context(cfg, "run", "hash")
    shard = with_initial_states(plan.shard(shard_index), ctx)

    async def collect():
        return [r async for r in run_shard(shard, None, ctx, **options)]

    results = asyncio.run(collect())
    sessions = rows_table([r.session for r in results], SESSION_SCHEMA)
    turns = rows_table([t for r in results for t in r.turns], TURN_SCHEMA)
    order = [s.session_id for s in shard.sessions]
    return (shard, *sort_tables(sessions, turns, order))


def only(table: pa.Table, ids) -> pa.Table:
    return table.filter(pa.array([sid in set(ids) for sid in table.column("session_id").to_pylist()]))


def manifest(root, n=4, config_hash="hash"):
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps({"config_hash": config_hash, "plan": {"n_sessions": n},
                                                    "invocations": [{"status": "ok"}]}))


@pytest.fixture(scope="module")
def rows():
    return shard_rows(fail_sessions={FAILED: "assistant_http_503"})


def test_commits_in_steps_are_read_as_one_table(tmp_path, rows):
    shard, sessions, turns = rows
    manifest(tmp_path)
    ids = sessions.column("session_id").to_pylist()
    first = write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash", plan="p1",
                         sessions=only(sessions, ids[:2]), turns=only(turns, ids[:2]))
    write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash", plan="p1",
                 sessions=only(sessions, ids[2:]), turns=only(turns, ids[2:]))
    marker = json.loads(first.marker.read_text())
    assert marker["format"] == 2 and first.marker.name == f"{shard.shard_id}.{first.token}.json"
    assert list(marker["sessions"]) == ids[:2] and marker["rows"] == {"sessions": 2, "turns": only(turns, ids[:2]).num_rows}
    assert list((tmp_path / ".tmp").iterdir()) == []
    run = RunReader.open(tmp_path)
    got = run.sessions.read()
    assert sorted(got.column("session_id").to_pylist()) == sorted(ids)
    assert run.turns.count_rows() == turns.num_rows
    st = run.status()
    assert (st.n_planned, st.n_committed, st.n_ok, st.n_failed, st.commits) == (4, 4, 3, 1, 2)
    done = st.completeness()
    # every planned session committed (the removed RunStatus.complete said only that); completeness
    # also reads the invocation: this manifest's records no end, so the run may still be writing
    assert done.n_planned == done.n_committed == 4 and done.reason == "running"
    assert st.failed_by_class == {"infra": 1} and st.manifest_status == "ok"
    one = run.turns_of(ids[0])
    assert [t["turn"] for t in one] == sorted(t["turn"] for t in one) and {t["session_id"] for t in one} == {ids[0]}
    proj = list(run.sessions.scan(["session_id", "kg"], pa.compute.field("status") == "ok"))
    assert sum(b.num_rows for b in proj) == 3 and proj[0].schema.names == ["session_id", "kg"]


def test_a_shard_committed_twice_and_stale_files_count_once(tmp_path, rows):
    shard, sessions, turns = rows
    manifest(tmp_path)
    write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash", sessions=sessions, turns=turns)
    write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash", sessions=sessions, turns=turns)  # a Ray retry
    for name in ("sessions", "turns"):  # another layout's copies, and an unnamed copy in our naming
        src = next((tmp_path / name).glob("*.parquet"))
        shutil.copy(src, tmp_path / name / "part-00000.parquet")
        shutil.copy(src, tmp_path / name / f"{shard.shard_id}.0123456789abcdef.parquet")
    run = RunReader.open(tmp_path)
    assert run.sessions.count_rows() == 4 and run.turns.count_rows() == turns.num_rows
    assert run.status().superseded_rows == 4 and run.status().n_committed == 4
    young = collect_garbage(tmp_path, run.all_commits, run.index)  # a commit in progress may own them
    assert young.superseded_commits == 1 and young.leftover_files == 0
    garbage = collect_garbage(tmp_path, run.all_commits, run.index, min_age_s=0)
    assert garbage.leftover_files == 2
    assert sorted(garbage.ignored) == ["sessions/part-00000.parquet", "turns/part-00000.parquet"]  # never deleted
    assert (tmp_path / "sessions" / "part-00000.parquet").exists()
    again = RunReader.open(tmp_path)
    assert len(again.index.live()) == 1 and again.sessions.count_rows() == 4


def test_a_rerun_outranks_the_failed_row_only(tmp_path, rows):
    shard, sessions, turns = rows
    manifest(tmp_path)
    write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash", sessions=sessions, turns=turns)
    _, healed, healed_turns = shard_rows()
    rerun = only(healed, [FAILED]).to_pylist()[0] | {"attempt": 2, "previous_errors": json.dumps(["assistant_http_503"])}
    write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash",
                 sessions=pa.Table.from_pylist([rerun], schema=SESSION_SCHEMA), turns=only(healed_turns, [FAILED]))
    run = RunReader.open(tmp_path)
    got = {r["session_id"]: r for r in run.sessions.read().to_pylist()}
    assert len(got) == 4 and got[FAILED]["status"] == "ok" and got[FAILED]["attempt"] == 2
    assert run.entries()[FAILED].previous_errors == ("assistant_http_503",)
    assert run.turns.count_rows() == healed_turns.num_rows  # the failed attempt's turns do not count
    assert run.status().rerun == 1 and run.status().n_failed == 0
    assert run.sessions.rows_of([FAILED])[0]["attempt"] == 2


def test_commits_of_another_config_are_never_counted(tmp_path, rows):
    shard, sessions, turns = rows
    manifest(tmp_path)
    write_commit(tmp_path, shard_id=shard.shard_id, config_hash="other", sessions=sessions, turns=turns)
    run = RunReader.open(tmp_path)
    assert run.sessions.count_rows() == 0 and run.status().foreign_commits
    collect_garbage(tmp_path, run.all_commits, run.index)
    assert len(read_markers(tmp_path)) == 1  # kept: a readable marker's files are never garbage


BROKEN = {
    "not JSON": lambda m: "{not json",
    "a missing field": lambda m: json.dumps({k: v for k, v in json.loads(m).items() if k != "sessions"}),
    "an unknown format": lambda m: json.dumps(json.loads(m) | {"format": 9}),
    "a bad status": lambda m: json.dumps(json.loads(m) | {"sessions": {"x": {"status": "maybe"}}}),
}


@pytest.mark.parametrize("how", [*BROKEN, "a missing file", "a renamed marker"])
def test_an_unreadable_marker_stops_every_read_and_deletes_nothing(tmp_path, rows, how):
    shard, sessions, turns = rows
    manifest(tmp_path)
    commit = write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash", sessions=sessions, turns=turns)
    (tmp_path / "sessions" / f"{shard.shard_id}.0123456789abcdef.parquet").write_bytes(b"leftover")
    bad = commit.marker
    if how in BROKEN:
        bad.write_text(BROKEN[how](bad.read_text()))
    elif how == "a missing file":
        (tmp_path / commit.files()["turns"]).rename(tmp_path / "elsewhere.parquet")
    else:
        bad = bad.rename(bad.with_name(f"{shard.shard_id}.ffffffffffff.json"))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    with pytest.raises(MarkerError) as err:
        RunReader.open(tmp_path)
    assert str(bad) in str(err.value) and "Nothing was read or deleted" in str(err.value)
    assert isinstance(err.value, RunDirError)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()) == before


def test_a_format_1_run_directory_still_reads(tmp_path, rows):
    """What a release before streamed commits wrote: one marker per shard under shards/."""
    shard, sessions, turns = rows
    manifest(tmp_path)
    legacy = sessions.drop_columns(["attempt", "previous_errors", "failure_class"])  # its rows lacked them
    token = "17330000001234abcd"
    for name, table in (("sessions", legacy), ("turns", turns)):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp_path / name / f"{shard.shard_id}.{token}.parquet")
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / f"{shard.shard_id}.json").write_text(json.dumps({
        "format": 1, "shard_id": shard.shard_id, "config_hash": "hash", "token": token,
        "session_ids": sessions.column("session_id").to_pylist(), "failed": {FAILED: "assistant_http_503"},
        "turns": turns.num_rows, "committed_at": 1733000000.0, "attempt": 1, "summary": {}}))
    run = RunReader.open(tmp_path)
    assert run.entries()[FAILED].failure_class == "infra" and run.entries()[FAILED].attempt == 1
    got = run.sessions.read(["session_id", "attempt", "failure_class"]).to_pylist()
    assert len(got) == 4 and all(r["attempt"] is None for r in got)  # not recorded then: read as null
    # a rerun with this release commits in format 2 and outranks the format-1 row
    _, healed, healed_turns = shard_rows()
    rerun = only(healed, [FAILED]).to_pylist()[0] | {"attempt": 2}
    write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash",
                 sessions=pa.Table.from_pylist([rerun], schema=SESSION_SCHEMA), turns=only(healed_turns, [FAILED]))
    again = RunReader.open(tmp_path)
    assert again.sessions.count_rows() == 4 and again.status().n_failed == 0


def test_fold_makes_one_commit_of_a_shards_steps(tmp_path, rows):
    shard, sessions, turns = rows
    ids = sessions.column("session_id").to_pylist()
    steps = [write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash", sessions=only(sessions, part),
                          turns=only(turns, part)) for part in (ids[3:], ids[:1], ids[1:3])]
    folded = fold_commits(tmp_path, steps, ids)
    assert [c.name for c in read_markers(tmp_path)] == [folded.name]
    assert all(not (tmp_path / f).exists() for c in steps for f in c.files().values())
    got = pq.read_table(tmp_path / folded.files()["sessions"])
    assert got.equals(sessions) and pq.read_table(tmp_path / folded.files()["turns"]).equals(turns)  # plan order
    assert CommitIndex(read_markers(tmp_path)).entries().keys() == set(ids)



def test_a_fold_from_the_tables_its_steps_wrote_writes_the_bytes_of_one_that_reads_them_back(tmp_path, rows):
    """The shard worker hands the fold the tables its steps wrote (run/worker.py): the folded
    files are byte for byte those of a fold that reads the steps back from disk, steps written
    as Arrow IPC as a worker writes them; a table pair per commit or none."""
    from ray_knowsim.io.commits import STEP_FILES

    shard, sessions, turns = rows
    ids = sessions.column("session_id").to_pylist()
    folded = {}
    for how in ("read", "tables"):
        root = tmp_path / how
        parts = [(only(sessions, part), only(turns, part)) for part in (ids[3:], ids[:1], ids[1:3])]
        steps = [write_commit(root, shard_id=shard.shard_id, config_hash="hash", sessions=s, turns=t,
                              file_format=STEP_FILES) for s, t in parts]
        assert all(f.endswith(".arrow") for c in steps for f in c.files().values())
        folded[how] = (root, fold_commits(root, steps, ids, tables=parts if how == "tables" else None))
        with pytest.raises(ValueError):
            fold_commits(root, steps, ids, tables=parts[:2])
    for table in ("sessions", "turns"):
        (ra, a), (rb, b) = folded["read"], folded["tables"]
        assert a.files()[table].endswith(".parquet")
        assert (ra / a.files()[table]).read_bytes() == (rb / b.files()[table]).read_bytes()


def test_step_commits_in_arrow_ipc_read_as_the_same_rows_as_parquet_ones(tmp_path, rows):
    """A shard's steps are Arrow IPC files under a format-3 marker (io/commits.py): an
    interrupted run holding them (mixed with Parquet commits, one of them outranked) reads as the
    same rows, in the same order, as one whose commits are all Parquet -- through the reader's
    scans, one session's turns, read_commit_tables and garbage collection of unnamed leftovers."""
    from ray_knowsim.io.commits import read_commit_tables

    shard, sessions, turns = rows
    ids = sessions.column("session_id").to_pylist()
    runs = {}
    for fmt in ("parquet", "arrow"):
        root = tmp_path / fmt
        manifest(root)
        made = [write_commit(root, shard_id=shard.shard_id, config_hash="hash", sessions=only(sessions, part),
                             turns=only(turns, part), file_format=f)
                for part, f in ((ids[:2], fmt), (ids[2:3], "parquet"), (ids[3:], fmt), (ids[1:2], fmt))]  # the last outranks one row
        runs[fmt] = (root, made)
    root, made = runs["arrow"]
    marker = json.loads(made[0].marker.read_text())
    assert marker["format"] == 3 and marker["files"] == "arrow"
    assert "files" not in json.loads(made[1].marker.read_text()) and json.loads(made[1].marker.read_text())["format"] == 2
    assert sorted(p.name for p in (root / "sessions").iterdir()) == sorted(c.files()["sessions"].split("/")[1] for c in made)
    assert [c.file_format for c in read_markers(root)] == [c.file_format for c in sorted(made, key=lambda c: c.name)]
    a, b = RunReader.open(runs["parquet"][0]), RunReader.open(root)
    assert a.sessions.read().equals(b.sessions.read()) and a.turns.read().equals(b.turns.read())
    assert b.sessions.count_rows() == 4 and b.status().superseded_rows == 1
    assert b.turns_of(ids[1]) == a.turns_of(ids[1]) and b.sessions.rows_of(ids[:2]) == a.sessions.rows_of(ids[:2])
    for x, y in zip(runs["parquet"][1], made):
        for got, want in zip(read_commit_tables(root, y, drop=[ids[0]]), read_commit_tables(runs["parquet"][0], x, drop=[ids[0]])):
            assert got.equals(want)
    stray = root / "turns" / f"{shard.shard_id}.0123456789abcdef.arrow"  # a step whose marker never landed
    shutil.copy(root / made[0].files()["turns"], stray)
    assert RunReader.open(root).turns.count_rows() == b.turns.count_rows()  # never read
    garbage = collect_garbage(root, b.all_commits, b.index, min_age_s=0)
    assert garbage.leftover_files == 1 and not stray.exists() and garbage.ignored == []


@pytest.mark.parametrize("edit", ["format 3 without files", "format 2 naming arrow", "files of another format"])
def test_a_marker_whose_format_and_files_disagree_is_refused(tmp_path, rows, edit):
    shard, sessions, turns = rows
    manifest(tmp_path)
    step = write_commit(tmp_path, shard_id=shard.shard_id, config_hash="hash", sessions=sessions, turns=turns,
                        file_format="arrow")
    data = json.loads(step.marker.read_text())
    if edit == "format 3 without files":
        del data["files"]
    elif edit == "format 2 naming arrow":
        data["format"] = 2
    else:
        data["files"] = "feather"
    step.marker.write_text(json.dumps(data))
    with pytest.raises(MarkerError, match=step.marker.name):
        RunReader.open(tmp_path)


def test_a_plain_parquet_folder_reads_each_session_once(tmp_path, rows):
    _, sessions, turns = rows
    for name, table in (("sessions", sessions), ("turns", turns)):
        (tmp_path / name).mkdir()
        pq.write_table(table, tmp_path / name / "part-0.parquet")
    run = RunReader.open(tmp_path)
    assert run.layout == "plain" and run.sessions.count_rows() == 4 and run.status().n_planned is None
    pq.write_table(sessions.slice(0, 1), tmp_path / "sessions" / "part-1.parquet")
    with pytest.raises(RunDirError, match="twice"):
        RunReader.open(tmp_path)


def test_a_plain_layout_without_failure_class_classes_its_failures_by_error(tmp_path):
    """Rows written before the failure_class column: the plain layout's status classes each failed
    session by its error (schema.failures), as the failures table does, not all as "model"."""
    (tmp_path / "sessions").mkdir()
    pq.write_table(pa.table({"session_id": ["a", "b", "c", "d"], "condition": ["x"] * 4, "knowledge_level": ["novice"] * 4,
                             "status": ["ok", "failed", "failed", "failed"],
                             "error": [None, "assistant_http_503", "assistant_truncated", "assistant_timeout: 30 s"]}),
                   tmp_path / "sessions" / "part-0.parquet")
    st = RunReader.open(tmp_path).status()
    assert st.layout == "plain" and st.n_failed == 3 and st.failed_by_class == {"infra": 2, "model": 1}
