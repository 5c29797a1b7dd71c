"""Engine test helpers: a small run config over the package's demo items, and one local Ray per
test module (Ray starts in seconds here, and a module's tests share it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

STANDIN = "tests.doubles.standin:run_shard"


def small_config(**overrides: Any) -> dict[str, Any]:
    """24 sessions (4 math demo items x 3 levels x 2 conditions), 6 shards of 4, 3 turns."""
    cfg: dict[str, Any] = {
        "name": "t",
        "tasks": [{"name": "math", "items": "pkg:demo/math.jsonl", "graphs": "pkg:demo/iu_math.json"}],
        "models": {"sim": {"backend": "offline"}},
        "roles": {"user_sim": "sim", "extractor": "sim", "judge": "sim", "assistant": {"model": "sim"}},
        "conditions": [{"strategy": "adaptive"}, {"strategy": "socratic"}],
        "max_turns": 3,
        "engine": {"shard_size": 4, "shard_fn": STANDIN},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


def write_config(folder: Path, data: dict[str, Any], name: str = "run.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray (2 CPUs) for the whole module; the engine joins it and leaves it running."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, object_store_memory=256 * 2**20, include_dashboard=False,
             logging_level="WARNING", log_to_driver=False)
    from ray.data import DataContext

    DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()
