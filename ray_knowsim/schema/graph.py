"""IU graphs: the cache format (spec §1.2), validation, and the derived index the rules use (spec §3).

Validation has two modes because the authors' data is not always a DAG:
* ``strict`` (default for new runs): a dangling edge or a cycle is an error naming the item and
  the nodes; duplicate edges are dropped with a warning.
* ``reference``: reproduces the reference code's tolerance (cycles walked as spec §3 says,
  duplicate edges kept, dangling prerequisites read as unaware), with a warning per defect.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Literal

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

GraphMode = Literal["strict", "reference"]


class GraphError(ValueError):
    """An IU graph that cannot be used; the message names the item and the nodes."""


class GraphWarning(UserWarning):
    """A tolerated defect in an IU graph (duplicate edge, or a cycle in reference mode)."""


class IUNode(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1)
    concept: str = ""
    abstraction_level: float | None = None
    description: str = ""


class IUEdge(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    source: str = Field(alias="from", min_length=1)
    target: str = Field(alias="to", min_length=1)
    delta_l: float | None = None
    reason: str = ""


class IUGraph(BaseModel):
    """One item's IU graph as stored in the cache files."""

    model_config = ConfigDict(extra="allow")
    knowledge_areas: list[str] = Field(default_factory=list)
    nodes: list[IUNode] = Field(min_length=1)
    edges: list[IUEdge] = Field(default_factory=list)

    def to_json_dict(self) -> dict:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def iu_label(node_id: str, concept: str) -> str:
    """Knowledge-state key "<id>: <concept>"; whichever part exists if one is empty (spec §0)."""
    if node_id and concept:
        return f"{node_id}: {concept}"
    return node_id or concept


def parse_graph(raw: object, item_id: str) -> IUGraph:
    try:
        return IUGraph.model_validate(raw)
    except ValidationError as exc:
        raise GraphError(f"IU graph of item {item_id!r} is malformed: {exc}") from exc


def check_graph(graph: IUGraph, item_id: str, mode: GraphMode = "strict") -> IUGraph:
    """Validate a graph; returns the graph to use (duplicate edges removed in strict mode)."""
    ids = [n.id for n in graph.nodes]
    seen: set[str] = set()
    dup_nodes = sorted({i for i in ids if i in seen or seen.add(i)})
    if dup_nodes:
        raise GraphError(f"IU graph of item {item_id!r} repeats node ids: {', '.join(dup_nodes)}")
    known = set(ids)
    dangling = [(e.source, e.target) for e in graph.edges if e.source not in known or e.target not in known]
    if dangling:
        desc = ", ".join(f"{s}->{t}" for s, t in dangling)
        if mode == "strict":
            raise GraphError(f"IU graph of item {item_id!r} has edges to unknown nodes: {desc}")
        warnings.warn(f"item {item_id!r}: edges to unknown nodes kept (reference mode): {desc}", GraphWarning, stacklevel=2)

    edge_keys = [(e.source, e.target) for e in graph.edges]
    dup_edges = sorted({k for k in edge_keys if edge_keys.count(k) > 1})
    if dup_edges and mode == "strict":
        warnings.warn(
            f"item {item_id!r}: duplicate edges dropped: {', '.join(f'{s}->{t}' for s, t in dup_edges)}",
            GraphWarning,
            stacklevel=2,
        )
        kept, seen_e = [], set()
        for e in graph.edges:
            if (e.source, e.target) not in seen_e:
                seen_e.add((e.source, e.target))
                kept.append(e)
        graph = graph.model_copy(update={"edges": kept})
    elif dup_edges:
        warnings.warn(
            f"item {item_id!r}: duplicate edges kept (reference mode): {', '.join(f'{s}->{t}' for s, t in dup_edges)}",
            GraphWarning,
            stacklevel=2,
        )

    digraph = nx.DiGraph()
    digraph.add_nodes_from(ids)
    digraph.add_edges_from((e.source, e.target) for e in graph.edges if e.source in known and e.target in known)
    if not nx.is_directed_acyclic_graph(digraph):
        cycle_nodes = sorted({n for comp in nx.strongly_connected_components(digraph) if len(comp) > 1 or digraph.has_edge(*(list(comp) * 2)[:2]) for n in comp})
        cycle_edges = nx.find_cycle(digraph)
        one_cycle = " -> ".join([u for u, _ in cycle_edges] + [cycle_edges[0][0]])
        msg = f"IU graph of item {item_id!r} has a prerequisite cycle ({one_cycle}); nodes on cycles: {', '.join(cycle_nodes)}"
        if mode == "strict":
            raise GraphError(msg + " (use graph_mode='reference' to replay reference data)")
        warnings.warn(msg + "; walked as the reference does", GraphWarning, stacklevel=2)
    return graph


@dataclass(frozen=True)
class GraphIndex:
    """The facts about a graph that the rules read (spec §3), computed once per graph."""

    item_id: str
    ids: tuple[str, ...]
    labels: tuple[str, ...]
    order: dict[str, int]
    prereqs: dict[str, tuple[str, ...]]  # edge order, duplicates kept, may name unknown ids
    children: dict[str, tuple[str, ...]]  # edge order, duplicates kept (known ids only)
    neighbours: dict[str, frozenset[str]]
    depth: dict[str, int]
    update_order: tuple[str, ...]
    edges: tuple[tuple[str, str], ...] = field(default=())

    @property
    def size(self) -> int:
        return len(self.ids)

    def label_of(self, node_id: str) -> str:
        return self.labels[self.order[node_id]]


def build_index(graph: IUGraph, item_id: str = "") -> GraphIndex:
    ids = tuple(n.id for n in graph.nodes)
    known = set(ids)
    labels = tuple(iu_label(n.id, n.concept) for n in graph.nodes)
    prereqs: dict[str, list[str]] = {i: [] for i in ids}
    children: dict[str, list[str]] = {i: [] for i in ids}
    neighbours: dict[str, set[str]] = {i: set() for i in ids}
    for e in graph.edges:
        if e.target in known:
            prereqs[e.target].append(e.source)
            neighbours[e.target].add(e.source)
        if e.source in known:
            if e.target in known:
                children[e.source].append(e.target)
            neighbours[e.source].add(e.target)
    depth = _reference_depths(ids, prereqs)
    order = {i: k for k, i in enumerate(ids)}
    update_order = tuple(sorted(ids, key=lambda i: depth[i]))  # stable: ties keep node order
    return GraphIndex(
        item_id=item_id,
        ids=ids,
        labels=labels,
        order=order,
        prereqs={k: tuple(v) for k, v in prereqs.items()},
        children={k: tuple(v) for k, v in children.items()},
        neighbours={k: frozenset(v) for k, v in neighbours.items()},
        depth=depth,
        update_order=update_order,
        edges=tuple((e.source, e.target) for e in graph.edges),
    )


def _reference_depths(ids: tuple[str, ...], prereqs: dict[str, list[str]]) -> dict[str, int]:
    """Longest prerequisite chain below each IU, walked exactly as spec §3 describes.

    For cyclic graphs the result depends on visiting order: a node met again on the current
    path counts 0 and is not memoised.
    """
    memo: dict[str, int] = {}

    def walk(v: str, on_path: set[str]) -> int:
        if v in memo:
            return memo[v]
        if v in on_path:
            return 0
        on_path.add(v)
        ps = prereqs.get(v, [])
        value = 0 if not ps else 1 + max(walk(p, on_path) for p in ps)
        memo[v] = value
        return value

    for start in ids:
        walk(start, set())
    return memo


def capacity(size: int, ratio: float = 0.55, floor: int = 2) -> int:
    """Cognitive capacity tau = max(floor, round(ratio * |G|)) with half-to-even rounding."""
    return max(floor, round(ratio * size))


def hinge_size(size: int, ratio: float = 0.143) -> int:
    return max(1, round(ratio * size))


__all__ = [
    "GraphError",
    "GraphIndex",
    "GraphMode",
    "GraphWarning",
    "IUEdge",
    "IUGraph",
    "IUNode",
    "build_index",
    "capacity",
    "check_graph",
    "hinge_size",
    "iu_label",
    "parse_graph",
]
