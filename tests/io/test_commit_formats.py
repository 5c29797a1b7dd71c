"""Every marker format ever written still reads, from directories the writers of those releases
wrote (tests/io/fixtures/commits/: README.md says which commit wrote each): a run directory of
format-1 markers (``shards/<shard>.json``) with score markers named ``<shard>.json``, and one of
format-2 markers (``commits/<shard>.<token>.json``: a folded shard, a rerun that outranks a failed
row) with commit-named score markers. ``expected.json`` is what the release before the one
committed-dataset primitive (io/committed.py) read from each; this release must read the same,
collect no named file as garbage, and outrank an old commit with a new one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from ray_knowsim.io.commits import CommitIndex, collect_garbage, read_markers
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.score.store import RunScores, ScoreDir, ScoreRow

FIXTURES = Path(__file__).parent / "fixtures" / "commits"
FORMATS = ("run_format1", "run_format2")


def read_back(root: Path) -> dict:
    """What a release reads from a run directory: per session the entry that counts, the counted
    rows, the turn rows, and every score set's ``iq`` per session."""
    run = RunReader.open(root)
    entries = {sid: {"status": e.status, "attempt": e.attempt, "failure_class": e.failure_class}
               for sid, e in sorted(run.entries().items())}
    rows = run.sessions.read(["session_id", "status", "turns"]).to_pylist()
    scores = RunScores.load(root)
    return {"entries": entries, "sessions": sorted([r["session_id"], r["status"], r["turns"]] for r in rows),
            "turn_rows": run.turns.count_rows(), "primary": scores.primary,
            "scores": {n: dict(sorted(zip(t.column("session_id").to_pylist(), t.column("iq").to_pylist())))
                       for n, t in scores.sets.items()}}


def files_of(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture(params=FORMATS)
def old_run(request, tmp_path) -> Path:
    root = tmp_path / request.param
    shutil.copytree(FIXTURES / request.param, root)
    return root


def test_an_old_run_directory_reads_as_its_release_read_it(old_run):
    expected = json.loads((old_run / "expected.json").read_text())
    assert read_back(old_run) == expected
    assert len(expected["entries"]) == 4 and expected["scores"]["sim"]  # the fixture holds what it should


def test_garbage_collection_keeps_every_file_an_old_marker_names(old_run):
    before = files_of(old_run)
    commits = read_markers(old_run)
    collect_garbage(old_run, commits, CommitIndex(commits), min_age_s=0.0)
    assert files_of(old_run) == before
    assert read_back(old_run) == json.loads((old_run / "expected.json").read_text())


def test_scores_committed_again_replace_an_old_score_marker(old_run):
    """A re-judged commit: its new score marker is commit-named, the old one (either name) goes."""
    run = RunReader.open(old_run)
    commit = sorted(run.index.live(), key=lambda c: c.name)[0]
    store = ScoreDir(old_run, "sim")
    rows = [ScoreRow(session_id=sid, name="sim", judge_model="sim", judges="iq", iq=0.875) for sid in commit.sessions]
    store.commit(commit.shard_id, commit.token, rows, {})
    markers = sorted(p.name for p in (old_run / "scores" / "sim").glob("shard-*.json"))
    assert f"{commit.name}.json" in markers and f"{commit.shard_id}.json" not in markers
    got = read_back(old_run)["scores"]["sim"]
    counted = set(commit.sessions) - run.index.superseded[commit.name]
    assert all(got[sid] == 0.875 for sid in counted)
    expected = json.loads((old_run / "expected.json").read_text())["scores"]["sim"]
    assert {k: v for k, v in got.items() if k not in counted} == {k: v for k, v in expected.items() if k not in counted}
    assert len(list((old_run / "scores" / "sim").glob(f"{commit.shard_id}.*.parquet"))) == len(
        [c for c in run.index.live() if c.shard_id == commit.shard_id])  # the replaced score file is gone
