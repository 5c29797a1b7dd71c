"""cluster.yaml: a valid Ray cluster-launcher file with a CPU head that takes no work, autoscaling
CPU and GPU workers, and Ray pinned to the version pyproject.toml pins."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_cluster_file_shape_and_ray_pin():
    cfg = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    pinned = re.search(r'"ray\[default,data\]==([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    setup = "\n".join(cfg["setup_commands"] + [c for t in cfg["available_node_types"].values() for c in t.get("worker_setup_commands", [])])
    # the project installed as users install it: not editable (what tests/packaging/test_installed.py runs)
    assert f"ray[default,data]=={pinned}" in setup and "pip install ~/ray_knowsim" in setup and "-e " not in setup
    types = cfg["available_node_types"]
    assert types[cfg["head_node_type"]]["resources"] == {"CPU": 0}
    assert "--num-cpus=0" in " ".join(cfg["head_start_ray_commands"])
    assert {"cpu_worker", "gpu_worker"} <= set(types) and all(types[t]["min_workers"] == 0 for t in ("cpu_worker", "gpu_worker"))
    assert "[gpu]" in " ".join(types["gpu_worker"]["worker_setup_commands"])
    jsonschema = pytest.importorskip("jsonschema")
    import ray

    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    jsonschema.validate(cfg, schema)
