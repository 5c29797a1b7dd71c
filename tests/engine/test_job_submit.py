"""`ray job submit --working-dir . -- ray-knowsim run configs/demo.yaml` against a local
`ray start --head`, with the environment notes' four precautions: token auth off on loopback
(RAY_AUTH_MODE=disabled), bind to loopback (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0), our own ports for
the dashboard agent and metrics, the head run with --block and stopped by terminating that process
(never `ray stop`), and the first submit retried while the job agent comes up. The head binds its
ports itself, so they cannot be held for it: a start that fails on a bind is retried with fresh
ports (at most HEAD_ATTEMPTS starts)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.doubles.ports import BIND_FAILURE, pick_ports

pytestmark = [pytest.mark.ray_cluster, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
HEAD_ATTEMPTS = 3  # starts of the head, each with fresh ports, when one fails on a bind
READY_TIMEOUT_S = 120
BIND_GRACE_S = 15  # a bind failure in the logs and still not ready this long after: give up on it


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.read() if r.status == 200 else None
    except OSError:
        return None


def _logs(head_log: Path, temp: str) -> str:
    """The head's own output and its session's logs (where its servers report bind errors)."""
    texts = []
    for f in [head_log, *sorted(Path(temp).glob("session_*/logs/*"))]:
        try:
            texts.append(f.read_text(errors="replace"))
        except OSError:
            pass
    return "\n".join(texts)


def _stop(head: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGINT, 15), (signal.SIGKILL, 5)):  # this head's process group only
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            break
        try:
            head.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass


def _start_head(ray_bin: str, env: dict, temp: str):
    """One `ray start --head --block` with Ray's temp dir `temp`; returns (process, dashboard URL)
    once the dashboard and the dashboard agent (which runs submitted jobs) both answer, else
    (process, None) with the head stopped and its output in temp/head.log."""
    # Ray's head binds these ports itself (GCS, dashboard, agent, metrics; and Ray picks further
    # ones of its own the same way), so they cannot be held for it: they are free when picked and
    # released just before the head binds them. That race cannot be removed from here; the
    # fixture makes it harmless instead: a start that fails on a bind is retried with fresh ports.
    gcs, dash, agent, metrics = pick_ports(4)
    cmd = [ray_bin, "start", "--head", "--block", "--num-cpus", "2", "--port", str(gcs),
           "--node-ip-address", "127.0.0.1", "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
           "--dashboard-port", str(dash), "--dashboard-agent-listen-port", str(agent),
           "--metrics-export-port", str(metrics), "--temp-dir", temp, "--disable-usage-stats"]
    log = Path(temp) / "head.log"
    with open(log, "wb") as fh:
        head = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{dash}"
    deadline = time.monotonic() + READY_TIMEOUT_S
    bind_failure_seen = None
    while True:
        if _get(f"{url}/api/version") is not None and \
                _get(f"http://127.0.0.1:{agent}/api/local_raylet_healthz") == b"success":
            return head, url
        if head.poll() is not None or time.monotonic() > deadline:
            break
        if bind_failure_seen is None and BIND_FAILURE.search(_logs(log, temp)):
            bind_failure_seen = time.monotonic()  # servers retry binds for a few seconds: wait a little
        if bind_failure_seen is not None and time.monotonic() - bind_failure_seen > BIND_GRACE_S:
            break
        time.sleep(0.5)
    _stop(head)
    return head, None


@pytest.fixture
def ray_head():
    ray_bin = shutil.which("ray", path=str(Path(os.sys.executable).parent)) or shutil.which("ray")
    if ray_bin is None:
        pytest.skip("the `ray` command is not installed")
    temp = tempfile.mkdtemp(prefix="rkh", dir="/tmp")  # short: Ray's socket paths live under it
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0",
               PATH=f"{Path(os.sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("RAY_ADDRESS", None)
    head = None
    try:
        for attempt in range(1, HEAD_ATTEMPTS + 1):
            attempt_temp = os.path.join(temp, str(attempt))  # each start reads only its own logs
            os.mkdir(attempt_temp)
            head, url = _start_head(ray_bin, env, attempt_temp)
            if url is not None:
                break
            log = Path(attempt_temp) / "head.log"
            if not BIND_FAILURE.search(_logs(log, attempt_temp)) or attempt == HEAD_ATTEMPTS:
                pytest.fail(f"the Ray head did not come up (start {attempt} of at most {HEAD_ATTEMPTS}):\n"
                            f"{log.read_text(errors='replace')[-3000:]}")
        yield url, env, ray_bin
    finally:
        if head is not None:
            _stop(head)
        shutil.rmtree(temp, ignore_errors=True)


def test_job_submit_runs_the_demo_config(ray_head, tmp_path):
    url, env, ray_bin = ray_head
    out = tmp_path / "out"
    entry = ["ray-knowsim", "run", "configs/demo.yaml", "-o", str(out), "--quiet",
             "--set", "trials=1", "--set", "max_turns=3", "--set", "levels=[novice]", "--set", "engine.shard_size=14"]
    cmd = [ray_bin, "job", "submit", "--address", url, "--working-dir", str(ROOT), "--", *entry]
    deadline = time.monotonic() + 60
    while True:
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        text = proc.stdout + proc.stderr
        if proc.returncode == 0 or time.monotonic() > deadline or "No available agent" not in text:
            break
        time.sleep(2)  # the job agent comes up a little after the dashboard answers
    assert proc.returncode == 0, text[-3000:]
    assert "succeeded" in text and "sessions ok 28, failed 0, of 28" in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["invocations"][-1]["address"] not in (None, "local")  # it joined the head
    assert (out / "tables" / "level_means.csv").is_file()
