"""Every reader of a run directory — the tables (and cost), the report, compare, validate, sweep,
the scoring stage — reads it through the one reader (io/rundir.py), so each sees each session
once: in a run directory where a shard was committed twice (what a Ray retry after a commit does)
and stale copies of every file lie beside the committed ones (another layout's, and our naming's
without a marker). And each stops, naming the file, at a marker it cannot read, deleting nothing.

One small finished run (the real loop, offline models) is doctored once per module; each reader
is one parameter of the same test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ray_knowsim.io.commits import STEP_FILES, new_token, read_commit_tables, remove_commit, write_commit
from ray_knowsim.io.rundir import RunReader
from tests.doubles.finished_runs import finished_run

pytestmark = pytest.mark.usefixtures("ray_local")


def sessions_seen(reader: str, cfg, run_dir: Path, tmp: Path) -> tuple[int, int]:
    """(sessions, ok sessions) the reader works on."""
    if reader == "tables":
        from ray_knowsim.tables.reduce import aggregate_item_sums
        from ray_knowsim.tables.cost import cost_tables

        run = RunReader.open(run_dir)
        cells = aggregate_item_sums(run.sessions.files)  # per (cell, item)
        cost = cost_tables(run.sessions)["cost"]
        total = cost[(cost["task"] == "all") & (cost["condition"] == "all")].iloc[0]
        assert int(total["n_sessions"]) == int(cells["n_sessions"].sum())
        return int(cells["n_sessions"].sum()), int(cells["n_ok"].sum())
    if reader == "report":
        from ray_knowsim.report.build import ReportOptions, build_report

        content = build_report(run_dir, tmp / "report", ReportOptions(sample=2)).content
        return content.summary.rows, -1  # the report's own figures are per cell: its row count is what it read
    if reader == "compare":
        from ray_knowsim.compare.runs import load_runs

        loaded = load_runs([run_dir])[0]
        return len(loaded.outcomes), len(loaded.sessions)
    if reader == "validate":
        from ray_knowsim.validate.simdata import open_table, session_index

        table = open_table(run_dir, "sessions")
        return table.count_rows(), len(session_index(table))
    if reader == "sweep":
        from ray_knowsim.sweep.config import parse_sweep_config
        from ray_knowsim.sweep.source import load_source

        data = load_source(parse_sweep_config({"name": "t", "source": {"run_dir": str(run_dir)}, "output": str(tmp / "sweep")}))
        return len(data.conversations) + sum(data.skipped.values()), len(data.conversations) + data.skipped.get(
            "no knowledge state (baseline)", 0)
    if reader == "score":
        from ray_knowsim.score.run_stage import score_run
        from ray_knowsim.score.store import RunScores

        out = score_run(cfg, run_dir, name=f"again-{tmp.name}")
        scores = RunScores.load(run_dir).sets[f"again-{tmp.name}"]
        ids = scores.column("session_id").to_pylist()
        assert len(ids) == len(set(ids))
        return -1, out.n_sessions  # the judges read ok sessions only
    raise AssertionError(reader)


READERS = ["tables", "report", "compare", "validate", "sweep", "score"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(config, clean run dir, doctored run dir, the clean run's (sessions, ok))."""
    base = tmp_path_factory.mktemp("every_reader")
    cfg, clean, outcome = finished_run(base)
    assert outcome.n_ok + outcome.n_failed == 24
    doctored = base / "doctored"
    shutil.copytree(clean, doctored)
    run = RunReader.open(doctored)
    twice = run.index.live()[0]
    sessions, turns = read_commit_tables(doctored, twice)  # the same shard committed again (a Ray retry)
    write_commit(doctored, shard_id=twice.shard_id, config_hash=twice.config_hash, sessions=sessions, turns=turns,
                 plan=twice.plan, summary=twice.summary)
    for table in ("sessions", "turns"):  # stale copies: another layout's names, and ours without a marker
        for k, f in enumerate(sorted((doctored / table).glob("*.parquet"))):
            shutil.copy(f, doctored / table / f"part-{k:05d}.parquet")
            shutil.copy(f, doctored / table / f"{twice.shard_id}.{new_token()}.parquet")
    assert RunReader.open(doctored).status().superseded_rows == len(twice.sessions)
    truth = RunReader.open(clean).status()
    return cfg, clean, doctored, (truth.n_committed, truth.n_ok)


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_sees_each_session_once(runs, reader, tmp_path):
    cfg, clean, doctored, (n, n_ok) = runs
    expected = sessions_seen(reader, cfg, clean, tmp_path / "clean")
    got = sessions_seen(reader, cfg, doctored, tmp_path / "doctored")
    assert got == expected
    if expected[0] >= 0:
        assert expected[0] == n
    if expected[1] >= 0:
        assert expected[1] == n_ok


@pytest.fixture(scope="module")
def stepped(runs, tmp_path_factory):
    """The clean run as an interrupted one leaves it: every shard's rows in Arrow IPC step commits
    (what a shard writes before its fold, io/datafiles.py), a few sessions each, one session
    committed twice (the later step outranks the earlier)."""
    _, clean, _, _ = runs
    root = tmp_path_factory.mktemp("stepped") / "run"
    shutil.copytree(clean, root)
    import pyarrow.compute as pc

    for k, commit in enumerate(RunReader.open(root).index.live()):
        sessions, turns = read_commit_tables(root, commit)
        ids = sessions.column("session_id").to_pylist()
        parts = [ids[: len(ids) // 2], ids[len(ids) // 2:]] + ([ids[:1]] if k == 0 else [])
        remove_commit(root, commit)
        for part in parts:
            keep = pa_ids(part)
            write_commit(root, shard_id=commit.shard_id, config_hash=commit.config_hash, plan=commit.plan,
                         summary=commit.summary, file_format=STEP_FILES,
                         sessions=sessions.filter(pc.is_in(sessions.column("session_id"), value_set=keep)),
                         turns=turns.filter(pc.is_in(turns.column("session_id"), value_set=keep)))
    names = {p.suffix for t in ("sessions", "turns") for p in (root / t).iterdir()}
    assert names == {".arrow"} and RunReader.open(root).status().superseded_rows == 1
    return root


def pa_ids(ids):
    import pyarrow as pa

    return pa.array(ids, pa.string())


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_reads_a_run_left_in_step_commits_as_the_finished_run(runs, stepped, reader, tmp_path):
    """An interrupted run's unfolded steps (Arrow IPC) read as the same sessions as its folded Parquet."""
    cfg, clean, _, _ = runs
    # its own output names (the score reader names its set by them: the first test's "clean" set exists)
    assert sessions_seen(reader, cfg, stepped, tmp_path / "stepped") == sessions_seen(reader, cfg, clean, tmp_path / "clean-vs-steps")


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_stops_at_an_unreadable_marker(runs, reader, tmp_path):
    cfg, clean, _, _ = runs
    broken = tmp_path / "broken"
    shutil.copytree(clean, broken)
    marker = sorted((broken / "commits").glob("*.json"))[0]
    marker.write_text('{"format": 2, "shard_id": ')  # cut short, as a full disk leaves it
    before = sorted(str(p.relative_to(broken)) for p in broken.rglob("*") if p.is_file())
    with pytest.raises(Exception) as err:
        sessions_seen(reader, cfg, broken, tmp_path / "out")
    assert str(marker) in str(err.value), f"{type(err.value).__name__}: {err.value}"
    after = sorted(str(p.relative_to(broken)) for p in broken.rglob("*") if p.is_file())
    assert [p for p in before if p not in after] == []  # nothing deleted
