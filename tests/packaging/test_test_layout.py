"""The test tree's own layout: test support lives in one package, ``tests/doubles/``, imported one way.

Read from the sources (AST), every import anywhere in a module (functions included):

* no test module imports another test module (``test_*.py``): what two tests share is support;
* support comes only from ``tests.doubles``: no import of another folder's module (a conftest by
  its module path, a helper module beside the tests), no bare name that is a file of the test tree
  (``from sim_helpers import ...`` works only while pytest puts that folder on ``sys.path``);
* one import style: ``from tests.doubles.<module> import <names>`` (no ``import tests.doubles.x``,
  no ``from tests.doubles import <module>``, no relative import);
* no test writes a commit marker by hand: no file written under a ``commits/`` folder, and no
  marker of the format the engine writes built as a dict. Run directories are committed through
  ``ray_knowsim.io.commits.write_commit`` (tests/doubles/rundirs.py, sweep_runs.py), so a change of
  the writer's format cannot leave tests writing the old one. A test may still damage a marker the
  writer wrote (cut it short, link it), and write format-1 markers (``shards/``): the product reads
  them and no longer writes them.

``tests/**/fixtures/`` is out of scope: data the tests read, and the scripts that wrote it, which
run from a checkout of the commit they name (so they import that commit's layout).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SUPPORT = "tests.doubles"
#: modules outside tests/doubles on their way into it; each entry must still be imported somewhere
#: (else: remove it here). Empty since h33split moved tests/engine/conftest.py and vllm_fakes.py.
PENDING: set[str] = set()
#: what writes a file: methods of a path, and open() in a writing mode
WRITE_METHODS = {"write_text", "write_bytes"}


def suite_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts)


def local_stems() -> set[str]:
    """Names a bare import would find as a file of the test tree (pytest's rootdir insertion)."""
    return {p.stem for p in suite_files() if p.stem not in ("__init__", "conftest")}


@dataclass(frozen=True)
class Import:
    where: str  # file:line
    module: str  # the module named ("" for ``from . import x``)
    names: tuple[str, ...]  # the names a ``from`` import takes (empty for ``import x``)
    level: int  # dots of a relative import
    plain: bool  # ``import x`` (not ``from x import y``)


def imports(tree: ast.AST, where: str) -> list[Import]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [Import(f"{where}:{node.lineno}", a.name, (), 0, True) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append(Import(f"{where}:{node.lineno}", node.module or "", tuple(a.name for a in node.names), node.level, False))
    return out


def _is_test_module(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith("test_")


def imported_test_modules(imp: Import) -> list[str]:
    """The test modules an import takes (``from tests.x import test_y`` included)."""
    found = [imp.module] if _is_test_module(imp.module) else []
    found += [f"{imp.module}.{n}" for n in imp.names if _is_test_module(n)]
    return found


def support_violations(imp: Import, stems: set[str]) -> list[str]:
    """Why this import takes support from outside tests/doubles (empty: it does not)."""
    top = imp.module.split(".")[0]
    if imp.level:
        return [f"a relative import ({'.' * imp.level}{imp.module}): import from {SUPPORT}"]
    if top == "tests" and imp.module != SUPPORT and not imp.module.startswith(SUPPORT + "."):
        if imp.module in PENDING:
            return []
        return [f"{imp.module} is not in {SUPPORT}: move what is shared into tests/doubles/"]
    if top in stems:
        return [f"a bare import of the test tree's {top!r}: move it into tests/doubles/ and import it from {SUPPORT}"]
    return []


def style_violations(imp: Import) -> list[str]:
    """Why this import of tests/doubles is not ``from tests.doubles.<module> import <names>``."""
    if imp.module == "tests" and not imp.plain and "doubles" in imp.names:
        return ["`from tests import doubles`: write `from tests.doubles.<module> import <names>`"]
    if imp.module != SUPPORT and not imp.module.startswith(SUPPORT + "."):
        return []
    if imp.plain:
        return [f"`import {imp.module}`: write `from {imp.module} import <names>`"]
    if imp.module == SUPPORT:
        return [f"`from {SUPPORT} import {', '.join(imp.names)}`: write `from {SUPPORT}.<module> import <names>`"]
    return []


def _names_commits_folder(node: ast.AST) -> bool:
    """The path expression has a ``commits`` segment: ``x / "commits"``, ``"commits/..."``, ``f"{x}/commits/..."``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            parts = sub.value.replace("\\", "/").split("/")
            if "commits" in parts:
                return True
    return False


def _marker_format(node: ast.Dict) -> object:
    keys = {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
    if not {"shard_id", "token"} <= keys.keys():
        return None
    fmt = keys.get("format")
    if isinstance(fmt, ast.Constant):
        return fmt.value
    return "?" if fmt is not None else None


def marker_violations(tree: ast.AST, where: str) -> list[str]:
    """Commit markers written by hand: a write into a ``commits/`` folder, a format-2 marker dict."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            target = None
            if isinstance(func, ast.Attribute) and func.attr in WRITE_METHODS:
                target = func.value
            elif isinstance(func, ast.Name) and func.id == "open" and node.args:
                mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
                if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax"):
                    target = node.args[0]
            if target is not None and _names_commits_folder(target):
                out.append(f"{where}:{node.lineno}: writes under commits/ by hand: commit through "
                           "ray_knowsim.io.commits.write_commit (a test double in tests/doubles/ if you need one)")
        elif isinstance(node, ast.Dict):
            fmt = _marker_format(node)
            if fmt is not None and fmt != 1:
                out.append(f"{where}:{node.lineno}: a commit marker (format {fmt}) built by hand: commit through "
                           "ray_knowsim.io.commits.write_commit")
    return out


def scan(source: str, where: str, stems: set[str]) -> dict[str, list[str]]:
    """Every violation of one module's source, by rule."""
    tree = ast.parse(source)
    found: dict[str, list[str]] = {"test_imports": [], "support": [], "style": [], "markers": marker_violations(tree, where)}
    for imp in imports(tree, where):
        found["test_imports"] += [f"{imp.where}: imports the test module {m}" for m in imported_test_modules(imp)]
        found["support"] += [f"{imp.where}: {why}" for why in support_violations(imp, stems)]
        found["style"] += [f"{imp.where}: {why}" for why in style_violations(imp)]
    return found


def suite_violations() -> dict[str, list[str]]:
    stems = local_stems()
    total: dict[str, list[str]] = {}
    for path in suite_files():
        for rule, found in scan(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)), stems).items():
            total.setdefault(rule, []).extend(found)
    return total


def test_no_test_module_imports_another_test_module():
    assert suite_violations()["test_imports"] == []


def test_shared_support_comes_only_from_tests_doubles():
    assert suite_violations()["support"] == []


def test_tests_doubles_is_imported_one_way():
    assert suite_violations()["style"] == []


def test_no_test_writes_a_commit_marker_by_hand():
    assert suite_violations()["markers"] == []


def test_every_pending_exception_is_still_needed():
    used = {imp.module for p in suite_files() for imp in imports(ast.parse(p.read_text(encoding="utf-8")), str(p))}
    assert PENDING <= used, f"moved already: remove {sorted(PENDING - used)} from PENDING"


def test_the_rules_catch_planted_violations():
    """Each rule fires on a planted violation, and not on the allowed forms beside it."""
    stems = {"sim_helpers", "rundirs"}
    planted = '''
from tests.view.test_view_http import get
from tests.kernels import test_kernel_equivalence
from tests.view.rundirs import committed_run
from tests.score.conftest import finished_run
from sim_helpers import run
from .rundirs import SECRET
import tests.doubles.standin as standin
from tests.doubles import standin
def f(run_dir, marker):
    (run_dir / "commits" / "shard-000000.abc.json").write_text("{}")
    open(run_dir / "commits/x.json", "w")
    m = {"format": 2, "shard_id": "shard-000000", "token": "abc"}
'''
    found = scan(planted, "planted.py", stems)
    assert len(found["test_imports"]) == 2, found
    assert len(found["support"]) == 6, found  # view.test_view_http, kernels, view.rundirs, score.conftest, sim_helpers, .rundirs
    assert len(found["style"]) == 2, found
    assert len(found["markers"]) == 3, found
    allowed = '''
from tests.doubles.rundirs import committed_run
from tests.doubles.standin import run_shard
import json, pyarrow
def f(run_dir, marker):
    marker.write_text('{"format": 2, "shard_id": ')  # damage a marker the writer wrote
    (run_dir / "shards" / "shard-000000.json").write_text("{}")  # format 1: read, no longer written
    legacy = {"format": 1, "shard_id": "s", "token": "t"}
    (run_dir / "manifest.json").write_text("{}")
    open(run_dir / "commits" / "x.json")  # reading is fine
'''
    assert scan(allowed, "allowed.py", stems) == {"test_imports": [], "support": [], "style": [], "markers": []}


#: what a test file names when it starts Ray heads and nodes of its own (tests/doubles/raycluster.py,
#: or the session's head from tests/cluster/conftest.py)
OWN_CLUSTER = ("tests.doubles.raycluster", "shared_head")


def test_a_file_that_starts_its_own_cluster_runs_one_at_a_time():
    """scripts/test.sh runs the suite in parallel processes except the tests marked ray_cluster (or
    wheel, browser): a cluster started beside another test's is what makes a node miss its GCS on 2
    busy cores. So a file that starts one must carry the marker."""
    unmarked = [str(p.relative_to(ROOT)) for p in suite_files()
                if p.name.startswith("test_") and any(name in p.read_text() for name in OWN_CLUSTER)
                and "pytest.mark.ray_cluster" not in p.read_text()]
    assert not unmarked, unmarked
    assert any("raycluster" in p.read_text() for p in suite_files() if p.name.startswith("test_"))  # not vacuous
