"""Packing many sessions (of different graphs and rule settings) into the kernel's flat arrays,
and reading results back.

Why separate from the kernel: packing is plain Python over model objects (ids, SignalEntry lists,
RuleConfig) and runs once per batch; the sweep engine packs graphs and signal trajectories once and
then replays them under thousands of rule settings, sharing them through ``graph_of``/``traj_of``.
The array layout is described in ``ray_knowsim.kernels.update``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ray_knowsim.kernels.update import (
    COUNTERS,
    MAX_GRAPH_NODES,
    N_PARAMS,
    NO_ID,
    NOT_IN_GRAPH,
    P_CARRY_PERSISTS,
    P_HINGE,
    P_HINGE_N,
    P_HINGE_TAIL,
    P_INCLUDE_ATTEMPT,
    P_MAX_TURNS,
    P_RESET_CARRY,
    P_SOFTENING,
    P_STRICT,
    P_TAU,
    P_TEMPORAL_DECAY,
    P_WA,
    P_WR,
    P_WS,
)
from ray_knowsim.schema.graph import GraphIndex, capacity, hinge_size
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import RuleConfig
from ray_knowsim.rules.update import INCORRECT_NO_EXPLANATION

STATE_DTYPE = np.int8
NODE_DTYPE = np.int32  # local node index in a signal entry (graphs are far below 2**31 nodes)
CODE_DTYPE = np.int8


@dataclass(frozen=True)
class PackedGraphs:
    """G graphs as CSR arrays; graph g's nodes are rows ``node_off[g]..node_off[g+1]`` in node order."""

    ids: tuple[tuple[str, ...], ...]
    index: tuple[dict[str, int], ...]  # id -> local index (= order), per graph
    node_off: np.ndarray  # int64 [G + 1]
    pre_off: np.ndarray  # int64 [rows + 1]
    pre_idx: np.ndarray  # int64 [edges]: local index of the prerequisite, -1 if not a node
    upd: np.ndarray  # int64 [rows]: update order of each graph, local indices
    depth: np.ndarray  # int64 [rows]

    @property
    def n_graphs(self) -> int:
        return len(self.ids)

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.node_off)


def pack_graphs(graphs: Sequence[GraphIndex]) -> PackedGraphs:
    """Flatten graph indexes; prerequisites keep edge order and duplicates, unknown ids become -1."""
    ids, index = [], []
    node_off = [0]
    pre_off = [0]
    pre_idx: list[int] = []
    upd: list[int] = []
    depth: list[int] = []
    for g in graphs:
        if len(g.ids) >= MAX_GRAPH_NODES:
            raise ValueError(f"graph {g.item_id!r} has {len(g.ids)} IUs; the kernel supports fewer than {MAX_GRAPH_NODES}")
        order = {v: k for k, v in enumerate(g.ids)}
        ids.append(tuple(g.ids))
        index.append(order)
        for v in g.ids:
            pre_idx.extend(order.get(p, NOT_IN_GRAPH) for p in g.prereqs.get(v, ()))
            pre_off.append(len(pre_idx))
            depth.append(g.depth[v])
        upd.extend(order[v] for v in g.update_order)
        node_off.append(node_off[-1] + len(g.ids))
    return PackedGraphs(
        ids=tuple(ids),
        index=tuple(index),
        node_off=np.asarray(node_off, dtype=np.int64),
        pre_off=np.asarray(pre_off, dtype=np.int64),
        pre_idx=np.asarray(pre_idx, dtype=np.int64),
        upd=np.asarray(upd, dtype=np.int64),
        depth=np.asarray(depth, dtype=np.int64),
    )


def rule_params(rules: RuleConfig, size: int, max_turns: int = 15) -> np.ndarray:
    """One ``params`` row: the rule settings of a session whose graph has ``size`` IUs."""
    row = np.zeros(N_PARAMS, dtype=np.float64)
    row[P_WS : P_WS + 4] = rules.w_state
    row[P_WR : P_WR + 4] = rules.w_reasoning
    row[P_WA] = rules.w_articulation
    row[P_INCLUDE_ATTEMPT] = rules.include_attempt_load
    row[P_TAU] = capacity(size, rules.capacity_ratio, rules.capacity_floor)
    row[P_STRICT] = rules.overload_flag_strict
    row[P_SOFTENING] = rules.dropoff_softening
    row[P_HINGE] = rules.hinge
    row[P_HINGE_N] = hinge_size(size, rules.hinge_ratio)
    row[P_HINGE_TAIL] = rules.hinge_tail
    row[P_RESET_CARRY] = rules.reset_carry_on_transition
    row[P_CARRY_PERSISTS] = rules.carry_persists
    row[P_TEMPORAL_DECAY] = rules.temporal_decay
    row[P_MAX_TURNS] = max_turns
    return row


def params_matrix(
    rules: RuleConfig | Sequence[RuleConfig], sizes: Sequence[int] | np.ndarray, max_turns: int | Sequence[int] = 15
) -> np.ndarray:
    """``[S, N_PARAMS]`` for sessions with graph sizes ``sizes``; one RuleConfig or one per session."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = sizes.shape[0]
    per_session = not isinstance(rules, RuleConfig)
    if per_session and len(rules) != n:
        raise ValueError(f"{len(rules)} rule configs for {n} sessions")
    turns = np.broadcast_to(np.asarray(max_turns, dtype=np.int64), (n,))
    if np.any(turns < 1):
        raise ValueError("max_turns must be >= 1")
    out = np.empty((n, N_PARAMS), dtype=np.float64)
    memo: dict[tuple[int, int, int], np.ndarray] = {}
    for s in range(n):
        r = rules[s] if per_session else rules
        key = (id(r), int(sizes[s]), int(turns[s]))
        row = memo.get(key)
        if row is None:
            row = memo[key] = rule_params(r, key[1], key[2])
        out[s] = row
    return out


def session_offsets(packed: PackedGraphs, graph_of: np.ndarray) -> np.ndarray:
    """``s_off`` [S + 1]: session s owns state rows ``s_off[s]..s_off[s+1]`` (its graph's size)."""
    sizes = packed.sizes[np.asarray(graph_of, dtype=np.int64)]
    off = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    return off


def pack_states(
    packed: PackedGraphs,
    graph_of: np.ndarray,
    states: Sequence[Mapping[str, int]] | None,
    carries: Sequence[Mapping[str, float] | None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(s_off, state int8, carry float64)``; ids missing from a mapping read as unaware / 0.0."""
    graph_of = np.asarray(graph_of, dtype=np.int64)
    s_off = session_offsets(packed, graph_of)
    state = np.zeros(s_off[-1], dtype=STATE_DTYPE)
    carry = np.zeros(s_off[-1], dtype=np.float64)
    for s, g in enumerate(graph_of):
        ids = packed.ids[g]
        o = s_off[s]
        if states is not None and states[s]:
            st = states[s]
            state[o : o + len(ids)] = [st.get(v, 0) for v in ids]
        if carries is not None and carries[s]:
            ca = carries[s]
            carry[o : o + len(ids)] = [ca.get(v, 0.0) for v in ids]
    return s_off, state, carry


def unpack_states(
    packed: PackedGraphs, graph_of: np.ndarray, s_off: np.ndarray, state: np.ndarray, carry: np.ndarray | None = None
) -> list[tuple[dict[str, int], dict[str, float]]]:
    """Per session ``({id: state}, {id: carry})`` in node order (carries empty if ``carry`` is None)."""
    out = []
    for s, g in enumerate(np.asarray(graph_of)):
        ids = packed.ids[g]
        o = s_off[s]
        st = dict(zip(ids, state[o : o + len(ids)].tolist()))
        ca = dict(zip(ids, carry[o : o + len(ids)].tolist())) if carry is not None else {}
        out.append((st, ca))
    return out


@dataclass(frozen=True)
class PackedSignals:
    """Signal entries of many segments, flattened in signal-list order.

    Segment k is ``off[k]..off[k+1]``. For one turn of S sessions, segment s is session s; for
    trajectories, segment ``j * t_max + t`` is turn t (0-based) of trajectory j, and
    ``n_turns[j]`` says how many of its segments are turns.
    """

    off: np.ndarray  # int64 [segments + 1]
    node: np.ndarray  # int32: local node index, NOT_IN_GRAPH or NO_ID
    tq: np.ndarray  # int8 TQ_* code
    attempt: np.ndarray  # int8 ATTEMPT_* code
    role: np.ndarray  # int8: 1 = confirmed_incorrect_no_explanation
    t_max: int = 1
    n_turns: np.ndarray | None = None  # int64 [trajectories]
    graph_of: np.ndarray | None = None  # int64 [trajectories]: the graph whose indices node uses

    @property
    def n_entries(self) -> int:
        return int(self.off[-1])


def _encode(index: Mapping[str, int], entries: Sequence[SignalEntry], node, tq, att, role, at: int) -> int:
    for e in entries:
        node[at] = NO_ID if e.id is None else index.get(e.id, NOT_IN_GRAPH)
        tq[at] = e.tq_code
        att[at] = e.attempt_code
        role[at] = e.assistant_response_role == INCORRECT_NO_EXPLANATION
        at += 1
    return at


def _alloc(n: int):
    return (
        np.empty(n, dtype=NODE_DTYPE),
        np.empty(n, dtype=CODE_DTYPE),
        np.empty(n, dtype=CODE_DTYPE),
        np.empty(n, dtype=CODE_DTYPE),
    )


def pack_turn(
    packed: PackedGraphs,
    graph_of: np.ndarray,
    signal_lists: Sequence[Sequence[SignalEntry]],
    sessions: Sequence[int] | None = None,
) -> PackedSignals:
    """One turn's signal list per session (ids resolved against that session's graph). With
    ``sessions``, ``signal_lists[k]`` is session ``sessions[k]``'s and every other session's list
    is empty: the cost in Python is that of the sessions named, not of the whole batch."""
    graph_of = np.asarray(graph_of, dtype=np.int64)
    n = graph_of.shape[0]
    if sessions is None:
        if len(signal_lists) != n:
            raise ValueError(f"{len(signal_lists)} signal lists for {n} sessions")
        sessions = range(n)
    elif len(signal_lists) != len(sessions):
        raise ValueError(f"{len(signal_lists)} signal lists for {len(sessions)} sessions")
    lengths = np.zeros(n, dtype=np.int64)
    lengths[np.asarray(sessions, dtype=np.int64)] = [len(x) for x in signal_lists]
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    node, tq, att, role = _alloc(int(off[-1]))
    for s, entries in zip(sessions, signal_lists):
        _encode(packed.index[graph_of[s]], entries, node, tq, att, role, int(off[s]))
    return PackedSignals(off, node, tq, att, role, 1, None, graph_of)


def pack_picked(packed: PackedGraphs, graphs: Sequence[int], signal_lists: Sequence[Sequence[SignalEntry]]) -> PackedSignals:
    """One turn's signal lists of a few picked sessions, list ``k`` read against graph ``graphs[k]``
    (segment ``k`` of the result): what ``update.run_picked`` reads, packed with as few array
    operations as there are arrays."""
    if len(signal_lists) != len(graphs):
        raise ValueError(f"{len(signal_lists)} signal lists for {len(graphs)} sessions")
    bounds = [0]
    for entries in signal_lists:
        bounds.append(bounds[-1] + len(entries))
    node, tq, att, role = _alloc(bounds[-1])
    for g, entries, at in zip(graphs, signal_lists, bounds):
        _encode(packed.index[g], entries, node, tq, att, role, at)
    return PackedSignals(np.array(bounds, dtype=np.int64), node, tq, att, role, 1)


def pack_trajectories(
    packed: PackedGraphs,
    graph_of: np.ndarray,
    trajectories: Sequence[Sequence[Sequence[SignalEntry]]],
    t_max: int | None = None,
) -> PackedSignals:
    """Whole signal trajectories (trajectory j: a list of per-turn signal lists over graph ``graph_of[j]``)."""
    graph_of = np.asarray(graph_of, dtype=np.int64)
    if len(trajectories) != graph_of.shape[0]:
        raise ValueError(f"{len(trajectories)} trajectories for {graph_of.shape[0]} graph indices")
    n_turns = np.array([len(t) for t in trajectories], dtype=np.int64)
    longest = int(n_turns.max(initial=0))
    t_max = max(longest, 1) if t_max is None else t_max
    if longest > t_max:
        raise ValueError(f"a trajectory has {longest} turns, more than t_max={t_max}")
    lengths = np.zeros(len(trajectories) * t_max, dtype=np.int64)
    for j, turns in enumerate(trajectories):
        for t, entries in enumerate(turns):
            lengths[j * t_max + t] = len(entries)
    off = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    node, tq, att, role = _alloc(int(off[-1]))
    at = 0
    for j, turns in enumerate(trajectories):
        index = packed.index[graph_of[j]]
        for entries in turns:
            at = _encode(index, entries, node, tq, att, role, at)
    return PackedSignals(off, node, tq, att, role, t_max, n_turns, graph_of)


def counters_dict(row: np.ndarray) -> dict[str, float]:
    """One counters row as ``{name: value}`` (COUNTERS order)."""
    return dict(zip(COUNTERS, row.tolist()))


__all__ = [
    "CODE_DTYPE",
    "NODE_DTYPE",
    "PackedGraphs",
    "PackedSignals",
    "STATE_DTYPE",
    "counters_dict",
    "pack_graphs",
    "pack_picked",
    "pack_states",
    "pack_trajectories",
    "pack_turn",
    "params_matrix",
    "rule_params",
    "session_offsets",
    "unpack_states",
]
