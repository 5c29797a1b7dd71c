"""The kernel over many sessions at once: the batched API the simulation loop and the sweep engine call.

* ``BatchState``: S live sessions (any mix of graphs and rule settings); ``step`` advances them
  one turn per call (the simulation loop: signals arrive turn by turn).
* ``run_batch``: replays whole signal trajectories for many sessions in one kernel call (replays
  and counterfactual sweeps); ``run_packed`` is the same on already packed arrays, so a sweep packs
  graphs and trajectories once and shares them across rule settings via ``graph_of``/``traj_of``.

Results are float64 counter arrays with columns ``COUNTERS`` (identical to the plain-Python
TurnUpdate + TurnMetrics values) plus per-node post-turn states and carries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numba
import numpy as np

from ray_knowsim.kernels import update as K
from ray_knowsim.kernels.pack import (
    PackedGraphs,
    PackedSignals,
    pack_graphs,
    pack_picked,
    pack_states,
    pack_trajectories,
    pack_turn,
    params_matrix,
    session_offsets,
    unpack_states,
)
from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import RuleConfig

COUNTERS = K.COUNTERS
COUNTER_INDEX: dict[str, int] = {name: i for i, name in enumerate(COUNTERS)}
#: ``parallel=None`` uses numba's threads only from this many sessions up (thread start-up and
#: chunking cost more than they save below it), and only when RAY_KNOWSIM_KERNEL_THREADS=1: on a
#: shared machine, or in Ray workers that each already own a core, threads oversubscribe the CPUs
#: (measured on the shared 2-core dev machine: threaded 0.67x the serial speed).
PARALLEL_MIN_SESSIONS = 2000
_TWO = 2.0  # passed at run time: see the module docstring of kernels.update
_NO_HIST_STATE = np.empty((0, 0), dtype=np.int8)  # "do not record per-turn rows"
_NO_HIST_CARRY = np.empty((0, 0), dtype=np.float64)


def _use_parallel(parallel: bool | None, n_sessions: int) -> bool:
    if parallel is None:
        opted_in = os.environ.get("RAY_KNOWSIM_KERNEL_THREADS") == "1"
        return opted_in and n_sessions >= PARALLEL_MIN_SESSIONS and numba.get_num_threads() > 1
    return parallel


def _longest(signals: PackedSignals) -> int:
    """Length of the longest signal list (sizes the kernel's ranking scratch)."""
    return max(int(np.diff(signals.off).max(initial=0)), 1)


def _kernel(parallel: bool | None, n_sessions: int, *args) -> None:
    """Run the serial or the threaded kernel on the argument list of ``update.run_range`` minus lo/hi."""
    if _use_parallel(parallel, n_sessions):
        K.run_parallel(*args, 8 * numba.get_num_threads())
    else:
        K.run_serial(*args)


def _dedupe_graphs(graphs: Sequence[GraphIndex]) -> tuple[list[GraphIndex], np.ndarray]:
    """Distinct graph objects (by identity) and each session's index into them."""
    seen: dict[int, int] = {}
    distinct: list[GraphIndex] = []
    graph_of = np.empty(len(graphs), dtype=np.int64)
    for s, g in enumerate(graphs):
        k = seen.get(id(g))
        if k is None:
            k = seen[id(g)] = len(distinct)
            distinct.append(g)
        graph_of[s] = k
    return distinct, graph_of


class BatchState:
    """S sessions advanced together, one turn per ``step``.

    ``graphs`` holds one GraphIndex per session (sessions of one item may share the object; it is
    packed once); ``rules`` one RuleConfig for all or one per session. ``initial``/``carries`` map
    graph ids to states / fractional carries (missing ids: unaware / 0.0). ``max_turns`` feeds only
    temporal decay (as in ``apply_turn``). ``parallel``: True runs sessions on numba's threads,
    False in the calling thread, None decides by PARALLEL_MIN_SESSIONS / RAY_KNOWSIM_KERNEL_THREADS.
    Not thread-safe: one caller steps a batch at a time.
    """

    def __init__(
        self,
        graphs: Sequence[GraphIndex],
        rules: RuleConfig | Sequence[RuleConfig],
        initial: Sequence[Mapping[str, int]] | None = None,
        carries: Sequence[Mapping[str, float] | None] | None = None,
        *,
        max_turns: int | Sequence[int] = 15,
        parallel: bool | None = None,
    ) -> None:
        distinct, graph_of = _dedupe_graphs(graphs)
        packed = pack_graphs(distinct)
        s_off, state, carry = pack_states(packed, graph_of, initial, carries)
        params = params_matrix(rules, packed.sizes[graph_of], max_turns)
        self._init(packed, graph_of, params, s_off, state, carry, parallel)

    @classmethod
    def from_arrays(
        cls,
        packed: PackedGraphs,
        graph_of: np.ndarray,
        params: np.ndarray,
        state: np.ndarray | None = None,
        carry: np.ndarray | None = None,
        *,
        turn: np.ndarray | int = 1,
        parallel: bool | None = None,
    ) -> "BatchState":
        """Wrap already packed arrays (state/carry are copied; zeros when None)."""
        self = cls.__new__(cls)
        graph_of = np.ascontiguousarray(graph_of, dtype=np.int64)
        s_off = session_offsets(packed, graph_of)
        rows = int(s_off[-1])
        state = np.zeros(rows, np.int8) if state is None else np.array(state, dtype=np.int8)
        carry = np.zeros(rows, np.float64) if carry is None else np.array(carry, dtype=np.float64)
        self._init(packed, graph_of, np.ascontiguousarray(params, dtype=np.float64), s_off, state, carry, parallel)
        self.turn[:] = turn
        return self

    def _init(self, packed, graph_of, params, s_off, state, carry, parallel) -> None:
        if params.shape != (graph_of.shape[0], K.N_PARAMS):
            raise ValueError(f"params must be [S, {K.N_PARAMS}], got {params.shape}")
        if state.shape[0] != s_off[-1] or carry.shape[0] != s_off[-1]:
            raise ValueError("state/carry rows do not match the sessions' graph sizes")
        self.packed = packed
        self.graph_of = graph_of
        self.params = params
        self.s_off = s_off
        self.state = state  # int8 [rows], updated in place by step()
        self.carry = carry  # float64 [rows]
        self.turn = np.ones(graph_of.shape[0], dtype=np.int64)  # number of each session's next turn
        self.parallel = parallel
        self._max_n = max(int(packed.sizes.max(initial=0)), 1)
        self._traj_of = np.arange(graph_of.shape[0], dtype=np.int64)  # session s reads signal segment s
        self._graph_list: list[int] = graph_of.tolist()  # graph_of as ints: step_sessions looks sessions up one by one

    @property
    def n_sessions(self) -> int:
        return int(self.graph_of.shape[0])

    def step(
        self,
        signals: Sequence[Sequence[SignalEntry]] | PackedSignals,
        active: np.ndarray | Sequence[int] | None = None,
    ) -> np.ndarray:
        """Advance sessions one turn; returns counters ``[S, len(COUNTERS)]``.

        ``signals``: one signal list per session (or ``pack_turn`` output). ``active`` (session
        indices or a bool mask) limits the turn to those sessions; the others keep their state,
        carry and turn number, and their counter rows are NaN.
        """
        packed_sig = signals if isinstance(signals, PackedSignals) else pack_turn(self.packed, self.graph_of, signals)
        if packed_sig.t_max != 1 or packed_sig.off.shape[0] != self.n_sessions + 1:
            raise ValueError(f"signals must be one turn for each of the {self.n_sessions} sessions (pack_turn)")
        n = self.n_sessions
        if active is None:
            n_turns = np.ones(n, dtype=np.int64)
        else:
            a = np.asarray(active)
            n_turns = np.zeros(n, dtype=np.int64)
            n_turns[np.flatnonzero(a) if a.dtype == bool else a.astype(np.int64)] = 1
        out = np.full((n, 1, K.N_COUNTERS), np.nan)
        _kernel(
            self.parallel,
            int(n_turns.sum()),
            self.graph_of, self.packed.node_off, self.packed.pre_off, self.packed.pre_idx, self.packed.upd,
            self.packed.depth, self.s_off, self.state, self.carry, self.params, self.turn, self._traj_of, n_turns,
            packed_sig.off, packed_sig.node, packed_sig.tq, packed_sig.attempt, packed_sig.role,
            out, _NO_HIST_STATE, _NO_HIST_CARRY, self._max_n, _longest(packed_sig), _TWO,
        )  # fmt: skip
        self.turn += n_turns
        return out[:, 0, :]

    def step_sessions(self, sessions: Sequence[int], signals: Sequence[Sequence[SignalEntry]]) -> np.ndarray:
        """Advance only ``sessions`` (distinct indices) one turn, session ``sessions[k]`` with
        ``signals[k]``; returns their counters ``[len(sessions), len(COUNTERS)]`` in that order.

        A micro-batcher steps whatever few sessions are ready in a batch of thousands, so this call
        costs what the named sessions cost, not the batch: only their signals are packed, and one
        kernel call (``update.run_picked``) steps just them, in the calling thread (a handful of
        sessions never pays for threads). The kernel reads nothing of one session while stepping
        another, so this is exactly :meth:`step` with an ``active`` list (tests/kernels/test_pack.py)."""
        picked = [int(s) for s in sessions]
        if len(set(picked)) != len(picked):
            raise ValueError("step_sessions: a session is named twice")
        if picked and (min(picked) < 0 or max(picked) >= self.n_sessions):
            raise IndexError(f"step_sessions: a session index outside 0..{self.n_sessions - 1}")
        packed_sig = pack_picked(self.packed, [self._graph_list[s] for s in picked], signals)
        return K.run_picked(
            np.array(picked, dtype=np.int64), self.graph_of, self.packed.node_off, self.packed.pre_off,
            self.packed.pre_idx, self.packed.upd, self.packed.depth, self.s_off, self.state, self.carry, self.params,
            self.turn, packed_sig.off, packed_sig.node, packed_sig.tq, packed_sig.attempt, packed_sig.role,
            self._max_n, _TWO,
        )  # fmt: skip

    def session(self, s: int) -> tuple[dict[str, int], dict[str, float]]:
        """Session s's ``({id: state}, {id: carry})``."""
        ids = self.packed.ids[self.graph_of[s]]
        o = int(self.s_off[s])
        return (
            dict(zip(ids, self.state[o : o + len(ids)].tolist())),
            dict(zip(ids, self.carry[o : o + len(ids)].tolist())),
        )

    def sessions(self) -> list[tuple[dict[str, int], dict[str, float]]]:
        return unpack_states(self.packed, self.graph_of, self.s_off, self.state, self.carry)


@dataclass
class BatchResult:
    """Whole-trajectory results of S sessions.

    ``counters[s, t]`` is turn t+1 of session s (NaN beyond ``n_turns[s]``); ``state``/``carry``
    hold the final rows; ``state_hist[t]``/``carry_hist[t]`` the rows after turn t+1 (only with
    ``record_states``; a session's rows beyond its last turn are left as they were).
    """

    packed: PackedGraphs
    graph_of: np.ndarray
    s_off: np.ndarray
    n_turns: np.ndarray
    counters: np.ndarray  # float64 [S, T, len(COUNTERS)]
    state: np.ndarray
    carry: np.ndarray
    state_hist: np.ndarray | None = None
    carry_hist: np.ndarray | None = None
    initial_state: np.ndarray | None = field(default=None, repr=False)

    def counter(self, name: str) -> np.ndarray:
        """``[S, T]`` values of one counter."""
        return self.counters[:, :, COUNTER_INDEX[name]]

    def session_rows(self, s: int) -> slice:
        return slice(int(self.s_off[s]), int(self.s_off[s + 1]))

    def final(self, s: int) -> tuple[dict[str, int], dict[str, float]]:
        ids = self.packed.ids[self.graph_of[s]]
        r = self.session_rows(s)
        return dict(zip(ids, self.state[r].tolist())), dict(zip(ids, self.carry[r].tolist()))

    def after_turn(self, s: int, t: int) -> tuple[dict[str, int], dict[str, float]]:
        """States and carries after turn ``t`` (1-based) of session s; needs ``record_states``."""
        if self.state_hist is None or self.carry_hist is None:
            raise ValueError("run with record_states=True to keep per-turn states")
        if not 1 <= t <= self.n_turns[s]:
            raise IndexError(f"session {s} has turns 1..{self.n_turns[s]}, not {t}")
        ids = self.packed.ids[self.graph_of[s]]
        r = self.session_rows(s)
        return dict(zip(ids, self.state_hist[t - 1, r].tolist())), dict(zip(ids, self.carry_hist[t - 1, r].tolist()))


def run_packed(
    packed: PackedGraphs,
    graph_of: np.ndarray,
    params: np.ndarray,
    signals: PackedSignals,
    traj_of: np.ndarray | None = None,
    state: np.ndarray | None = None,
    carry: np.ndarray | None = None,
    *,
    first_turn: np.ndarray | int = 1,
    record_states: bool = False,
    parallel: bool | None = None,
) -> BatchResult:
    """Replay trajectories on packed arrays: session s (graph ``graph_of[s]``, rule row
    ``params[s]``) plays trajectory ``traj_of[s]`` (default s) from ``state``/``carry`` rows
    (``session_offsets`` layout; zeros when None; copied, not modified). ``first_turn`` numbers
    each session's first replayed turn (temporal decay only); ``parallel`` as in BatchState."""
    graph_of = np.ascontiguousarray(graph_of, dtype=np.int64)
    n = graph_of.shape[0]
    traj_of = np.arange(n, dtype=np.int64) if traj_of is None else np.ascontiguousarray(traj_of, dtype=np.int64)
    if signals.n_turns is None or signals.graph_of is None:
        raise ValueError("signals must come from pack_trajectories")
    if traj_of.shape != (n,) or (n and (traj_of.min() < 0 or traj_of.max() >= signals.n_turns.shape[0])):
        raise ValueError("traj_of must give each session a trajectory index")
    if np.any(signals.graph_of[traj_of] != graph_of):
        raise ValueError("a session's trajectory was packed against a different graph")
    params = np.ascontiguousarray(params, dtype=np.float64)
    if params.shape != (n, K.N_PARAMS):
        raise ValueError(f"params must be [S, {K.N_PARAMS}], got {params.shape}")
    s_off = session_offsets(packed, graph_of)
    rows = int(s_off[-1])
    state = np.zeros(rows, np.int8) if state is None else np.array(state, dtype=np.int8)
    carry = np.zeros(rows, np.float64) if carry is None else np.array(carry, dtype=np.float64)
    if state.shape != (rows,) or carry.shape != (rows,):
        raise ValueError(f"state/carry must have {rows} rows")
    initial = state.copy()
    t_max = signals.t_max
    n_turns = signals.n_turns[traj_of]
    counters = np.full((n, t_max, K.N_COUNTERS), np.nan)
    hist_rows = t_max if record_states else 0
    state_hist = np.empty((hist_rows, rows), dtype=np.int8)
    carry_hist = np.empty((hist_rows, rows), dtype=np.float64)
    if record_states:  # rows past a session's last turn keep its final values
        state_hist[:] = state
        carry_hist[:] = carry
    first = np.ascontiguousarray(np.broadcast_to(np.asarray(first_turn, dtype=np.int64), (n,)))
    _kernel(
        parallel,
        n,
        graph_of, packed.node_off, packed.pre_off, packed.pre_idx, packed.upd, packed.depth,
        s_off, state, carry, params, first, traj_of, signals.n_turns,
        signals.off, signals.node, signals.tq, signals.attempt, signals.role,
        counters, state_hist, carry_hist,
        max(int(packed.sizes.max(initial=0)), 1), _longest(signals), _TWO,
    )  # fmt: skip
    if record_states:
        _fill_after_last_turn(state_hist, carry_hist, s_off, n_turns, state, carry)
    return BatchResult(
        packed, graph_of, s_off, n_turns, counters, state, carry,
        state_hist if record_states else None, carry_hist if record_states else None, initial,
    )  # fmt: skip


def _fill_after_last_turn(state_hist, carry_hist, s_off, n_turns, state, carry) -> None:
    """History rows after a session's last turn repeat its final state (the kernel skips them)."""
    for s in np.flatnonzero(n_turns < state_hist.shape[0]):
        r = slice(int(s_off[s]), int(s_off[s + 1]))
        state_hist[n_turns[s] :, r] = state[r]
        carry_hist[n_turns[s] :, r] = carry[r]


def run_batch(
    graphs: Sequence[GraphIndex],
    rules: RuleConfig | Sequence[RuleConfig],
    initial: Sequence[Mapping[str, int]] | None,
    signal_lists: Sequence[Sequence[Sequence[SignalEntry]]],
    *,
    carries: Sequence[Mapping[str, float] | None] | None = None,
    max_turns: int | Sequence[int] | None = None,
    record_states: bool = False,
    parallel: bool | None = None,
) -> BatchResult:
    """``run_trajectory`` for many sessions at once: session s replays ``signal_lists[s]`` (one
    signal list per turn) over ``graphs[s]`` under ``rules`` (one or one per session).
    ``max_turns`` (temporal decay only) defaults per session to its number of turns, as in
    ``run_trajectory``."""
    distinct, graph_of = _dedupe_graphs(graphs)
    packed = pack_graphs(distinct)
    signals = pack_trajectories(packed, graph_of, signal_lists)
    if max_turns is None:
        max_turns = np.maximum(signals.n_turns, 1)
    params = params_matrix(rules, packed.sizes[graph_of], max_turns)
    _, state, carry = pack_states(packed, graph_of, initial, carries)
    return run_packed(packed, graph_of, params, signals, None, state, carry, record_states=record_states, parallel=parallel)


__all__ = ["COUNTERS", "COUNTER_INDEX", "BatchResult", "BatchState", "run_batch", "run_packed"]
