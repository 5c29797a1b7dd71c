"""Two shapes the layer test does not see: no two modules of the package import each other in a
loop, and no top-level folder holds more than a fixed share of the package's lines (a folder that
keeps growing is a drawer: split it by what it holds).

Loops are checked twice: at module level (a loop there breaks an import outright), and counting the
imports inside functions too — a lazy import that closes a loop still ties two modules into one
(the issue's four circles were of that kind: build <-> batch <-> pre-flight <-> estimate, ...), so
neither can be read, moved or tested without the other."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import networkx as nx

from tests.doubles.package_tree import PKG, ROOT, all_files, kernels_dir

#: the largest share of the package's lines (ray_knowsim/ and kernels/) one top-level folder may hold
MAX_FOLDER_SHARE = 0.12

#: module-level cycles still there, each with the helper's issue that cuts it; an entry FAILS the
#: test once its cycle is gone (remove it then), so the list never outlives what it names
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def module_name(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(PKG) if path.is_relative_to(PKG) else Path("kernels") / path.relative_to(kernels_dir())
    parts = ["ray_knowsim", *rel.with_suffix("").parts]
    is_init = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_init else parts), is_init


def named_modules(node: ast.AST, package: list[str]) -> set[str]:
    """The modules one import statement names (``from pkg import module`` names both); none for
    another statement."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
        module = ".".join(x for x in (base, node.module or "") if x)
        return {module, *(f"{module}.{a.name}" for a in node.names)}
    return set()


def _package(name: str, is_init: bool) -> list[str]:
    return name.split(".") if is_init else name.split(".")[:-1]


def module_level_imports(path: Path, name: str, is_init: bool) -> set[str]:
    """Every module named by an import that runs when the module is imported: the module body,
    class bodies and if/try/with blocks, not function bodies and not ``if TYPE_CHECKING:``."""
    package = _package(name, is_init)
    out: set[str] = set()

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                walk(node.orelse)
                continue
            out.update(named_modules(node, package))
            for child in ("body", "orelse", "finalbody"):
                walk(getattr(node, child, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                walk(handler.body)

    walk(ast.parse(path.read_text(encoding="utf-8")).body)
    return out


def every_import(path: Path, name: str, is_init: bool) -> set[str]:
    """Every module an import anywhere in the file names: function bodies and ``if TYPE_CHECKING:``
    included (what a reader has to open to follow the module)."""
    package = _package(name, is_init)
    return {m for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) for m in named_modules(node, package)}


def module_graph(imports=module_level_imports) -> dict[str, set[str]]:
    names = {}
    for path in all_files():
        names[path] = module_name(path)
    known = {n for n, _ in names.values()}
    return {n: {m for m in imports(p, n, i) if m in known and m != n} for p, (n, i) in names.items()}


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (networkx, a dependency)."""
    graph = nx.DiGraph()
    graph.add_nodes_from(edges)
    graph.add_edges_from((a, b) for a, bs in edges.items() for b in bs)
    return sorted((frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1), key=sorted)


def test_no_module_level_import_cycle():
    found = cycles(module_graph())
    new = [" <-> ".join(sorted(c)) for c in found if c not in KNOWN_CYCLES]
    assert not new, "module-level import cycles:\n" + "\n".join(new)
    gone = [f"{' <-> '.join(sorted(c))} ({why})" for c, why in KNOWN_CYCLES.items() if c not in found]
    assert not gone, "these cycles are gone; remove them from KNOWN_CYCLES:\n" + "\n".join(gone)


def test_no_import_cycle_even_through_imports_inside_functions():
    found = [" <-> ".join(sorted(c)) for c in cycles(module_graph(every_import))]
    assert not found, "import cycles (counting imports inside functions):\n" + "\n".join(found)


def test_the_cycle_check_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [frozenset({"a", "b", "c"})]
    tree = ast.parse("import x.y\nfrom . import z\ndef f():\n    import no\nif TYPE_CHECKING:\n    import no2\n"
                     "try:\n    from p.q import r\nexcept ImportError:\n    import s\nclass K:\n    import t\n")
    path = ROOT / "tests" / "packaging" / "_probe_source.py"
    try:
        path.write_text(ast.unparse(tree), encoding="utf-8")
        got = module_level_imports(path, "ray_knowsim.pkg.mod", False)
        every = every_import(path, "ray_knowsim.pkg.mod", False)
    finally:
        path.unlink()
    assert {"x.y", "ray_knowsim.pkg", "ray_knowsim.pkg.z", "p.q", "p.q.r", "s", "t"} <= got
    assert not {"no", "no2"} & got
    assert {"no", "no2"} <= every and got <= every


def folder_lines() -> dict[str, int]:
    lines: dict[str, int] = defaultdict(int)
    for path in all_files():
        rel = path.relative_to(ROOT)
        top = "kernels" if rel.parts[0] == "kernels" else (rel.parts[1] if len(rel.parts) > 2 else "(top-level modules)")
        lines[top] += len(path.read_text(encoding="utf-8").splitlines())
    return lines


def test_no_folder_holds_more_than_its_share():
    lines = folder_lines()
    total = sum(lines.values())
    big = {top: f"{n / total:.1%}" for top, n in lines.items() if n > MAX_FOLDER_SHARE * total}
    assert not big, f"folders over {MAX_FOLDER_SHARE:.0%} of the package's {total} lines (split them by what they hold): {big}"


def any_imports(path: Path) -> set[str]:
    """Every module an import anywhere in the file names (function bodies included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_the_parts_of_a_run_import_as_their_docstrings_say():
    """run/fan_out.py, plan/build.py and run/worker.py describe a run as the fan-out on top of two
    parts, build and execute, that import neither each other nor the fan-out (any import counts)."""
    fan_out, build, worker = "ray_knowsim.run.fan_out", "ray_knowsim.plan.build", "ray_knowsim.run.worker"
    got = {m: any_imports(PKG.joinpath(*m.split(".")[1:]).with_suffix(".py")) for m in (fan_out, build, worker)}
    assert {build, worker} <= got[fan_out]
    assert not {fan_out, worker} & got[build]
    assert not {fan_out, build} & got[worker]
    for module in (fan_out, build, worker):
        doc = ast.get_docstring(ast.parse(PKG.joinpath(*module.split(".")[1:]).with_suffix(".py").read_text(encoding="utf-8")))
        assert "Layer " not in doc  # the parts are named by what they do, not numbered
