"""A run directory written before the split of the old ``engine`` package (tests/run/fixtures/presplit_run,
made by fixtures/make_presplit_run.sh with the code of commit 5c77af5) still resumes with today's
modules: the run directory stores no module path that moved (its one module path is the shard
function, ``ray_knowsim.sim.shard:run_shard``, which did not move), the same config hashes the
same, and resuming it runs nothing and keeps every committed row."""

from __future__ import annotations

import importlib
import json
import re
import shutil
from pathlib import Path

import pytest

from ray_knowsim.config import apply_overrides, parse_run_config
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.io.yamltext import load_yaml
from ray_knowsim.run.extractor import recorded_config
from ray_knowsim.run.fan_out import run
from tests.doubles.run_config import rows

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "presplit_run"
HASH = "521ba49fad011c14"  # what the pre-split code recorded for this config
OVERRIDES = ["trials=1", "levels=[novice]", "conditions=[{strategy: minimal}]", "max_turns=3",
             "tasks=[{name: math, items: pkg:demo/math.jsonl, graphs: pkg:demo/iu_math.json}]"]


def config():
    path = ROOT / "configs" / "demo.yaml"
    data = apply_overrides(load_yaml(path.read_text(encoding="utf-8"), str(path)), OVERRIDES)
    return parse_run_config(data, base_dir=ROOT / "configs")


def test_the_fixture_is_the_pre_split_run_and_stores_no_moved_module():
    manifest = json.loads((FIXTURE / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config_hash"] == HASH and manifest["status"] == "ok"
    assert manifest["invocations"][0]["code"]  # written by a ray_knowsim that recorded its code
    assert config().config_hash() == HASH  # today's config code hashes the same config the same
    assert recorded_config(FIXTURE).config_hash() == HASH  # and reads the recorded one back
    stored = set()
    for path in FIXTURE.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl"):
            stored |= set(re.findall(r"ray_knowsim(?:\.\w+)+(?::\w+)?", path.read_text(encoding="utf-8")))
    assert stored == {"ray_knowsim.sim.shard:run_shard"}  # the one module path a run directory stores
    for name in stored:  # and it still names what it named
        module, _, attr = name.partition(":")
        assert callable(getattr(importlib.import_module(module), attr))
    assert manifest["config"]["engine"].get("shard_fn", "ray_knowsim.sim.shard:run_shard") == "ray_knowsim.sim.shard:run_shard"


def test_the_demo_config_hashes_as_before_the_split():
    from ray_knowsim.config import load_run_config

    assert load_run_config(ROOT / "configs" / "demo.yaml").config_hash() == "514b9bd3963711d5"


@pytest.mark.usefixtures("ray_local")
def test_the_pre_split_run_resumes_with_nothing_left_to_run(tmp_path):
    run_dir = tmp_path / "presplit_run"
    shutil.copytree(FIXTURE, run_dir)
    before = rows(run_dir, "sessions")
    out = run(config(), output=run_dir, quiet=True, preflight=False)
    assert (out.config_hash, out.n_sessions, out.n_ok, out.n_failed) == (HASH, 4, 4, 0)
    assert out.ran_shards == 0 and out.skipped_shards == 1  # every session was committed before the split
    assert out.status == "ok"
    after = rows(run_dir, "sessions")
    assert list(after["session_id"]) == list(before["session_id"])
    assert RunReader.open(run_dir, HASH).sessions.read().num_rows == 4
    assert (run_dir / "tables" / "marginal.csv").is_file()  # the tables are written again from the rows
