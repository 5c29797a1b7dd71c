"""Engine test helpers: a small run config over the package's demo items (``ray_local``, one local
Ray per test module, is in ``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
