"""The IU vocabulary of one graph: IDF-weighted word sets, how much of an IU a text carries."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from ray_knowsim.llm.offline.words import words
from ray_knowsim.schema.graph import IUGraph, build_index


@dataclass(frozen=True)
class IUText:
    id: str
    concept: str
    description: str
    weights: Mapping[str, float]  # content word -> IDF weight within the graph
    concept_words: frozenset[str]


class GraphVocabulary:
    """IDF-weighted word sets of a graph's IUs: how much of an IU a text carries."""

    def __init__(self, graph: IUGraph):
        self.graph = graph
        self.index = build_index(graph)
        bags = {n.id: set(words(f"{n.concept} {n.description}")) for n in graph.nodes}
        df = Counter(w for bag in bags.values() for w in bag)
        n = len(bags)
        self.ius: dict[str, IUText] = {}
        for node in graph.nodes:
            weights = {w: math.log(1.0 + n / df[w]) for w in sorted(bags[node.id])}
            self.ius[node.id] = IUText(node.id, node.concept, node.description, weights, frozenset(words(node.concept)))
        self.topo = _topological(self.index)

    def coverage(self, iu_id: str, text_words: set[str]) -> float:
        """Share of the IU's (IDF-weighted) words present in a text."""
        weights = self.ius[iu_id].weights
        total = sum(weights.values())
        if total == 0:
            return 0.0
        return sum(w for word, w in weights.items() if word in text_words) / total

    def concept_hit(self, iu_id: str, text_words: set[str]) -> float:
        """Share of the IU's concept-name words present in a text (how clearly it is named)."""
        cw = self.ius[iu_id].concept_words
        return len(cw & text_words) / len(cw) if cw else 0.0


def _topological(index) -> list[str]:
    indeg = {v: 0 for v in index.ids}
    for v in index.ids:
        indeg[v] = sum(1 for p in index.prereqs[v] if p in indeg)
    queue = [v for v in index.ids if indeg[v] == 0]
    order: list[str] = []
    while queue:
        v = queue.pop(0)
        order.append(v)
        for c in index.children[v]:
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.append(c)
    order.extend(v for v in index.ids if v not in order)  # cycles: node order
    return order


@lru_cache(maxsize=512)
def _vocabulary(graph_json: str) -> GraphVocabulary:
    return GraphVocabulary(IUGraph.model_validate(json.loads(graph_json)))


def vocabulary(graph: IUGraph | Mapping[str, Any]) -> GraphVocabulary:
    data = graph.to_json_dict() if isinstance(graph, IUGraph) else dict(graph)
    return _vocabulary(json.dumps(data, sort_keys=True))
