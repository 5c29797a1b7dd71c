"""Runs that stop before their end, on a local Ray: ``engine.fail_fast`` ends a run whose every
session fails the same way, and Ctrl-C says what is safe and how to resume."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web

from ray_knowsim.cli.main import main as cli
from ray_knowsim.config import parse_run_config
from ray_knowsim.run.fan_out import run
from ray_knowsim.io.rundir import RunReader, run_status_text, sessions_text
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.llm.offline.server import build_app, serve_app_in_thread
from tests.doubles.run_config import small_config, write_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_local")]
ROOT = Path(__file__).resolve().parents[2]
SESSION = re.compile(r" of (\S+)$")


def test_fail_fast_stops_an_always_failing_run_early_naming_the_error(tmp_path):
    """A wrong model name with the checks skipped: every session fails with HTTP 404; the run
    stops after about 20 of 96 sessions, with committed sessions kept."""
    attempted: set[str] = set()

    @web.middleware
    async def note(request, handler):
        if request.path.endswith("/chat/completions"):
            body = await request.json()
            if body.get("model") == "gpt-x":
                attempted.add(SESSION.search(body["messages"][-1]["content"]).group(1))
        return await handler(request)

    app = build_app(OfflineModel(), served_name="offline")
    app.middlewares.append(note)
    with serve_app_in_thread(app) as server:
        data = small_config(models={"sim": {"backend": "offline"},
                                    "tutor": {"backend": "http", "base_url": server.base_url, "model": "gpt-x"}},
                            trials=4, engine={"shard_fn_options": {"call_models": True, "start_delay_s": 0.5},
                                              "max_concurrent_shards": 2})
        data["roles"]["assistant"] = {"model": "tutor"}
        out = run(parse_run_config(data), output=tmp_path, quiet=True, tables=False, preflight=False)
    assert out.n_sessions == 96 and out.status == "stopped_on_failures"
    assert out.stopped.error == "assistant_http_404" and out.stopped.failed >= 20 and out.stopped.finished >= 20
    assert 20 <= len(attempted) < 96, len(attempted)
    assert out.incomplete and all(v.startswith(("not started:", "cancelled:")) for v in out.incomplete.values())
    committed = RunReader.open(tmp_path).sessions.read(["status"]).to_pylist()
    assert 20 <= len(committed) <= len(attempted) and out.n_failed == len(committed)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    inv = manifest["invocations"][-1]
    assert manifest["status"] == "stopped_on_failures" and inv["totals"]["stopped"]["error"] == "assistant_http_404"
    assert inv["preflight"]["skipped"] is True


def test_ctrl_c_says_how_many_sessions_are_safe_and_the_command_that_resumes(tmp_path):
    options = {"start_delay_s": 1.0, "stream_delay_s": 0.4, "delegate": "ray_knowsim.sim.shard:run_shard"}
    path = write_config(tmp_path, small_config(engine={"shard_fn_options": options, "commit_every": 1}))
    out = tmp_path / "run"
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "ray_knowsim.cli.main", "run", str(path), "-o", str(out), "--quiet"],
                            env=env, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and not list((out / "commits").glob("*.json")):
            time.sleep(0.1)
        assert proc.poll() is None, f"the run ended before it could be interrupted: {proc.stderr.read()[-2000:]}"
        proc.send_signal(signal.SIGINT)  # Ctrl-C: to the driver, as a terminal sends it
        _, err = proc.communicate(timeout=120)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of its local Ray, ours only
        except ProcessLookupError:
            pass
    assert proc.returncode == 130, err[-2000:]
    said = re.search(r"interrupted: (\d+) of 24 planned sessions are committed and safe \((\d+) ok\) in (.+); resume with:\n  (.+)\n", err)
    assert said, err[-2000:]
    committed = len(RunReader.open(out).sessions.read(["session_id"]))
    assert int(said.group(1)) == committed and 0 < committed < 24
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    # the report's and the viewer's status line: the same numbers in the same words (issue 51)
    assert run_status_text(out).startswith(f"interrupted ({sessions_text(committed, 24)} committed: interrupted")
    command = shlex.split(said.group(4))
    assert command[:2] == ["ray-knowsim", "run"] and command[2:5] == [str(path), "-o", str(out)]
    assert cli(command[1:]) == 0  # the printed command resumes the run to its end
    assert len(RunReader.open(out).sessions.read(["session_id"])) == 24
