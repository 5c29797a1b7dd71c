"""A score set's commits over the committed-dataset primitive (io/committed.py): a crash at any
step of re-judging a commit (tests/doubles/crash.py) leaves its old or its new scores, and the
next garbage collection leaves exactly the files the live markers name."""

from __future__ import annotations

from pathlib import Path

from ray_knowsim.io.rundir import RunReader
from ray_knowsim.score.store import ScoreDir, ScoreRow
from tests.doubles.crash import copy, each_crash

FIXTURES = Path(__file__).parents[1] / "io" / "fixtures" / "commits"


def test_a_crash_at_any_step_of_a_score_commit_leaves_the_old_or_the_new_scores(tmp_path, monkeypatch):
    """Over a format-1 directory: the re-judged commit's old marker is ``<shard>.json``."""
    base = copy(FIXTURES / "run_format1", tmp_path / "base")
    run = RunReader.open(base)
    commit = sorted(run.index.live(), key=lambda c: c.name)[0]
    ok = [sid for sid, e in commit.sessions.items() if e.status == "ok"]

    def scores(root):
        table = ScoreDir(root, "sim").read()
        return dict(zip(table.column("session_id").to_pylist(), table.column("iq").to_pylist()))

    before = scores(base)
    after = {**before, **{sid: 0.875 for sid in ok}}
    assert before != after

    def act(root):
        ScoreDir(root, "sim").commit(commit.shard_id, commit.token, [
            ScoreRow(session_id=sid, name="sim", judge_model="sim", judges="iq", iq=0.875) for sid in ok], {})

    def check(root):
        seen = scores(root)
        assert seen in (before, after)
        ScoreDir(root, "sim").collect_garbage(min_age_s=0.0)
        assert scores(root) == seen
        named = {m.file for m in ScoreDir(root, "sim").markers().values()}
        assert {p.name for p in (root / "scores" / "sim").glob("*.parquet")} == named  # nothing unnamed stays

    assert each_crash(monkeypatch, lambda: copy(base, tmp_path / "w"), act, check) >= 5


