"""Score tests: a small finished offline run through the real simulation loop, and file digests."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ray_knowsim.config import load_run_config
from ray_knowsim.run.fan_out import run
from tests.doubles.run_config import small_config, write_config


def finished_run(folder: Path, **overrides: Any):
    """(config, run dir, outcome) of a small run with the offline models (``overrides``: config keys)."""
    engine = {"shard_size": 4, "shard_fn": "ray_knowsim.sim.shard:run_shard", **overrides.pop("engine", {})}
    path = write_config(folder, small_config(max_turns=2, engine=engine, **overrides))
    cfg = load_run_config(path)
    out = folder / "run"
    return cfg, out, run(cfg, output=out, quiet=True, config_file=str(path))


def digests(root: Path, subs: tuple[str, ...] = ("sessions", "turns", "commits")) -> dict[str, str]:
    """sha256 of every file under ``subs`` (default: the simulation's sessions, turns, commit markers)."""
    return {f"{sub}/{f.name}": hashlib.sha256(f.read_bytes()).hexdigest()
            for sub in subs for f in sorted((root / sub).glob("*")) if f.is_file()}
