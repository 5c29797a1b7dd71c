"""Initial knowledge state of a simulated learner (spec §4; paper discrepancies D1-D3).

Pure logic: no I/O. Sampling is driven by a ``random.Random`` passed in, because the reference
shares ONE stream across the items of a run in item-list order (spec §4.6): the caller owns the
stream and walks its items in that order, and a cached state must not touch it.

Reproducing the shipped init cache (seed 42; tests/rules/test_init_state.py): one
``random.Random(42)`` per (task, level) over the validation items in the items file's order, and a
separate one over the benchmarking-only items in file order, reproduces 152/180 entries (all but
28 MathQA-validation ones, spec §4.6). The IU cache lists the same items in the same relative
order (validation first), so its order gives the same result; a single stream over all 30 items
(file or cache order) does not.

Two placements (``RuleConfig.init_placement``):

* ``"shuffle"`` (reference preset, what the paper runs executed, spec §4.3-§4.5): shuffled,
  prerequisite-closed known phase; partial phase over the string-sorted unknown ids; a struggling
  band preferring IUs next to known/partial ones; partial IUs with < 50 % known prerequisites
  stored as struggling (D3, ``init_partial_demotion``).
* ``"topological"`` (paper preset, D2 "assigned in topological order") — our reconstruction, since
  the paper gives no procedure: draw ONE seeded topological order (a Kahn order whose ties are
  broken by a single shuffle of the node list), then hand out states along it: first K known,
  next P partial, next S struggling, the rest unaware. Along every edge of a DAG the prerequisite
  therefore holds a state >= its dependant's, so the known set is prerequisite-closed and nobody
  is partial above an unaware prerequisite. Known IUs are only taken from the part of the order
  Kahn reaches (nodes on or below a cycle can never be known). Same target counts as §4.3.
"""

from __future__ import annotations

import copy
import heapq
import random
from typing import Any, Mapping, NamedTuple

from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.items import INIT_CACHE_TASK_KEYS, Item
from ray_knowsim.schema.knowledge import InitCache
from ray_knowsim.schema.states import KNOWS_WELL, PARTIAL, STRUGGLING, UNAWARE, state_name, state_value
from ray_knowsim.rules.config import InitRatios, RuleConfig

KS = dict[str, dict[str, Any]]


def kahn_order(index: GraphIndex) -> tuple[list[str], int]:
    """Reference topological order (spec §4.4) and how many nodes Kahn actually reached.

    In-degrees count every edge between two graph nodes (duplicates twice); the queue starts with
    the zero-in-degree nodes in node order and is FIFO; a popped node's children are visited in
    edge order. Unreached nodes (on or below a cycle) follow in node order.
    """
    indeg = {v: 0 for v in index.ids}
    for v in index.ids:
        for c in index.children[v]:
            indeg[c] += 1
    queue = [v for v in index.ids if indeg[v] == 0]
    head = 0
    while head < len(queue):
        v = queue[head]
        head += 1
        for c in index.children[v]:
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.append(c)
    reached = len(queue)
    seen = set(queue)
    return queue + [v for v in index.ids if v not in seen], reached


def seeded_topological_order(index: GraphIndex, rng: random.Random) -> tuple[list[str], int]:
    """A topological order whose ties are broken by one ``rng.shuffle`` of the node list.

    Kahn with a priority queue keyed by the shuffled rank; unreached nodes (cycles) follow in
    shuffled rank. Returns (order, number reached), like :func:`kahn_order`.
    """
    shuffled = list(index.ids)
    rng.shuffle(shuffled)
    rank = {v: k for k, v in enumerate(shuffled)}
    indeg = {v: 0 for v in index.ids}
    for v in index.ids:
        for c in index.children[v]:
            indeg[c] += 1
    ready = [(rank[v], v) for v in index.ids if indeg[v] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, v = heapq.heappop(ready)
        order.append(v)
        for c in index.children[v]:
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(ready, (rank[c], c))
    reached = len(order)
    seen = set(order)
    return order + [v for v in shuffled if v not in seen], reached


def known_target(n: int, ratios: InitRatios) -> int:
    """K = max(1, min(n - 1, round(k * n))) (spec §4.3; Python half-to-even rounding)."""
    return max(1, min(n - 1, round(ratios.known * n)))


def partial_target(n: int, n_known: int, ratios: InitRatios) -> int:
    """P = max(1, min(r - 1, round(p * n))) with r = n - |known|, or 0 when r <= 1."""
    r = n - n_known
    return max(1, min(r - 1, round(ratios.partial * n))) if r > 1 else 0


def struggling_target(n: int, ratios: InitRatios) -> int:
    """S = round(q * n), unclamped (the band simply takes what is left)."""
    return round(ratios.struggling * n)


class Placement(NamedTuple):
    """The sets the sampler drew, before the mapping to states (spec §4.5)."""

    known: frozenset[str]
    partial: frozenset[str]
    band: frozenset[str]


def sample_placement(index: GraphIndex, level: str, rules: RuleConfig, rng: random.Random) -> Placement:
    """Draw the known / partial / struggling-band sets for one item (consumes ``rng``)."""
    ratios = rules.init_ratios[level]
    if rules.init_placement == "topological":
        known, partial, band = _place_topological(index, ratios, rules.include_struggling, rng)
    else:
        known, partial, band = _place_shuffled(index, ratios, rules.include_struggling, rng)
    return Placement(frozenset(known), frozenset(partial), frozenset(band))


def sample_initial_states(index: GraphIndex, level: str, rules: RuleConfig, rng: random.Random) -> dict[str, int]:
    """Sample one item's initial state: ``{iu_id: state value 0..3}`` in node order."""
    return placement_states(index, level, sample_placement(index, level, rules, rng), rules.init_partial_demotion)


def _place_shuffled(
    index: GraphIndex, ratios: InitRatios, include_struggling: bool, rng: random.Random
) -> tuple[set[str], set[str], set[str]]:
    """Spec §4.4 steps 1-3, consuming the stream exactly as the reference does."""
    topo, _ = kahn_order(index)
    n = len(topo)
    prereqs = index.prereqs

    # 1. known: repeated passes over the shuffled pool, each admitting prerequisite-closed nodes.
    k_target = known_target(n, ratios)
    known: set[str] = set()
    pool = list(topo)
    rng.shuffle(pool)
    while len(known) < k_target:
        admitted = False
        for v in list(pool):
            if len(known) >= k_target:
                break
            if all(p in known for p in prereqs[v]):
                known.add(v)
                pool.remove(v)
                admitted = True
        if not admitted:
            break

    # 2. partial: one pass over the string-sorted, then shuffled, remaining ids.
    p_target = partial_target(n, len(known), ratios)
    partial: set[str] = set()
    pool = sorted(v for v in index.ids if v not in known)
    rng.shuffle(pool)
    for v in pool:
        if len(partial) >= p_target:
            break
        ps = prereqs[v]
        if not ps or any(p in known for p in ps):
            partial.add(v)

    # 3. struggling band: exposed (a known/partial prerequisite) first, then isolated.
    band: set[str] = set()
    if include_struggling:
        s_target = struggling_target(n, ratios)
        near = known | partial
        rest = sorted(v for v in index.ids if v not in near)
        exposed = [v for v in rest if any(p in near for p in prereqs[v])]
        isolated = [v for v in rest if not any(p in near for p in prereqs[v])]
        rng.shuffle(exposed)  # both shuffles always happen (they advance the stream)
        rng.shuffle(isolated)
        band = set((exposed + isolated)[:s_target])
    return known, partial, band


def _place_topological(
    index: GraphIndex, ratios: InitRatios, include_struggling: bool, rng: random.Random
) -> tuple[set[str], set[str], set[str]]:
    """Paper reading of D2: states handed out along one seeded topological order."""
    order, reached = seeded_topological_order(index, rng)
    n = len(order)
    k = min(known_target(n, ratios), reached)
    p = partial_target(n, k, ratios)
    s = struggling_target(n, ratios) if include_struggling else 0
    known = set(order[:k])
    partial = set(order[k : k + p])
    band = set(order[k + p : k + p + s])
    return known, partial, band


def placement_states(index: GraphIndex, level: str, placement: Placement, demotion: bool = True) -> dict[str, int]:
    """Spec §4.5: known -> knows_well; partial -> partial (or struggling under D3); band -> struggling."""
    known, partial, band = placement
    states: dict[str, int] = {}
    for v in index.ids:
        if v in known:
            states[v] = KNOWS_WELL
        elif v in partial:
            ps = index.prereqs[v]
            share = sum(1 for p in ps if p in known) / max(len(ps), 1)
            states[v] = PARTIAL if (not demotion or share >= 0.5) else STRUGGLING
        elif v in band:
            states[v] = STRUGGLING
        else:
            states[v] = UNAWARE
    if level == "novice" and not known and not partial and states:
        # Only for rootless graphs. The reference takes an arbitrary set element (hash order);
        # we take the smallest id string among the still-unaware IUs (all IUs if none is).
        unaware = [v for v, s in states.items() if s == UNAWARE]
        states[min(unaware or states)] = PARTIAL
    return states


def states_to_ks(index: GraphIndex, states: Mapping[str, int]) -> KS:
    """``{label: {"state": name}}`` in node order, the shape of an initial KS (spec §1.3)."""
    return {index.label_of(v): {"state": state_name(states.get(v, UNAWARE))} for v in index.ids}


def ks_to_states(index: GraphIndex, ks: Mapping[str, Any]) -> dict[str, int]:
    """Read a KS back into ``{iu_id: value}`` (id -> label -> state; missing reads as unaware)."""
    out: dict[str, int] = {}
    for v in index.ids:
        entry = ks.get(index.label_of(v))
        out[v] = state_value(entry.get("state") if isinstance(entry, Mapping) else None)
    return out


def session_initial_states(
    index: GraphIndex, level: str, rules: RuleConfig, init_seed: int | str, cached_ks: Mapping[str, Any] | None = None
) -> dict[str, int]:
    """The state one session starts from, ``{iu_id: value}`` over every IU: its cached KS (the
    engine's init cache, a training reset's given state) read back verbatim, else sampled from
    ``random.Random(init_seed)`` — a session's own stream, so every condition of an item x level x
    trial starts from the same state (paired conditions). The one place this is decided: the
    worker (filling a shard's states before the loop), the loop's session start, and a sweep's
    re-sampling (``sweep.rescore``; its seed is the string ``"<init seed>/<conversation key>"``,
    part of the sweep's identity) all call it.
    """
    if cached_ks is not None:
        return ks_to_states(index, cached_ks)
    states = sample_initial_states(index, level, rules, random.Random(init_seed))
    return {v: int(states.get(v, UNAWARE)) for v in index.ids}


def initial_state_for(
    item: Item,
    level: str,
    graph_index: GraphIndex,
    rules: RuleConfig,
    rng: random.Random,
    init_cache: InitCache | None = None,
) -> KS:
    """The KS a session starts from (spec §4.1).

    A cache hit for (task key, item, level) is returned verbatim (a deep copy) and leaves ``rng``
    untouched; otherwise the state is sampled from ``rng``.
    """
    if init_cache is not None:
        task_key = INIT_CACHE_TASK_KEYS.get(item.task, item.task)
        cached = init_cache.lookup(task_key, item.id, level)
        if cached is not None:
            return copy.deepcopy(cached)
    return states_to_ks(graph_index, sample_initial_states(graph_index, level, rules, rng))


__all__ = [
    "KS",
    "Placement",
    "initial_state_for",
    "kahn_order",
    "known_target",
    "ks_to_states",
    "partial_target",
    "placement_states",
    "sample_initial_states",
    "sample_placement",
    "seeded_topological_order",
    "session_initial_states",
    "states_to_ks",
    "struggling_target",
]
