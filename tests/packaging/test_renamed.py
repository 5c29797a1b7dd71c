"""Every old module name either goes through the documented alias for one release (the same
module object, with a DeprecationWarning) or is gone with a message naming its replacement; and
nothing in the project itself still uses an old name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ray_knowsim._renamed import REMOVED, RENAMED

from test_layers import ROOT, all_files, imported

CHECK = r"""
import importlib, json, sys, warnings
from ray_knowsim._renamed import REMOVED, RENAMED
out = {}
for old, new in RENAMED.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = importlib.import_module(old)
    out[old] = {"same": mod is importlib.import_module(new),
                "warned": [str(w.message) for w in caught if w.category is DeprecationWarning]}
# a submodule of a renamed package resolves to the new submodule, and a class keeps one identity
from ray_knowsim.model.chat import ChatRequest as Old
from ray_knowsim.schema.chat import ChatRequest as New
out["class_identity"] = Old is New
# the new modules keep their own specs (reload and relative imports work on them)
import ray_knowsim.schema, ray_knowsim.schema.chat
out["own_specs"] = [ray_knowsim.schema.__spec__.name, ray_knowsim.schema.chat.__spec__.name]
out["no_double_load"] = sorted(m for m in sys.modules if m.startswith("ray_knowsim.schema") and sys.modules[m] is not sys.modules.get(m.replace("schema", "model", 1), sys.modules[m]))
for old in REMOVED:
    try:
        importlib.import_module(old)
        out[old] = "imported"
    except ImportError as exc:
        out[old] = str(exc)
print(json.dumps(out))
"""


def test_old_names_are_aliases_with_a_warning_or_gone_with_a_pointer():
    proc = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for old, new in RENAMED.items():
        assert out[old]["same"], old
        assert any(old in w and new in w for w in out[old]["warned"]), (old, out[old])
    assert out["class_identity"] and out["no_double_load"] == []
    assert out["own_specs"] == ["ray_knowsim.schema", "ray_knowsim.schema.chat"]
    for old, where in REMOVED.items():
        assert out[old] == f"{old} was removed; use {where}"


def test_the_project_uses_no_old_name():
    olds = (*RENAMED, *REMOVED)
    bad = []
    for path in all_files() + sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "scripts").rglob("*.py")):
        if path.name in ("_renamed.py", "test_renamed.py"):
            continue
        for module, line in imported(path) if path.is_relative_to(ROOT / "ray_knowsim") or path.is_relative_to(ROOT / "kernels") else _imports(path):
            if any(module == o or module.startswith(o + ".") for o in olds):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


def test_the_alias_table_is_documented():
    doc = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    missing = [f"{o} -> {n}" for o, n in RENAMED.items() if f"`{o}`" not in doc or f"`{n}`" not in doc]
    missing += [o for o in REMOVED if f"`{o}`" not in doc]
    assert not missing, f"docs/extending.md's 'Renamed modules' table lacks: {missing}"


def _imports(path: Path) -> list[tuple[str, int]]:
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append((node.module, node.lineno))
    return out
