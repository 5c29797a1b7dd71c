"""A run directory of another config is refused with the fields that changed, not just two hashes."""

from __future__ import annotations

import json

import pytest

from ray_knowsim.config import load_run_config, parse_run_config
from ray_knowsim.run.manifest import ManifestMismatch, RunIdentity, close_manifest, config_changes, open_manifest
from ray_knowsim.io.commits import RunDir
from tests.doubles.run_config import small_config, write_config


def _open(run_dir: RunDir, cfg) -> dict:
    identity = RunIdentity.of(cfg, run_id=f"t-{cfg.config_hash()[:8]}", config_hash=cfg.config_hash(), config_file=None,
                              budget_warnings=[])
    return open_manifest(run_dir, identity, plan={"shard_size": cfg.engine.shard_size}, address=None, argv=[])


def _refusal(run_dir: RunDir, cfg) -> str:
    with pytest.raises(ManifestMismatch) as exc:
        _open(run_dir, cfg)
    return str(exc.value)


def test_a_refused_config_names_each_changed_field(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    first = parse_run_config(small_config())
    close_manifest(run_dir, _open(run_dir, first), "ok", {})
    changed = parse_run_config(small_config(max_turns=5, conditions=[{"strategy": "adaptive"}, {"strategy": "comprehensive"}],
                                            engine={"shard_size": 4, "num_cpus": 1}))  # engine settings are not part of the hash
    message = _refusal(run_dir, changed)
    assert first.config_hash() in message and changed.config_hash() in message
    assert "max_turns: 3 -> 5" in message
    assert 'conditions.1.strategy: "socratic" -> "comprehensive"' in message
    assert "num_cpus" not in message and "engine" not in message
    same = parse_run_config(small_config(engine={"shard_size": 4, "num_cpus": 1}))
    _open(run_dir, same)  # an operational change resumes


def test_an_input_files_content_change_is_named(tmp_path):
    items = tmp_path / "items.jsonl"
    from importlib import resources

    items.write_text((resources.files("ray_knowsim") / "demo" / "math.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    data = small_config(tasks=[{"name": "math", "items": str(items), "graphs": "pkg:demo/iu_math.json"}])
    path = write_config(tmp_path, data)
    run_dir = RunDir(tmp_path / "run")
    _open(run_dir, load_run_config(path))
    lines = items.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["problem"] = record.get("problem", "") + " (edited)"
    items.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n", encoding="utf-8")
    message = _refusal(run_dir, load_run_config(path))
    assert "tasks.0.items: the file's content changed" in message


def test_a_manifest_without_the_hashed_record_falls_back_to_the_recorded_config(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    first = parse_run_config(small_config())
    data = _open(run_dir, first)
    data.pop("hashed_config")
    (tmp_path / "run" / "manifest.json").write_text(json.dumps(data), encoding="utf-8")
    message = _refusal(run_dir, parse_run_config(small_config(trials=3)))
    assert "trials: 1 -> 3" in message and "input file may have changed too" in message


def test_config_changes_lists_leaves_and_stops_at_the_limit():
    old = {"a": 1, "b": {"c": [1, 2], "d": "x"}, "gone": True}
    new = {"a": 1, "b": {"c": [1, 3], "d": "y"}, "new": None}
    assert config_changes(old, new) == ["b.c.1: 2 -> 3", 'b.d: "x" -> "y"', "gone: true -> (absent)", "new: (absent) -> null"]
    many = config_changes({f"k{i}": i for i in range(30)}, {f"k{i}": -i for i in range(30)}, limit=5)
    assert len(many) == 6 and many[-1] == "... and 24 more"
