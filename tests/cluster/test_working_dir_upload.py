"""What `ray job submit --working-dir .` uploads from a checkout: the code, configs and docs, never
the virtual environments, caches, test leftovers (`.hypothesis/`, `.pytest_cache/`) or runs, also
when Ray is told to ignore .gitignore (RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1): `.rayignore` says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = (".venv", ".venv-llm", ".numba_cache", ".pytest_cache", ".hypothesis", "runs", "ray_knowsim.egg-info")


@pytest.mark.parametrize("include_gitignore", [True, False], ids=["gitignore-read", "gitignore-ignored"])
def test_the_upload_leaves_out_environments_caches_and_runs(tmp_path, include_gitignore):
    packaging = pytest.importorskip("ray._private.runtime_env.packaging")
    tree = tmp_path / "checkout"
    tree.mkdir()
    for name in (".gitignore", ".rayignore", "pyproject.toml"):
        shutil.copy(ROOT / name, tree / name)
    (tree / "ray_knowsim").mkdir()
    (tree / "ray_knowsim" / "__init__.py").write_text("")
    for name in LEFT_OUT:
        (tree / name).mkdir()
        (tree / name / "leftover.txt").write_text("x")
    uploaded: set[str] = set()
    packaging._dir_travel(tree, [], lambda p: p.is_file() and uploaded.add(str(p.relative_to(tree))),
                          include_gitignore=include_gitignore)  # the handler sees every file that is packed
    assert "ray_knowsim/__init__.py" in uploaded
    assert not [p for p in uploaded if p.split("/")[0] in LEFT_OUT], sorted(uploaded)
