"""docs/cluster.md's install instructions agree with pyproject.toml: the `pip` list for nodes that
have only Ray names every dependency that `ray[default,data]` does not bring."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from tests.doubles.docs_install import docs_pip_list

ROOT = Path(__file__).resolve().parents[2]


def test_the_pip_list_for_ray_only_nodes_covers_the_dependencies():
    deps = [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    ray_brings = set()
    for r in metadata.requires("ray") or []:
        req = Requirement(r)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("default", "data")):
            ray_brings.add(req.name.lower())
    needed = {d.name.lower() for d in deps if d.name.lower() not in ray_brings | {"ray"}}
    listed = {Requirement(r).name.lower() for r in docs_pip_list()}
    assert needed <= listed, f"docs/cluster.md's pip list misses {sorted(needed - listed)}"
    assert listed <= {d.name.lower() for d in deps}, f"docs/cluster.md lists what the project does not need: {sorted(listed - needed)}"
