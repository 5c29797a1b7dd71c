"""The layers hold: imports (every one, parsed with ast, function-level ones included) go down the
layer order only, subpackages form no import cycle, and Ray is imported only by the orchestration.

    schema -> (rules | io | demo | stats) -> kernels -> (prompts | llm) -> (strategies | simulators) -> (sim | audit)
          -> (score | graph_extraction) -> (engine | sweep | validate | report | compare | view | adaptive | training) -> cli

The tutor strategies and learner simulators, with their registries, sit on the prompts layer
(they render through it) and below the turn loop (which looks them up by name). Each registry
loads its package's modules on first use: a runtime import of its own package, not an edge.

A package may import its own layer's peers only when the peer is listed in PEERS (no cycles: the
cycle check below holds them to it).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "ray_knowsim"

# rank: a package may import packages of a LOWER rank (and the top-level modules of rank 0)
LAYERS: dict[str, int] = {
    "": 0,  # ray_knowsim/__init__.py, registry.py, text.py: stdlib-only helpers
    "schema": 1,  # the data formats (pydantic models of items, graphs, rows, requests)
    "rules": 2,
    "io": 2,
    "demo": 2,
    "stats": 2,  # the statistics module: pure numpy/pandas/scipy over model's metric facts
    "kernels": 3,
    "prompts": 4,
    "llm": 4,
    # the tutor strategies and learner simulators with their registries (they render through prompts)
    "strategies": 5,
    "simulators": 5,
    "sim": 6,
    "audit": 6,  # the simulator audit: pure checks over a run's rows and graphs, and the run reader that feeds them
    "score": 7,
    "cluster": 7,  # what talks to a Ray cluster as a cluster (the bounded fan-out); stdlib and Ray only
    "graph_extraction": 7,  # IU-graph extraction for new items (asks a model through the loop's ask)
    "engine": 8,
    "sweep": 8,
    "validate": 8,
    "report": 8,
    "compare": 8,
    "view": 8,
    "adaptive": 8,  # rounds of runs above the run machinery (engine) and compare's run reader
    "training": 8,  # episodes of the loop (sim) with models built by the engine's builders
    "cli": 9,
}
# same-rank imports that are allowed (importer -> imported)
PEERS = {
    ("sweep", "engine"),  # the sweep goes into Ray the way every command does (engine.ray_session)
    ("compare", "engine"),  # run identity: the config's operational fields and role defaults
    ("report", "compare"),  # the report's who-beats-whom matrix is compare's analysis
    ("view", "report"),  # the viewer draws conversations with the report's renderer
    ("view", "compare"),  # the comparison page words verdicts with compare's one sentence function
    ("view", "engine"),  # the run list words sanity warnings as the run's own final line does (engine.outcome_tables)
    ("adaptive", "engine"),  # each round goes through engine.runner.run
    ("adaptive", "compare"),  # the run reader compare uses
    ("training", "engine"),  # the environment's models, inputs and context come from a run config (engine.build/clients/plan)
}
RAY_ALLOWED = {"cluster", "engine", "sweep", "cli"}


def product_modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def kernels_dir() -> Path:
    return ROOT / "kernels"


def package_of(path: Path) -> str:
    if path == PKG / "__main__.py":
        return "cli"  # `python -m ray_knowsim`: the command line, at the package's top
    rel = path.relative_to(PKG) if path.is_relative_to(PKG) else Path("kernels") / path.relative_to(kernels_dir())
    return rel.parts[0] if len(rel.parts) > 1 else ""


def imported(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(PKG) if path.is_relative_to(PKG) else Path("kernels") / path.relative_to(kernels_dir())
    here = ["ray_knowsim", *rel.with_suffix("").parts]
    if here[-1] == "__init__":
        here = here[:-1]
    else:
        here = here[:-1]  # the module's package
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((name, node.lineno))
    return out


def target_package(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "ray_knowsim":
        return None
    if len(parts) == 1:
        return ""
    sub = parts[1]
    return sub if (PKG / sub).is_dir() or sub == "kernels" else ""


def all_files() -> list[Path]:
    files = product_modules()
    if kernels_dir().is_dir():
        files += sorted(p for p in kernels_dir().rglob("*.py") if "__pycache__" not in p.parts)
    return files


def test_every_package_has_a_layer():
    packages = {package_of(p) for p in all_files()}
    assert packages <= set(LAYERS), f"give these packages a layer: {sorted(packages - set(LAYERS))}"


def test_imports_go_down_the_layers_only():
    bad = []
    for path in all_files():
        mine = package_of(path)
        for module, line in imported(path):
            other = target_package(module)
            if other is None or other == mine:
                continue
            if LAYERS[other] < LAYERS[mine] or (mine, other) in PEERS:
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line} ({mine}) imports {module} ({other})")
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_no_import_cycle_between_subpackages():
    edges: dict[str, set[str]] = defaultdict(set)
    for path in all_files():
        mine = package_of(path)
        for module, _ in imported(path):
            other = target_package(module)
            if other not in (None, mine, ""):
                edges[mine].add(other)
    # depth-first search for a back edge
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(trail[trail.index(nxt):] + [nxt]) if nxt in trail else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles between subpackages:\n" + "\n".join(cycles)


def test_ray_is_imported_only_by_the_orchestration():
    bad = []
    for path in all_files():
        rel = str(path.relative_to(ROOT))
        if package_of(path) in RAY_ALLOWED:
            continue
        for module, line in imported(path):
            if module == "ray" or module.startswith("ray."):
                bad.append(f"{rel}:{line} imports {module}")
    assert not bad, "Ray outside cluster/engine/sweep/cli:\n" + "\n".join(bad)
