"""The installed layout: `kernels/` ships as `ray_knowsim.kernels`, never as a top-level `kernels`."""

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def declared_packages() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


#: folders of package data declared as packages of their own (no __init__.py, no Python)
DATA_PACKAGES = {"ray_knowsim.prompts.templates", "ray_knowsim.view.assets"}


def test_every_package_folder_is_declared():
    found = {"ray_knowsim.kernels"} | DATA_PACKAGES
    for init in (ROOT / "ray_knowsim").rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        found.add(".".join(rel.parts))
    assert found == declared_packages()
    for name in DATA_PACKAGES:
        folder = ROOT.joinpath(*name.split("."))
        assert folder.is_dir() and not any(folder.glob("*.py")), name


def test_kernels_import_under_the_package_namespace():
    import ray_knowsim.kernels.sessions as sessions

    assert Path(sessions.__file__).resolve().parent == ROOT / "kernels"


def test_the_source_tree_imports_as_it_is():
    """Without any install (what a Ray worker does with a job's working dir, or in the checkout's
    root): the source tree's ``ray_knowsim.kernels`` is the top-level ``kernels/`` folder."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # -S: no site-packages, so no install (editable or not) can answer for the checkout; the
    # kernels need numba/numpy, so only the package's own import is asked for here
    probe = "import importlib.util as u; s = u.find_spec('ray_knowsim.kernels.sessions'); print(s.origin)"
    out = subprocess.run([sys.executable, "-S", "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).resolve() == ROOT / "kernels" / "sessions.py"


@pytest.mark.wheel
def test_wheel_contains_namespaced_kernels_and_templates(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("ray_knowsim-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ray_knowsim/kernels/update.py" in names and "ray_knowsim/kernels/sessions.py" in names
    # the real kernels package, never the source tree's stand-in that points at kernels/
    assert zipfile.ZipFile(wheel).read("ray_knowsim/kernels/__init__.py") == (ROOT / "kernels" / "__init__.py").read_bytes()
    assert not any(n.startswith("kernels/") for n in names)
    assert any(n.startswith("ray_knowsim/prompts/templates/") and n.endswith(".txt") for n in names)
    assert "ray_knowsim/prompts/templates/manifest.txt" in names
    assert any(n.startswith("ray_knowsim/demo/") and n.endswith(".jsonl") for n in names)
    assert "ray_knowsim/validate/knowchat_layout.yaml" in names  # the built-in KnowChat layout
    assert "ray_knowsim/view/assets/view.css" in names and "ray_knowsim/view/assets/view.js" in names
