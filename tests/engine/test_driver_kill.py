"""Kill the driver (SIGKILL) mid-run, resume with the same command: the rows equal a clean run's,
none lost, none duplicated. The real simulation loop with the offline models (the stand-in only
adds a start delay per shard, so the run can be caught mid-way). The killed run is a real
`ray-knowsim run` subprocess with its own local Ray; the clean run and the resume share this
module's Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from ray_knowsim.engine.config import load_run_config
from ray_knowsim.engine.results import RunDir
from ray_knowsim.engine.runner import run
from tests.engine.conftest import small_config, write_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_local")]
ROOT = Path(__file__).resolve().parents[2]


def table(run_dir: Path, name: str) -> pd.DataFrame:
    df = pd.concat([pq.read_table(f).to_pandas() for f in RunDir(run_dir).data_files(name)], ignore_index=True)
    return df.sort_values(["session_id", "turn"] if name == "turns" else ["session_id"]).reset_index(drop=True)


def test_driver_killed_then_resumed_equals_clean(tmp_path):
    options = {"start_delay_s": 1.5, "delegate": "ray_knowsim.sim.shard:run_shard"}
    path = write_config(tmp_path, small_config(engine={"shard_fn_options": options}))
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
            if len(list((out / "shards").glob("*.json"))) >= 1:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
        proc.send_signal(signal.SIGKILL)  # the driver only; its local Ray follows it down
        proc.wait(timeout=30)
        time.sleep(1.0)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the killed run's Ray (agents), ours only
        except ProcessLookupError:
            pass
    committed = RunDir(out).markers(cfg.config_hash())
    assert 1 <= len(committed) < 6, len(committed)

    resumed = run(cfg, output=out, quiet=True, tables=False)
    assert resumed.skipped_shards == len(committed) and resumed.ran_shards == 6 - len(committed)
    assert resumed.n_ok == 24 and not resumed.incomplete
    for name in ("sessions", "turns"):
        a, b = table(tmp_path / "clean", name), table(out, name)
        assert len(b) == len(a) and (name != "sessions" or b["session_id"].is_unique)
        pd.testing.assert_frame_equal(a, b)
    manifest = (out / "manifest.json").read_text()
    assert manifest.count('"started_at"') == 2  # the killed invocation and the resume
