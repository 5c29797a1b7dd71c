"""ray_knowsim.cluster.node_loss: which failures are a lost node, retrying what is idempotent; and
end to end, a worker node lost mid-run (every process of it SIGKILLed at once, as a spot preemption does)
does not fail the run: on a loopback cluster (a head without CPUs, two worker nodes) a job whose
shards are running on the node that dies still succeeds, and its rows equal an undisturbed run's,
no session twice. The steps after the shards (the Ray Data reduction, the judges, the tables) run
while Ray may not yet have declared the node dead.

The real simulation loop with the offline models; the stand-in only adds a start delay per shard,
so the run can be caught with shards running on the node that is killed."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from ray_knowsim.config import load_run_config
from ray_knowsim.cluster.node_loss import is_node_loss, retry_on_node_loss
from ray_knowsim.run.fan_out import run
from ray_knowsim.io.commits import MarkerError, read_markers
from tests.doubles.raycluster import kill_node, started_cluster
from tests.doubles.run_config import assert_same_rows, small_config, write_config

ROOT = Path(__file__).resolve().parents[2]
SMALL_STORE = ("--object-store-memory", str(150 * 2**20))


def test_node_losses_are_told_from_errors_of_our_code():
    import ray.exceptions as rex
    from ray.data.exceptions import SystemException

    assert is_node_loss(rex.ActorDiedError())
    assert is_node_loss(rex.NodeDiedError("node gone"))
    assert is_node_loss(rex.RayTaskError("f", "tb", rex.WorkerCrashedError()))
    assert not is_node_loss(ValueError("bad input"))
    assert not is_node_loss(rex.RayTaskError("partial_moments", "tb", KeyError("kg")))
    # shapes a Ray Data read was seen to raise when its FooterReader actor died with its node
    dead_reader = rex.UnserializableException("ray.exceptions.ActorDiedError: The actor died because its node has died.")
    assert is_node_loss(dead_reader)
    assert not is_node_loss(rex.UnserializableException("ValueError: a column is missing"))
    try:
        try:
            raise RuntimeError("lost block")
        except RuntimeError as inner:
            raise inner.with_traceback(None) from SystemException()
    except RuntimeError as marked:
        assert is_node_loss(marked)


def test_retry_runs_an_idempotent_step_again_only_after_a_loss():
    import ray.exceptions as rex

    calls, warnings = [], []

    def flaky(x):
        calls.append(x)
        if len(calls) < 3:
            raise rex.ActorDiedError()
        return x * 2

    assert retry_on_node_loss(flaky, 21, wait_s=0, warn=warnings.append, what="tables") == 42
    assert len(calls) == 3 and len(warnings) == 2 and "tables" in warnings[0]

    def broken():
        calls.append("broken")
        raise ValueError("our bug")

    calls.clear()
    with pytest.raises(ValueError):
        retry_on_node_loss(broken, wait_s=0)
    assert calls == ["broken"]  # never retried

    def always_lost():
        calls.append("lost")
        raise rex.NodeDiedError("gone")

    calls.clear()
    with pytest.raises(rex.NodeDiedError):
        retry_on_node_loss(always_lost, attempts=3, wait_s=0, warn=lambda m: None)
    assert calls == ["lost"] * 3


def committed_sessions(run_dir: Path) -> int:
    """Sessions committed so far (0 while the run dir is being set up or a commit is half-read)."""
    try:
        return sum(len(c.sessions) for c in read_markers(run_dir))
    except (MarkerError, OSError):
        return 0


@pytest.fixture
def loopback_cluster():
    # three one-CPU worker nodes, joined one at a time (two joining at once time out); victim0 and victim1 die
    workers = [(1, (*SMALL_STORE, "--resources", f'{{"victim{k}": 1}}')) for k in range(3)]
    with started_cluster(multi_node=True, head_cpus=0, head_extra=SMALL_STORE, workers=workers) as cluster:
        yield cluster


@pytest.mark.slow
@pytest.mark.ray_cluster
@pytest.mark.timeout(900)
def test_worker_nodes_lost_mid_run_and_before_the_tables_do_not_fail_the_job(loopback_cluster, tmp_path):
    """Node 0 dies with shards running on it (they are re-run); node 1 dies right after the last
    shard committed, so the judges and the Ray Data reduction start while Ray still counts it alive
    (it takes ~15 s to declare a node dead) and place work on it."""
    cluster = loopback_cluster
    options = {"start_delay_s": 3.0, "delegate": "ray_knowsim.sim.shard:run_shard"}
    n_sessions = 24  # in 12 shards of 2: four waves over three one-CPU nodes
    path = write_config(tmp_path, small_config(engine={"shard_size": 2, "shard_fn_options": options}))
    out = tmp_path / "killed"
    job = f"node-loss-{uuid.uuid4().hex[:8]}"
    proc = cluster.submit(["python", "-m", "ray_knowsim", "run", str(path), "-o", str(out), "--quiet"],
                          cwd=ROOT, working_dir=ROOT, no_wait=True, extra=("--submission-id", job))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]

    victims = [cluster.node_with("victim0"), cluster.node_with("victim1")]
    deadline = time.monotonic() + 400
    lost_shards: list[str] | None = None
    late_kill_at = None
    while time.monotonic() < deadline and cluster.job_status(job) in (None, "PENDING", "RUNNING"):
        committed = committed_sessions(out)
        if lost_shards is None:
            on_victim = [t["name"] for t in cluster.running_tasks()
                         if t.get("node_id") == victims[0] and str(t.get("name", "")).startswith("ray-knowsim shard-")]
            if committed >= 4 and on_victim:
                kill_node(cluster.workers[0])
                lost_shards = on_victim
        elif committed == n_sessions:
            kill_node(cluster.workers[1])
            late_kill_at = time.monotonic()
            break
        time.sleep(0.2)
    assert lost_shards, f"the run was never caught with a shard on node 0: {cluster.job_logs(job)[-3000:]}"
    assert late_kill_at is not None, f"the run ended before node 1 was killed: {cluster.job_logs(job)[-3000:]}"

    status = cluster.wait_job(job, timeout_s=600)
    logs = cluster.job_logs(job)
    assert status == "SUCCEEDED", f"node 0 killed with {lost_shards} running; job {status}:\n{logs[-4000:]}"
    assert "complete (all 24 planned sessions committed, none failed)" in logs, logs[-3000:]
    assert (out / "tables" / "level_means.csv").is_file()

    clean = run(load_run_config(path), output=tmp_path / "clean", quiet=True, tables=False)
    assert clean.n_ok == 24
    assert_same_rows(tmp_path / "clean", out, scores=False)
