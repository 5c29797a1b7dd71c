"""Random IU graphs: the one generator the tests draw graphs from.

Two shapes, from one seeded ``random.Random`` (the same seed gives the same graph):

* the default, what extraction gives: ``IU1`` .. ``IUn`` in order, each IU after the first with
  0, 1 or 2 earlier IUs as prerequisites (one twice as likely as none or two), so acyclic;
* ``awkward=True``, what the rules and the kernel must survive: ids drawn in random order from a
  pool with odd ones (``"a"``, ``"IU 1"``, ``"b:c"``), half the graphs cyclic, self-loops,
  prerequisites outside the graph, edges into unknown nodes, duplicated edges.
"""

from __future__ import annotations

import random
from typing import Sequence

from ray_knowsim.schema.graph import IUGraph

#: the ids an awkward graph draws from (at most 33 nodes)
ID_POOL = [f"IU{k}" for k in range(1, 31)] + ["a", "IU 1", "b:c"]


def random_graph(rng: random.Random, n: int, *, awkward: bool = False, concepts: Sequence[str] | None = None,
                 knowledge_areas: Sequence[str] | None = None) -> IUGraph:
    """A graph of ``n`` IUs (see the module docstring for the two shapes). ``concepts``: the IUs'
    concept texts in node order (default ``concept <k>``, or ``c<id>`` when awkward);
    ``knowledge_areas``: the graph's areas (default none)."""
    if awkward:
        ids = rng.sample(ID_POOL, n)  # random choice and order: node order is shuffled
        edges = _awkward_edges(rng, ids)
        default = [f"c{i}" for i in ids]
    else:
        ids = [f"IU{k + 1}" for k in range(n)]
        edges = [(ids[p], ids[k]) for k in range(1, n) for p in rng.sample(range(k), min(k, rng.choice((0, 1, 1, 2))))]
        default = [f"concept {k + 1}" for k in range(n)]
    texts = list(concepts) if concepts is not None else default
    raw: dict = {"nodes": [{"id": i, "concept": c} for i, c in zip(ids, texts, strict=True)],
                 "edges": [{"from": s, "to": t} for s, t in edges]}
    if knowledge_areas is not None:
        raw = {"knowledge_areas": list(knowledge_areas), **raw}
    return IUGraph.model_validate(raw)


def _awkward_edges(rng: random.Random, ids: list[str]) -> list[tuple[str, str]]:
    n = len(ids)
    acyclic = rng.random() < 0.5
    edges: list[tuple[str, str]] = []
    for _ in range(rng.randint(0, 3 * n)):
        r = rng.random()
        if r < 0.07:
            src = dst = rng.choice(ids)  # self-loop
        elif r < 0.15:
            src, dst = rng.choice(("X1", "X2", "IU99")), rng.choice(ids)  # prerequisite not in the graph
        elif r < 0.18:
            src, dst = rng.choice(ids), "X3"  # edge into an unknown node (ignored by prereqs)
        else:
            a, b = rng.choice(ids), rng.choice(ids)
            if acyclic and ids.index(a) > ids.index(b):
                a, b = b, a
            src, dst = a, b
            if acyclic and a == b:
                continue
        edges.append((src, dst))
    for _ in range(rng.randint(0, 3) if edges else 0):  # duplicated edges
        edges.insert(rng.randint(0, len(edges)), rng.choice(edges))
    return edges
