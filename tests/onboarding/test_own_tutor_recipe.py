"""The README's recipe "Evaluate your own tutor through an OpenAI-compatible endpoint", run as
written: ``configs/own_tutor.yaml`` unchanged, its check step (``--set max_turns=2 --set
'levels=[novice]'``), through the installed ``ray-knowsim`` command, with ``ray-knowsim
serve-offline`` standing in for both endpoints (the tutor's and the simulator's, each serving the
model name the config asks for). The simulator entry gets ``offline_server: true`` so the offline
model can read its facts out of band; the tutor entry is exactly what a user writes.

Also checks the onboarding's promise of a quiet terminal: no Ray token-auth warning, no warning
line at all on stderr, and the API key never reaches the run folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ray_knowsim.io.rundir import RunReader
from tests.doubles.ports import BIND_FAILURE, pick_ports

REPO = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("ray-knowsim"))
KEY = "sk-recipe-test-0123456789abcdef"


def _serve(model_name: str) -> tuple[subprocess.Popen, str]:
    for _ in range(5):
        (port,) = pick_ports(1)
        proc = subprocess.Popen([CLI, "serve-offline", "--port", str(port), "--model-name", model_name],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as resp:
                    if model_name in resp.read().decode():
                        return proc, url
            except OSError:
                time.sleep(0.3)
        out = proc.communicate(timeout=10)[0] if proc.poll() is not None else ""
        proc.kill()
        if not BIND_FAILURE.search(out or ""):
            raise RuntimeError(f"serve-offline did not come up: {out[-500:]}")
    raise RuntimeError("no free port for serve-offline after 5 tries")


@pytest.fixture(scope="module")
def endpoints():
    procs = []
    try:
        tutor, tutor_url = _serve("my-tutor")
        procs.append(tutor)
        sim, sim_url = _serve("google/gemini-3-flash-preview")
        procs.append(sim)
        yield tutor_url, sim_url
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.mark.slow
@pytest.mark.ray  # the run starts its own local Ray
@pytest.mark.timeout(600)
def test_the_recipe_runs_as_written_against_serve_offline(endpoints, tmp_path):
    tutor_url, sim_url = endpoints
    out = tmp_path / "own_tutor_check"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    env.update(OPENROUTER_API_KEY=KEY, RAY_USAGE_STATS_ENABLED="0")
    cmd = [CLI, "run", "configs/own_tutor.yaml", "--set", "max_turns=2", "--set", "levels=[novice]", "-o", str(out),
           "--set", f"models.tutor.base_url={tutor_url}",
           "--set", f"models.simulator.base_url={sim_url}", "--set", "models.simulator.offline_server=true"]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ok; sessions ok 14, failed 0, of 14" in done.stdout, done.stdout[-2000:]
    assert "assistant 28 calls" in done.stdout  # 14 conversations x 2 turns, every tutor reply from the endpoint
    assert "Token authentication" not in done.stderr
    noisy = [line for line in done.stderr.splitlines() if "warning" in line.lower()]
    assert not noisy, noisy

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backends"]["assistant:tutor"] == "http" and manifest["config"]["models"]["tutor"]["model"] == "my-tutor"
    assert manifest["status"] == "ok" and manifest["plan"]["n_sessions"] == 14
    assert RunReader.open(out).status().n_ok == 14
    leaked = [p for p in out.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert not leaked, leaked
