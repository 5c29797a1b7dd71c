"""The execute layer without Ray: a shard task commits finished sessions in small steps (by count,
or by time when sessions finish slowly), folds them at its end, keeps what finished before a
crash, and — run again as Ray runs a retried task — runs only what is not committed. Rows carry
their attempt, the earlier errors and the failure class."""

from __future__ import annotations

import json

import pytest

from ray_knowsim.plan.build import make_context
from ray_knowsim.config import parse_run_config
from ray_knowsim.backends.model_set import ModelSet
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.run.resume import Attempt
from ray_knowsim.run.worker import CommitPolicy, ShardContractError, execute_shard
from ray_knowsim.cluster.bounded_fan_out import SharedDirError
from ray_knowsim.io.commits import RunDir, read_markers
from ray_knowsim.run.manifest import write_manifest
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.llm.offline import OfflineModel
from tests.doubles.run_config import STANDIN, small_config


@pytest.fixture(scope="module")
def setup():
    cfg = parse_run_config(small_config())
    plan = Plan(cfg, load_inputs(cfg))
    ctx = make_context(cfg, "t-run", cfg.config_hash())
    models = ModelSet({"sim": OfflineModel(name="sim")}, {"user_sim": "sim", "extractor": "sim"}, ["sim"])
    return plan, ctx, models


def execute(setup, root, policy=CommitPolicy(), attempts=None, manifest=True, **options):
    """One shard task; ``manifest``: the driver wrote the run's manifest first (as every run does)."""
    plan, ctx, models = setup
    if manifest and not RunDir(root).manifest.exists():
        write_manifest(RunDir(root), {"config_hash": ctx.config_hash})
    return execute_shard(plan.shard(0), models, ctx, str(root), STANDIN, options, attempts, None, policy, plan.fingerprint)


def rows(root):
    return {r["session_id"]: r for r in RunReader.open(root, config_hash=None).sessions.read().to_pylist()}


def test_small_commits_by_count_then_one_fold(setup, tmp_path):
    out = execute(setup, tmp_path, CommitPolicy(every=2, every_s=60))
    assert out["commits"] == 2 and out["sessions"] == 4 and out["already_committed"] == 0
    markers = read_markers(tmp_path)
    assert len(markers) == 1 and markers[0].summary["folded"] and len(markers[0].sessions) == 4
    assert markers[0].plan == setup[0].fingerprint and len(rows(tmp_path)) == 4


def test_a_shard_whose_last_step_took_its_last_session_ends_as_one_parquet_commit(setup, tmp_path):
    """Four sessions, a step every four: the one step (Arrow IPC, more might have followed) is
    rewritten as Parquet when the shard ends, as a fold of several steps is."""
    out = execute(setup, tmp_path, CommitPolicy(every=4, every_s=60))
    assert out["commits"] == 1 and out["sessions"] == 4
    markers = read_markers(tmp_path)
    assert len(markers) == 1 and markers[0].file_format == "parquet" and len(markers[0].sessions) == 4
    assert {p.suffix for t in ("sessions", "turns") for p in (tmp_path / t).iterdir()} == {".parquet"}
    assert len(rows(tmp_path)) == 4


def test_slow_sessions_are_committed_by_time(setup, tmp_path):
    out = execute(setup, tmp_path, CommitPolicy(every=100, every_s=0.1, fold=False), stream_delay_s=1.0)
    assert out["commits"] == 4 and len(read_markers(tmp_path)) == 4  # each session on its own, as it finished


def test_a_crash_keeps_what_finished_and_a_retry_runs_only_the_rest(setup, tmp_path):
    with pytest.raises(RuntimeError, match="crashed after 2"):
        execute(setup, tmp_path, CommitPolicy(every=1), raise_after=2)
    assert len(rows(tmp_path)) == 2  # committed before the crash, folded or not
    again = execute(setup, tmp_path, CommitPolicy(every=1))  # Ray's retry: the same arguments
    assert again["already_committed"] == 2 and again["sessions"] == 2
    clean = tmp_path / "clean"
    execute(setup, clean)
    got, want = rows(tmp_path), rows(clean)
    assert got.keys() == want.keys() and RunReader.open(tmp_path).status().superseded_rows == 0
    for sid in want:
        assert got[sid] == want[sid]
    # the crashed run's two steps (Arrow IPC) were folded by the retry into one Parquet commit
    # naming their own spend journal, beside the retry's fold: only Parquet is left
    assert (again["leftover_steps_folded"], again["leftover_steps_removed"]) == (2, 0)
    markers = read_markers(tmp_path)
    assert len(markers) == 2 and {m.file_format for m in markers} == {"parquet"}
    assert len({m.summary["spend_journal"] for m in markers}) == 2
    assert {p.suffix for t in ("sessions", "turns") for p in (tmp_path / t).iterdir()} == {".parquet"}


def test_a_rerun_folds_the_steps_it_left_without_the_rows_it_outranked(setup, tmp_path):
    """A session that failed before the crash is rerun at attempt 2: the crashed run's step of it
    holds only its outranked first row and goes; the other step is folded (the rerun's row counts)."""
    plan = setup[0]
    first = plan.shard_session_ids(0)[0]
    with pytest.raises(RuntimeError, match="crashed after 2"):
        execute(setup, tmp_path, CommitPolicy(every=1), raise_after=2, fail_sessions={first: "assistant_http_503"})
    before = RunReader.open(tmp_path)
    assert {c.file_format for c in before.all_commits} == {"arrow"} and rows(tmp_path)[first]["status"] == "failed"
    again = execute(setup, tmp_path, CommitPolicy(every=1), attempts={first: Attempt(2, ("assistant_http_503",))})
    assert again["sessions"] == 3 and (again["leftover_steps_folded"], again["leftover_steps_removed"]) == (1, 1)
    run = RunReader.open(tmp_path)
    assert {c.file_format for c in run.all_commits} == {"parquet"} and run.status().superseded_rows == 0
    got = rows(tmp_path)
    assert len(got) == 4 and got[first]["status"] == "ok" and got[first]["attempt"] == 2
    late = [c for c in run.all_commits if c.summary.get("late_fold")]
    assert len(late) == 1 and first not in late[0].sessions and len(late[0].sessions) == 1


def test_rows_carry_attempt_errors_and_class(setup, tmp_path):
    plan = setup[0]
    a, b = plan.shard_session_ids(0)[:2]
    attempts = {a: Attempt(2, ("assistant_http_503",))}
    execute(setup, tmp_path, attempts=attempts, fail_sessions={a: "extractor_invalid_json", b: "user_sim_timeout"})
    got = rows(tmp_path)
    assert got[a]["attempt"] == 2 and json.loads(got[a]["previous_errors"]) == ["assistant_http_503"]
    assert got[a]["failure_class"] == "model" and got[b]["failure_class"] == "infra" and got[b]["attempt"] == 1
    ok = [r for r in got.values() if r["status"] == "ok"]
    assert ok and all(r["failure_class"] is None and r["previous_errors"] == "[]" for r in ok)
    # the same attempts again (a retried task): nothing left to run
    assert execute(setup, tmp_path, attempts=attempts)["sessions"] == 0


def test_a_broken_contract_is_refused_before_its_rows_are_committed(setup, tmp_path, monkeypatch):
    from tests.doubles.standin import _result as real


    def foreign(shard, s, ctx, *args):
        result = real(shard, s, ctx, *args)
        result.session.run_id = "another-run"
        return result

    monkeypatch.setattr("tests.doubles.standin._result", foreign)
    with pytest.raises(ShardContractError, match="carries run another-run"):
        execute(setup, tmp_path)
    assert not (tmp_path / "commits").exists() or read_markers(tmp_path) == []


def test_a_node_that_does_not_see_the_run_directory_refuses_before_anything_is_written(setup, tmp_path):
    """What a worker node without the shared mount sees: no manifest (or another run's). The task
    fails with the one shared-directory error, and writes nothing there: no commit, no journal."""
    private = tmp_path / "not-shared"
    with pytest.raises(SharedDirError, match="every node mounts at the same path"):
        execute(setup, private, manifest=False)
    assert not private.exists()
    write_manifest(RunDir(private), {"config_hash": "0" * 16})  # another run's directory
    with pytest.raises(SharedDirError, match="belongs to other work"):
        execute(setup, private, manifest=False)
    assert [p.name for p in private.rglob("*") if p.is_file()] == ["manifest.json"]  # folders only, besides it


def test_the_shard_loop_runs_with_fewer_collections_and_the_settings_come_back(setup, tmp_path, monkeypatch):
    """The sessions' event loop runs inside run/collector.fewer_collections; after the shard the
    worker process has its own settings again (another task may run in it next)."""
    import gc

    from ray_knowsim.run import worker
    from ray_knowsim.run.collector import YOUNG_THRESHOLD

    seen = []
    real_run = worker.asyncio.run

    def run(coro):
        seen.append((gc.get_threshold()[0], gc.get_freeze_count() > 0))
        return real_run(coro)

    monkeypatch.setattr(worker.asyncio, "run", run)
    before = gc.get_threshold(), gc.get_freeze_count()
    out = execute(setup, tmp_path)
    assert out["sessions"] == 4
    assert seen == [(max(before[0][0], YOUNG_THRESHOLD), True)]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
