"""Every statistic exists once, in ray_knowsim/stats/: the rest of the package calls it.

Guarded by what such a statistic needs: scipy. A module outside stats/ that imports scipy is
computing a statistic of its own (how report/judges.py and sweep/report.py once called scipy's rank
correlations beside stats/agreement.py, and the validation's statistics sat in validate/)."""

from __future__ import annotations

import ast
from pathlib import Path

import ray_knowsim

PACKAGE = Path(ray_knowsim.__file__).parent


def _imports_scipy(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):  # function-level imports count too
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "scipy" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "scipy" and node.level == 0:
            lines.append(node.lineno)
    return lines


def scipy_outside_stats(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] == "stats":
            continue
        found += [f"{rel}:{line}" for line in _imports_scipy(ast.parse(path.read_text(), str(path)))]
    return found


def test_scipy_is_imported_only_by_the_statistics_package():
    assert scipy_outside_stats(PACKAGE) == [], "compute it in ray_knowsim/stats/ and call it from there"


def test_the_guard_sees_a_planted_statistic(tmp_path):
    (tmp_path / "stats").mkdir()
    (tmp_path / "stats" / "ok.py").write_text("from scipy import stats\n")
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "bad.py").write_text("def f(a, b):\n    from scipy.stats import kendalltau\n    return kendalltau(a, b)\n")
    assert scipy_outside_stats(tmp_path) == ["report/bad.py:2"]
