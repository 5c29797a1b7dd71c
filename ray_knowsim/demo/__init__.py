"""The project's own small demo set: a few math and open-ended items with hand-written IU graphs.

Same formats as the authors' release (spec §1.1, §1.2): ``math.jsonl`` / ``expertqa.jsonl`` rows
and ``iu_math.json`` / ``iu_expertqa.json`` graph caches keyed by item id. Used by the offline
model's default graph registry, the quick-start run and tests that must not need ``../shared``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ray_knowsim.schema.graph import IUGraph, check_graph, parse_graph
from ray_knowsim.schema.items import Item, TaskName, item_from_row

DEMO_TASKS: tuple[TaskName, ...] = ("math", "expertqa")
_ITEM_FILES = {"math": "math.jsonl", "expertqa": "expertqa.jsonl"}
_GRAPH_FILES = {"math": "iu_math.json", "expertqa": "iu_expertqa.json"}


def _read(name: str) -> str:
    return resources.files("ray_knowsim.demo").joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _items(task: TaskName) -> tuple[Item, ...]:
    rows = [json.loads(line) for line in _read(_ITEM_FILES[task]).splitlines() if line.strip()]
    return tuple(item_from_row(task, row) for row in rows)


@lru_cache(maxsize=None)
def _graphs(task: TaskName) -> dict[str, IUGraph]:
    raw = json.loads(_read(_GRAPH_FILES[task]))
    return {item_id: check_graph(parse_graph(g, item_id), item_id, "strict") for item_id, g in raw.items()}


def demo_items(task: TaskName | None = None) -> list[Item]:
    tasks = DEMO_TASKS if task is None else (task,)
    return [item for t in tasks for item in _items(t)]


def demo_graphs(task: TaskName | None = None) -> dict[str, IUGraph]:
    tasks = DEMO_TASKS if task is None else (task,)
    out: dict[str, IUGraph] = {}
    for t in tasks:
        out.update(_graphs(t))
    return out


__all__ = ["DEMO_TASKS", "demo_graphs", "demo_items"]
