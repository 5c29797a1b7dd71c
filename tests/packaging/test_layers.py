"""The layers hold: imports (every one, parsed with ast, function-level ones included) go down the
layer order only, subpackages form no import cycle, and Ray is imported only by the modules named
in RAY_ALLOWED, each with its reason.

    schema -> (rules | io | demo | stats) -> (kernels | tables) -> (prompts | llm | cluster)
          -> (strategies | simulators) -> (sim | audit) -> backends -> config -> plan
          -> (score | graph_extraction) -> preflight -> run
          -> (sweep | validate | report | compare | view | adaptive | training) -> cli

The tutor strategies and learner simulators, with their registries, sit on the prompts layer
(they render through it) and below the turn loop (which looks them up by name). Each registry
loads its package's modules on first use: a runtime import of its own package, not an edge. The
model backends sit below the run config, which validates its ``models:`` entries against their
registry (ray_knowsim/backends/__init__.py says what that moved).

A package may import its own layer's peers only when the peer is listed in PEERS (no cycles: the
cycle check below holds them to it). Module-level import cycles between modules, and the share of
the package's lines one folder holds, are tests/packaging/test_modules.py.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.doubles.package_tree import PKG, ROOT, all_files, kernels_dir


# rank: a package may import packages of a LOWER rank (and the top-level modules of rank 0)
LAYERS: dict[str, int] = {
    "": 0,  # ray_knowsim/__init__.py, registry.py, text.py: stdlib-only helpers
    "schema": 1,  # the data formats (pydantic models of items, graphs, rows, requests)
    "rules": 2,
    "io": 2,
    "demo": 2,
    "stats": 2,  # the statistics module: pure numpy/pandas/scipy over model's metric facts
    "kernels": 3,
    "tables": 3,  # a run's tables from its committed rows (io's readers, stats' reductions)
    "prompts": 4,
    "llm": 4,
    "cluster": 4,  # joining or starting Ray, one code version per cluster, node loss, leases
    # the tutor strategies and learner simulators with their registries (they render through prompts)
    "strategies": 5,
    "simulators": 5,
    "sim": 6,
    "audit": 6,  # the simulator audit: pure checks over a run's rows and graphs, and the run reader that feeds them
    "backends": 7,  # the model-backend registry, one folder per built-in, the limiter, a run's model set
    "config": 8,  # the run config: validates its models: entries against the backends' registry
    "plan": 9,  # sessions and shards, and everything derived from the config before work starts
    "score": 10,  # the judges, and the scoring stage over a run directory
    "graph_extraction": 10,  # IU-graph extraction for new items (asks a model through the loop's ask)
    "preflight": 11,  # the checks before spending and the dry run's estimate
    "run": 12,  # the Ray fan-out of a run, its workers, resume, manifest, progress
    "sweep": 13,
    "validate": 13,
    "report": 13,
    "compare": 13,
    "view": 13,
    "adaptive": 13,  # rounds of runs above the run machinery (run) and compare's run reader
    "training": 13,  # episodes of the loop (sim) with models built from a run config (plan, backends)
    "cli": 14,
}
# same-rank imports that are allowed (importer -> imported)
PEERS = {
    ("report", "compare"),  # the report's who-beats-whom matrix is compare's analysis
    ("view", "report"),  # the viewer draws conversations with the report's renderer
    ("view", "compare"),  # the comparison page words verdicts with compare's one sentence function
    ("adaptive", "compare"),  # the run reader compare uses
}
#: the modules that import Ray (any import, function-level included), each with its reason; a new
#: module that imports Ray fails the test below until it is named here
RAY_ALLOWED: dict[str, str] = {
    "ray_knowsim/cluster/ray_session.py": "the one way into Ray: join a cluster or start a local one",
    "ray_knowsim/cluster/codecheck.py": "asks every node which ray_knowsim its workers import",
    "ray_knowsim/cluster/node_loss.py": "tells a lost node from a failed task, pins work to the head node",
    "ray_knowsim/cluster/bounded_fan_out.py": "the one bounded fan-out of Ray tasks (the run's shards, the sweep's pieces)",
    "ray_knowsim/backends/limiter/actor.py": "the run-wide limiter is a named Ray actor",
    "ray_knowsim/backends/vllm/pool.py": "the vLLM engine replicas are Ray actors in placement groups",
    "ray_knowsim/plan/build.py": "placement reads the cluster's nodes (ray.nodes) to fit the self-hosted models",
    "ray_knowsim/run/fan_out.py": "the fan-out of shard tasks",
    "ray_knowsim/run/progress.py": "the run's progress board is a Ray actor the shards report to",
    "ray_knowsim/tables/reduce.py": "the run's tables are Ray Data reductions",
    "ray_knowsim/sweep/runner.py": "the sweep's pieces are Ray tasks",
    "ray_knowsim/cli/env.py": "`env serve --replicas N` scales the training environment out on Ray Serve",
}


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


def ray_importers() -> set[str]:
    return {str(p.relative_to(ROOT)) for p in all_files()
            if any(m == "ray" or m.startswith("ray.") for m, _ in imported(p))}


def test_ray_is_imported_only_by_the_named_modules():
    bad = []
    for path in all_files():
        rel = str(path.relative_to(ROOT))
        if rel in RAY_ALLOWED:
            continue
        for module, line in imported(path):
            if module == "ray" or module.startswith("ray."):
                bad.append(f"{rel}:{line} imports {module}")
    assert not bad, "Ray outside the modules named in RAY_ALLOWED (name the module there, with its reason):\n" + "\n".join(bad)


def test_every_module_named_for_ray_imports_it():
    """The list stays exact: a module that no longer imports Ray leaves it."""
    assert set(RAY_ALLOWED) - ray_importers() == set()
