"""The one bounded fan-out (ray_knowsim.cluster.bounded_fan_out) on real local Ray: it never has
more than its window in flight and fills it, hands results back as they finish (not in submission
order), propagates failures (raised with fail_fast, returned without, the rest cancelled either
way when it stops or is left), and refuses an output directory a worker does not see, with one
error naming the node."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ray_knowsim.cluster.bounded_fan_out import BoundedFanOut, SharedDirError, check_shared_dir

ROOT = Path(__file__).resolve().parents[2]


def _remote(ray):
    """A task that sleeps, then returns (value, start, end) or fails; defined here so that Ray ships
    it by value (the workers cannot import a test module)."""

    def sleep_then(seconds: float, value, fail: bool = False):
        start = time.time()
        time.sleep(seconds)
        if fail:
            raise ValueError(f"task {value} failed")
        return value, start, time.time()

    return ray.remote(num_cpus=0.25, max_retries=0)(sleep_then)


def _overlap(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_never_more_than_the_window_in_flight_and_the_window_is_used(ray_local):
    task = _remote(ray_local)
    seen_in_flight = []
    fan: BoundedFanOut[int]

    def submit(i: int):
        seen_in_flight.append(len(fan.in_flight) + 1)
        return task.remote(0.4, i)

    fan = BoundedFanOut(range(12), submit, window=lambda: 3, poll_s=0.05)
    values, spans = [], []
    for finished in fan:
        assert len(fan.in_flight) <= 3
        for f in finished:
            assert f.ok
            values.append(f.value[0])
            spans.append(f.value[1:])
    assert sorted(values) == list(range(12)) and fan.submitted == 12
    assert max(seen_in_flight) == 3  # the driver's count
    assert _overlap(spans) == 3  # and what ran at once on the workers (8 could run: 2 CPUs / 0.25)


def test_results_come_back_as_they_finish_not_in_submission_order(ray_local):
    """Judged by when each task really ended on its worker (a worker that has to start first can
    delay a short task past a longer one: the order of the delays alone is not the order of the
    ends), and the first submitted, by far the longest, comes back last."""
    task = _remote(ray_local)
    delays = {0: 2.5, 1: 0.1, 2: 1.0, 3: 0.3}
    fan = BoundedFanOut(delays, lambda i: task.remote(delays[i], i), window=lambda: 4, poll_s=0.05)
    batches = [[(f.item, f.value[2]) for f in finished] for finished in fan if finished]
    order = [item for batch in batches for item, _ in batch]
    assert sorted(order) == [0, 1, 2, 3] and order[-1] == 0 and order != [0, 1, 2, 3]
    for k, earlier in enumerate(batches):  # nothing handed back before something that ended earlier
        for later in batches[k + 1:]:
            assert max(end for _, end in earlier) <= min(end for _, end in later) + 0.05, batches


def test_with_fail_fast_the_first_failure_is_raised_and_the_rest_cancelled(ray_local, tmp_path):
    task = _remote(ray_local)
    refs = {}

    def submit(i: int):
        refs[i] = task.remote(0.2 if i == 0 else 30.0, i, fail=i == 0)
        return refs[i]

    fan = BoundedFanOut(range(10), submit, window=lambda: 3, poll_s=0.05, fail_fast=True)
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="task 0 failed"):
        for _ in fan:
            pass
    assert sorted(refs) == [0, 1, 2]  # nothing submitted after the failure
    for i in (1, 2):  # cancelled, not left running for 30 s
        with pytest.raises((ray_local.exceptions.TaskCancelledError, ray_local.exceptions.WorkerCrashedError)):
            ray_local.get(refs[i], timeout=20)
    assert time.monotonic() - t0 < 25


def test_without_fail_fast_a_failure_comes_back_and_the_others_finish(ray_local):
    task = _remote(ray_local)
    fan = BoundedFanOut(range(6), lambda i: task.remote(0.1, i, fail=i == 2), window=lambda: 2, poll_s=0.05)
    finished = {f.item: f for batch in fan for f in batch}
    assert sorted(finished) == list(range(6))
    assert isinstance(finished[2].error, ValueError) and not finished[2].cancelled
    assert all(finished[i].ok and finished[i].value[0] == i for i in (0, 1, 3, 4, 5))


def test_stop_returns_what_never_started_and_cancels_what_runs(ray_local):
    task = _remote(ray_local)
    fan = BoundedFanOut(range(8), lambda i: task.remote(30.0, i), window=lambda: 2, poll_s=0.05, cancel_grace_s=5)
    left, finished = None, []
    t0 = time.monotonic()
    for batch in fan:
        finished += batch
        if left is None and fan.submitted == 2:
            left = fan.stop()
    assert left == [2, 3, 4, 5, 6, 7]
    assert sorted(f.item for f in finished) == [0, 1] and all(f.cancelled for f in finished)
    assert time.monotonic() - t0 < 20


def test_leaving_the_loop_cancels_the_tasks_in_flight(ray_local):
    """Ctrl-C or an exception in the caller's loop ends the generator: nothing runs on."""
    task = _remote(ray_local)
    refs = []

    def submit(i: int):
        refs.append(task.remote(30.0, i))
        return refs[-1]

    with pytest.raises(KeyboardInterrupt):
        for _ in BoundedFanOut(range(5), submit, window=lambda: 2, poll_s=0.05):
            raise KeyboardInterrupt
    assert len(refs) == 2
    for ref in refs:
        with pytest.raises((ray_local.exceptions.TaskCancelledError, ray_local.exceptions.WorkerCrashedError)):
            ray_local.get(ref, timeout=20)


def test_the_check_passes_where_every_node_sees_the_folder_and_leaves_nothing(ray_local, tmp_path):
    nodes = check_shared_dir(tmp_path, what="the output directory")
    assert len(nodes) == 1  # this one node, the driver's own, is checked too
    assert list((tmp_path / ".tmp").iterdir()) == []
    assert check_shared_dir(tmp_path, skip=nodes) == set()  # a checked node is not probed again


def _private_mounts_work(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "mnt-probe"
    probe.mkdir()
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", f"mount -t tmpfs none {probe}"]
    return subprocess.run(cmd, capture_output=True).returncode == 0


def test_a_folder_the_workers_do_not_see_is_refused_with_one_error(ray_local, tmp_path):
    """A driver whose output folder is private to it (a tmpfs mounted over it in its own mount
    namespace, as a laptop's local disk is to a remote cluster) joins the suite's local Ray: the
    workers see the real folder, without the probe, and the fan-out refuses to submit anything."""
    if not _private_mounts_work(tmp_path):
        pytest.skip("private mount namespaces (unshare --mount, root) are not available here")
    out = tmp_path / "out"
    out.mkdir()
    address = ray_local.get_runtime_context().gcs_address
    driver = textwrap.dedent(f"""
        import ray
        from ray_knowsim.cluster.bounded_fan_out import BoundedFanOut, SharedDirError
        ray.init(address={address!r}, logging_level="ERROR", log_to_driver=False)
        submitted = []
        fan = BoundedFanOut(range(3), lambda i: submitted.append(i), window=lambda: 2, shared_dir={str(out)!r},
                            shared_what="the run directory")
        try:
            list(fan)
        except SharedDirError as exc:
            print("ERROR:", exc)
        print("SUBMITTED:", submitted)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
           f'mount -t tmpfs none "$0" && exec "$1" -c "$2"', str(out), sys.executable, driver]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    error = next(line for line in proc.stdout.splitlines() if line.startswith("ERROR:"))
    assert f"the run directory {out} is not visible from 1 of 1 node(s): " in error
    assert "must be on storage every node mounts at the same path (docs/cluster.md)" in error
    assert "SUBMITTED: []" in proc.stdout
    assert list(out.iterdir()) == []  # the real folder: the probe was written in the driver's private one


