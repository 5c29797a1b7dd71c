"""Kill the driver (SIGKILL) mid-run — mid-shard, with some of a shard's sessions already
committed in small steps and the rest in flight — then resume with the same command: the rows
equal a clean run's, none lost, none duplicated, and no committed session ran again.

The real simulation loop with the offline models; the stand-in wrapper only delays its start and
spaces out the results it passes on (as a per-session loop yields them), with a commit after every
session, so the run can be caught between two commits of one shard. The killed run is a real
`ray-knowsim run` subprocess with its own local Ray; the clean run and the resume share this
module's Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ray_knowsim.config import load_run_config
from ray_knowsim.run.fan_out import run
from ray_knowsim.io.commits import read_markers
from ray_knowsim.io.rundir import RunReader
from tests.doubles.run_config import assert_same_rows, small_config, write_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_local")]
ROOT = Path(__file__).resolve().parents[2]


def committed_per_shard(run_dir: Path) -> Counter:
    """Shard id -> distinct sessions committed over all its commits (a fold, or a session committed
    twice, re-commits sessions already counted, so it keeps the count)."""
    seen: dict[str, set[str]] = {}
    if (run_dir / "commits").is_dir():
        for c in read_markers(run_dir):
            seen.setdefault(c.shard_id, set()).update(c.sessions)
    return Counter({shard: len(ids) for shard, ids in seen.items()})


def test_driver_killed_mid_shard_then_resumed_equals_clean(tmp_path):
    options = {"start_delay_s": 1.0, "stream_delay_s": 1.5, "delegate": "ray_knowsim.sim.shard:run_shard"}
    path = write_config(tmp_path, small_config(engine={"shard_fn_options": options, "commit_every": 1}))
    cfg = load_run_config(path)
    clean = run(cfg, output=tmp_path / "clean", quiet=True, tables=False)
    assert clean.n_ok == 24

    out = tmp_path / "killed"
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "ray_knowsim.cli.main", "run", str(path), "-o", str(out), "--quiet"],
                            env=env, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            counts = {}
            try:
                counts = committed_per_shard(out)
            except Exception:  # noqa: BLE001 - a marker being renamed into place while we list: look again
                pass
            if any(0 < n < 4 for n in counts.values()):  # a shard caught between two of its commits
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
        proc.send_signal(signal.SIGKILL)  # the driver only; its local Ray follows it down
        killed_at = time.time()
        proc.wait(timeout=30)
        time.sleep(1.0)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the killed run's Ray (agents), ours only
        except ProcessLookupError:
            pass
    quiet_since, listing = time.monotonic(), None
    while time.monotonic() - quiet_since < 5:  # a worker of the killed driver may commit for a moment
        now = sorted(p.name for p in (out / "commits").glob("*.json"))
        if now != listing:
            quiet_since, listing = time.monotonic(), now
        time.sleep(0.2)
    before = RunReader.open(out)
    partial = {c.shard_id for c in before.index.live()} & {k for k, n in committed_per_shard(out).items() if n < 4}
    assert partial, "no shard was interrupted between its commits"
    done_before = set(before.entries())
    assert 1 <= len(done_before) < 24

    resumed = run(cfg, output=out, quiet=True, tables=False)
    assert resumed.n_ok == 24 and not resumed.incomplete
    assert resumed.resume["new"] == 24 - len(done_before) and resumed.resume["ok"] == len(done_before)  # nothing redone
    after = RunReader.open(out)
    twice = {c.name: (round(c.committed_at - killed_at, 2), sorted(after.index.superseded[c.name]))
             for c in after.index.commits if after.index.superseded[c.name]}
    assert after.status().superseded_rows == 0, (twice, sorted(done_before))  # no session committed twice
    assert_same_rows(tmp_path / "clean", out, scores=False)
    manifest = (out / "manifest.json").read_text()
    assert manifest.count('"started_at"') == 2  # the killed invocation and the resume
