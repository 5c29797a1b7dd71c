"""The practice set: 30 generated math items with their IU graphs, for the adaptive demo.

Why: ``configs/adaptive_demo.yaml`` must decide something from a fresh clone, offline, and the
seven demo items are too few for any sequential design to decide (docs/adaptive.md, "min_items").
Thirty items of six families (``practice_families.py``), five sets of numbers each, fixed here,
so the set is the same on every machine and Python. The rows and graphs are in the release
formats (spec §1.1, §1.2), as the demo's are; ``scripts/make_practice_items.py`` writes them to
``ray_knowsim/demo/practice_math.jsonl`` and ``iu_practice_math.json``, the files a config names
(``pkg:demo/...``), and a test checks the committed files are exactly what this module makes.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ray_knowsim.demo.practice_families import (
    LEVELS,
    Problem,
    arithmetic_series,
    consecutive,
    markdowns,
    rectangle,
    right_triangle,
    two_draws,
)

ITEMS_FILE, GRAPHS_FILE = "practice_math.jsonl", "iu_practice_math.json"
SPLIT = "practice"

#: each family with its five sets of numbers (whole answers, no repeated problem)
NUMBERS: tuple[tuple[Callable[..., Problem], tuple[tuple[int, ...], ...]], ...] = (
    (rectangle, ((2, 3, 7), (3, 1, 5), (2, 5, 6), (4, 2, 7), (3, 4, 9))),
    (consecutive, ((3, 14), (4, 21), (5, 8), (3, 45), (4, 102))),
    (markdowns, ((200, 20, 25), (80, 25, 10), (150, 40, 20), (400, 15, 50), (120, 50, 25))),
    (right_triangle, ((6, 8, 10), (5, 12, 13), (9, 12, 15), (8, 15, 17), (7, 24, 25))),
    (arithmetic_series, ((3, 4, 10), (5, 3, 12), (2, 5, 8), (7, 2, 15), (1, 6, 9))),
    (two_draws, ((5, 3), (4, 6), (6, 4), (3, 7), (7, 5))),
)


def problems() -> list[tuple[str, Problem]]:
    """(item id, problem) of the set, round-robin over the families (ids practice_math_01..30)."""
    rounds = max(len(numbers) for _, numbers in NUMBERS)
    made = [family(*numbers[k]) for k in range(rounds) for family, numbers in NUMBERS if k < len(numbers)]
    return [(f"practice_math_{i + 1:02d}", p) for i, p in enumerate(made)]


def item_row(item_id: str, p: Problem) -> dict[str, Any]:
    """A MATH row (spec §1.1), as in ``demo/math.jsonl``."""
    return {"id": item_id, "split": [SPLIT], "source_index": None, "problem": p.problem,
            "level": p.level, "type": p.type, "solution": p.solution}  # fmt: skip


def graph(p: Problem) -> dict[str, Any]:
    """The IU graph (spec §1.2): eight IUs at :data:`LEVELS`, edges with their level drop."""
    concepts = [c for c, _ in p.ius]
    nodes = [{"id": f"IU{k + 1}", "concept": c, "abstraction_level": LEVELS[k], "description": d}
             for k, (c, d) in enumerate(p.ius)]  # fmt: skip
    edges = [{"from": f"IU{s}", "to": f"IU{t}", "delta_l": round(LEVELS[s - 1] - LEVELS[t - 1], 2),
              "reason": f"Working with '{concepts[t - 1].lower()}' relies on '{concepts[s - 1].lower()}'."}
             for s, t in p.edges]  # fmt: skip
    return {"knowledge_areas": list(p.areas), "nodes": nodes, "edges": edges}


def practice_files() -> dict[str, str]:
    """File name -> exact text of the two files, as the demo's are laid out."""
    made = problems()
    items = "".join(json.dumps(item_row(i, p), ensure_ascii=False) + "\n" for i, p in made)
    graphs = json.dumps({i: graph(p) for i, p in made}, indent=1, ensure_ascii=False) + "\n"
    return {ITEMS_FILE: items, GRAPHS_FILE: graphs}


__all__ = ["GRAPHS_FILE", "ITEMS_FILE", "NUMBERS", "SPLIT", "graph", "item_row", "practice_files", "problems"]
