"""`ray job submit --working-dir . -- ray-knowsim run configs/demo.yaml` against a local
`ray start --head` (tests/doubles/raycluster.py takes the environment notes' precautions; the head
is the session's, tests/cluster/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray_cluster, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_job_submit_runs_the_demo_config(shared_head, tmp_path):
    out = tmp_path / "out"
    entry = ["ray-knowsim", "run", "configs/demo.yaml", "-o", str(out), "--quiet",
             "--set", "trials=1", "--set", "max_turns=3", "--set", "levels=[novice]", "--set", "engine.shard_size=14"]
    proc = shared_head.submit(entry, cwd=ROOT, working_dir=ROOT, timeout_s=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert "succeeded" in text and "complete (all 28 planned sessions committed, none failed)" in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["invocations"][-1]["address"] not in (None, "local")  # it joined the head
    assert (out / "tables" / "level_means.csv").is_file()
