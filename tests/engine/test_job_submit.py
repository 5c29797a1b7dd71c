"""`ray job submit --working-dir . -- ray-knowsim run configs/demo.yaml` against a local
`ray start --head`, with the environment notes' four precautions: token auth off on loopback
(RAY_AUTH_MODE=disabled), bind to loopback (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0), our own ports for
the dashboard agent and metrics, the head run with --block and stopped by terminating that process
(never `ray stop`), and the first submit retried while the job agent comes up."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray_cluster, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_head():
    ray_bin = shutil.which("ray", path=str(Path(os.sys.executable).parent)) or shutil.which("ray")
    if ray_bin is None:
        pytest.skip("the `ray` command is not installed")
    temp = tempfile.mkdtemp(prefix="rkh", dir="/tmp")  # short: Ray's socket paths live under it
    dash = free_port()
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0",
               PATH=f"{Path(os.sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("RAY_ADDRESS", None)
    cmd = [ray_bin, "start", "--head", "--block", "--num-cpus", "2", "--port", str(free_port()),
           "--node-ip-address", "127.0.0.1", "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
           "--dashboard-port", str(dash), "--dashboard-agent-listen-port", str(free_port()),
           "--metrics-export-port", str(free_port()), "--temp-dir", temp, "--disable-usage-stats"]
    head = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/version", timeout=2) as r:
                    json.load(r)
                break
            except OSError:
                if head.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the Ray head did not come up")
                time.sleep(0.5)
        yield url, env, ray_bin
    finally:
        for sig, wait_s in ((signal.SIGINT, 15), (signal.SIGKILL, 5)):  # this head's process group only
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            try:
                head.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                pass
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
