"""The one committed-dataset primitive (io/committed.py) and the run's commits over it: the steps
keep their durable order (each data file fsynced before its rename, the folders fsynced before the
marker's rename, the marker fsynced before its own); a crash at any step of a commit, a fold or a
garbage collection (tests/doubles/crash.py) leaves the old or the new commit visible, never a part
of one, and never loses a counted row. The score and sweep commits' crash tests:
tests/score/test_score_crash.py, tests/sweep/test_sweep_crash.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ray_knowsim.io.commits import CommitIndex, collect_garbage, fold_commits, read_commit_tables, read_markers, write_commit
from ray_knowsim.io.committed import CommittedDataset, read_json_marker
from ray_knowsim.io.rundir import RunReader
from tests.doubles.crash import copy, each_crash, steps

FIXTURES = Path(__file__).parent / "fixtures" / "commits"


# ----------------------------------------------------------------------------- the primitive


def test_a_commit_keeps_the_durable_order(tmp_path, monkeypatch):
    data = CommittedDataset(tmp_path, ("a", "b"), re.compile(r".*\.parquet$"))
    table = pa.table({"x": [1, 2]})
    with steps(monkeypatch) as s:
        marker = data.commit([("a/one.parquet", table), ("b/two.parquet", table)], "m/one.json", "{}")
    trace = s.trace
    where = {e: k for k, e in enumerate(trace)}

    def first(op, pred):
        return next(k for k, (o, p) in enumerate(trace) if o == op and pred(p))

    marker_rename = first("replace", lambda p: p.endswith(f"-> {marker}"))
    for rel in ("a/one.parquet", "b/two.parquet"):
        final = tmp_path / rel
        rename = first("replace", lambda p, f=final: p.endswith(f"-> {f}"))
        staged = trace[rename][1].split(" -> ")[0]
        assert first("fsync", lambda p, t=staged: p == t) < rename  # the file's bytes, then its name
        assert rename < first("fsync", lambda p, d=final.parent: p == str(d)) < marker_rename  # its folder, then the marker
    staged_marker = trace[marker_rename][1].split(" -> ")[0]
    assert first("fsync", lambda p: p == staged_marker) < marker_rename < first("fsync", lambda p: p == str(marker.parent))
    assert marker_rename == max(k for k, (o, _) in enumerate(trace) if o == "replace") and where  # the marker is the last rename
    assert json.loads(marker.read_text()) == {} and not list((tmp_path / ".tmp").iterdir())


def test_an_unreadable_marker_is_the_datasets_own_error(tmp_path):
    bad = tmp_path / "m.json"
    for text, why in (("{", "is not JSON"), ("[1]", "is not a JSON object"), (b"\xff", "cannot be read")):
        bad.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(KeyError, match=why):
            read_json_marker(bad, lambda path, w: KeyError(f"{path.name} {w}"))


def test_garbage_is_only_the_datasets_naming_and_only_when_old(tmp_path):
    data = CommittedDataset(tmp_path, ("t",), re.compile(r"^x\.[0-9a-f]+\.parquet$"))
    data.commit([("t/x.aa.parquet", pa.table({"x": [1]}))], "m.json", "{}")
    for name in ("x.bb.parquet", "notes.txt"):
        (tmp_path / "t" / name).write_text("")
    young = data.collect_garbage(["t/x.aa.parquet"], min_age_s=3600)
    assert young.leftover_files == 0 and sorted(young.ignored) == ["t/notes.txt"]
    old = data.collect_garbage(["t/x.aa.parquet"], min_age_s=0)
    assert old.leftover_files == 1 and sorted(p.name for p in (tmp_path / "t").iterdir()) == ["notes.txt", "x.aa.parquet"]


# ----------------------------------------------------------------------------- the run's commits


def visible(root: Path) -> dict:
    """Per counted session: (attempt, status, turn rows), read through the one reader."""
    run = RunReader.open(root)
    sessions = run.sessions.read(["session_id", "attempt", "status"]).to_pylist()
    turns = run.turns.read(["session_id"]).column("session_id").to_pylist()
    assert len({s["session_id"] for s in sessions}) == len(sessions)  # each session once
    return {s["session_id"]: (s["attempt"], s["status"], turns.count(s["session_id"])) for s in sessions}


def collected(root: Path) -> None:
    commits = read_markers(root)
    collect_garbage(root, commits, CommitIndex(commits), min_age_s=0.0)


def rerun_all(root: Path, shard: str) -> tuple:
    """A commit outranking every row of ``shard``'s counted commit (each at attempt + 1)."""
    run = RunReader.open(root)
    commit = next(c for c in run.index.live() if c.shard_id == shard)
    sessions, turns = read_commit_tables(root, commit)
    sessions = sessions.set_column(sessions.schema.get_field_index("attempt"), "attempt",
                                   pc.add(sessions.column("attempt").fill_null(1), 1))
    return commit, sessions, turns


def test_a_crash_at_any_step_of_a_commit_leaves_the_old_or_the_new(tmp_path, monkeypatch):
    base = tmp_path / "base"
    copy(FIXTURES / "run_format2", base)
    before = visible(base)
    commit, sessions, turns = rerun_all(base, "shard-000000")
    after = {**before, **{sid: (before[sid][0] + 1, *before[sid][1:]) for sid in commit.sessions}}
    work = tmp_path / "work"

    def act(root):
        write_commit(root, shard_id=commit.shard_id, config_hash=commit.config_hash, sessions=sessions, turns=turns)

    def check(root):
        seen = visible(root)
        assert seen in (before, after)
        collected(root)  # a later start cleans up what the crash left; what counts stays
        assert visible(root) == seen

    assert each_crash(monkeypatch, lambda: copy(base, work), act, check) >= 6


def test_a_crash_at_any_step_of_a_fold_or_a_collection_loses_no_row(tmp_path, monkeypatch):
    base = tmp_path / "base"
    copy(FIXTURES / "run_format2", base)
    run = RunReader.open(base)
    whole = next(c for c in run.index.live() if c.shard_id == "shard-000000")
    sessions, turns = read_commit_tables(base, whole)
    order = list(whole.sessions)
    steps_dir = tmp_path / "steps"
    copy(base, steps_dir)
    collected_dead = tmp_path / "dead"

    for sid in order:  # the shard's rows again, as two step commits outranking the fold
        one = pc.equal(sessions.column("session_id"), sid)
        s = sessions.filter(one)
        s = s.set_column(s.schema.get_field_index("attempt"), "attempt", pa.array([2], pa.int64()))
        write_commit(steps_dir, shard_id="shard-000000", config_hash=whole.config_hash, sessions=s,
                     turns=turns.filter(pc.equal(turns.column("session_id"), sid)))
    want = visible(steps_dir)
    made = [c for c in read_markers(steps_dir) if c.shard_id == "shard-000000" and c.name != whole.name]
    assert len(made) == 2

    def fold(root):
        commits = [c for c in read_markers(root) if c.name in {m.name for m in made}]
        fold_commits(root, commits, order)

    def same(root):
        assert visible(root) == want
        collected(root)
        assert visible(root) == want

    assert each_crash(monkeypatch, lambda: copy(steps_dir, tmp_path / "w"), fold, same) >= 8
    # the folded-over commit is dead (every row outranked): its removal at any step keeps the rows
    copy(steps_dir, collected_dead)
    assert [c.name for c in CommitIndex(read_markers(collected_dead)).dead()] == [whole.name]
    assert each_crash(monkeypatch, lambda: copy(steps_dir, tmp_path / "g"), collected, same) >= 2
