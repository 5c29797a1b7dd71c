"""State-dependent graph facts: the prerequisite ceiling, the ZPD, density and gap sum (spec §3.1, §5, §7.7)."""

from __future__ import annotations

from collections import deque
from typing import Mapping

from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.states import KNOWS_WELL, PARTIAL, STRUGGLING


def ceiling(g: GraphIndex, node_id: str, states: Mapping[str, int]) -> int:
    """Highest state v may reach now: the weakest prerequisite decides (used by update and Z_t)."""
    prereqs = g.prereqs.get(node_id, ())
    if not prereqs:
        return KNOWS_WELL
    weakest = min(states.get(p, 0) for p in prereqs)
    if weakest <= STRUGGLING:
        return STRUGGLING
    return PARTIAL if weakest == PARTIAL else KNOWS_WELL


def ceiling_any_partial(g: GraphIndex, node_id: str, states: Mapping[str, int]) -> int:
    """The reference metrics helper's variant (all prereqs known -> 3, any partial -> 2, else 1);
    kept only to label which variant a number used (spec §3.1, D16)."""
    prereqs = g.prereqs.get(node_id, ())
    values = [states.get(p, 0) for p in prereqs]
    if all(v == KNOWS_WELL for v in values):
        return KNOWS_WELL
    return PARTIAL if any(v == PARTIAL for v in values) else STRUGGLING


def in_zpd(g: GraphIndex, node_id: str, states: Mapping[str, int]) -> bool:
    """Teachable now: not yet known well, and the ceiling admits at least partial understanding."""
    return states.get(node_id, 0) < KNOWS_WELL and ceiling(g, node_id, states) >= PARTIAL


def zpd(g: GraphIndex, states: Mapping[str, int]) -> set[str]:
    return {v for v in g.ids if in_zpd(g, v, states)}


def density(g: GraphIndex, states: Mapping[str, int]) -> float:
    """Mean share of each IU's neighbours that are known (>= partial); isolated IUs count 1.
    The known IUs are found once and each neighbourhood counted by a set intersection (twice per
    turn: the learner's prompt and the turn's row): the same counts, summed in the same order."""
    if not g.ids:
        return 0.0
    known = {u for u, s in states.items() if s >= PARTIAL}
    neighbours = g.neighbours
    total = 0.0
    for v in g.ids:
        nbrs = neighbours[v]
        total += len(known & nbrs) / len(nbrs) if nbrs else 1.0
    return total / len(g.ids)


def articulation_mode(value: float) -> str:
    return "Explicit" if value >= 0.6 else ("Vague" if value >= 0.3 else "Compliant")


def density_band(value: float) -> str:
    return "HIGH" if value >= 0.6 else ("MEDIUM" if value >= 0.3 else "LOW")


def gap_sum(g: GraphIndex, mentioned_ids: list[str], post: Mapping[str, int]) -> float:
    """Distance from each shaky mentioned IU to the nearest other known IU up its prerequisites."""
    total = 0.0
    seen_ids: set[str] = set()
    for v in mentioned_ids:
        if v in seen_ids or v not in g.order or post.get(v, 0) >= PARTIAL:
            continue
        seen_ids.add(v)
        found = None
        visited = {v}
        queue = deque((p, 1) for p in g.prereqs.get(v, ()))
        while queue:
            u, d = queue.popleft()
            if u in visited:
                continue
            visited.add(u)
            if u != v and post.get(u, 0) >= PARTIAL:
                found = (d, post.get(u, 0))
                break
            queue.extend((p, d + 1) for p in g.prereqs.get(u, ()))
        total += (found[0] + (3 - found[1])) if found else 3
    return total
