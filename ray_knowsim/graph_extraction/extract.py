"""IU-graph extraction for new items: ask a model, validate, and merge into a cache.

Each item walks the spec's retry ladder (normal prompt, then "JSON only", then a compact
variant, with growing token budgets) until a reply parses into a valid acyclic graph. Existing
cache entries are never touched; items that still fail are reported, never filled with defaults.

It has its own package above the turn loop: it renders prompts (prompts/), asks a model through
the loop's :func:`ray_knowsim.sim.ask.transport_error` naming (llm/, sim/) and parses the answers,
but is no part of a conversation.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Sequence

from ray_knowsim.llm.parse import parse_graph_extraction
from ray_knowsim.schema.chat import Usage
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import Item
from ray_knowsim.prompts.graph_extraction import graph_extraction_plan, render_graph_extraction
from ray_knowsim.sim.ask import transport_error

#: an edge whose abstraction levels differ by more than this should have a bridging IU between
BRIDGING_SPAN = 0.35


@dataclass
class Extraction:
    item_id: str
    graph: IUGraph | None = None
    error: str | None = None
    detail: str = ""
    warnings: list[str] = field(default_factory=list)
    attempts: int = 0
    usage: Usage = field(default_factory=Usage)


def bridging_warnings(graph: IUGraph) -> list[str]:
    levels = {n.id: n.abstraction_level for n in graph.nodes}
    out = []
    for e in graph.edges:
        a, b = levels.get(e.source), levels.get(e.target)
        if a is not None and b is not None and abs(a - b) > BRIDGING_SPAN:
            out.append(f"edge {e.source}->{e.target} spans {abs(a - b):.2f} > {BRIDGING_SPAN} in abstraction level; a bridging IU may be missing")
    return out


async def extract_graphs(model: ChatModel, items: Sequence[Item], *, max_tokens: int = 8192, seed: int | None = 0) -> list[Extraction]:
    """Every item walks the ladder on its own, all items at once (same order as ``items``)."""
    return list(await asyncio.gather(*(extract_graph(model, item, max_tokens=max_tokens, seed=seed) for item in items)))


async def extract_graph(model: ChatModel, item: Item, *, max_tokens: int = 8192, seed: int | None = 0) -> Extraction:
    """One item up the ladder until a reply parses into a valid graph (or the ladder ends)."""
    res = Extraction(item.id)
    for attempt, temperature, budget in graph_extraction_plan(max_tokens):
        request = render_graph_extraction(item, attempt=attempt, temperature=temperature, max_tokens=budget, seed=seed,
                                          request_id=f"{item.id}:graph")
        response = await model.generate(request)
        res.attempts += 1
        res.usage.add(response.usage)
        if response.error is not None:
            res.error, res.detail = transport_error("graph_extractor", response), response.detail or response.error
            continue
        parsed = parse_graph_extraction(response.text, item_id=item.id, mode="strict")
        if not parsed.ok:
            res.error, res.detail = parsed.error, parsed.detail
            continue
        res.graph, res.error, res.detail = parsed.value, None, ""
        res.warnings = list(parsed.warnings) + bridging_warnings(parsed.value)
        return res
    return res
