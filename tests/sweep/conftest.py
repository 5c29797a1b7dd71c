"""Fixtures of the sweep tests: a small synthetic run directory and config builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ray_knowsim.rules.config import paper_rules
from tests.sweep.builders import write_run


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """54 structured sessions (3 items x 3 levels x 3 conditions x 2 trials), reference rules,
    plus one baseline and one failed session."""
    path = tmp_path_factory.mktemp("sweep_run")
    write_run(path, n_items=3, trials=2, seed=11)
    return path


@pytest.fixture(scope="session")
def paper_run_dir(tmp_path_factory) -> Path:
    """The same shape recorded under the paper preset (two-of-three termination, strict flag...)."""
    path = tmp_path_factory.mktemp("sweep_run_paper")
    write_run(path, n_items=2, trials=1, seed=5, rules=paper_rules())
    return path


def run_dir_config(run_dir: Path, out: Path, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"name": "t", "source": {"run_dir": str(run_dir)}, "output": str(out)}
    cfg.update(extra)
    return cfg


def reference_config(shared_ref: Path, out: Path, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": "ref",
        "source": {
            "records": [str(shared_ref / "examples" / "*.json")],
            "graph_cache": [str(shared_ref / "iu_cache" / "math.json")],
        },
        "output": str(out),
    }
    cfg.update(extra)
    return cfg
