"""Counterfactual re-scoring: replay recorded signals under other rules, one row per (setting, conversation).

The one interface the runner (and the benchmark) call is ``rescore(prepared, settings, plan)``;
``backend`` picks how: ``"kernel"`` packs the conversations once and replays every (setting,
conversation) pair in batched numba calls (``ray_knowsim.kernels.sessions.run_packed``) with
per-session rule parameters, then summarises the counters vectorised (``sweep.metrics``);
``"python"`` runs the plain-Python rules (``rules.trajectory``) pair by pair. Both give the same
rows (tests/sweep/test_rescore.py), so the Python path is the reference and the baseline of
``scripts/bench/sweep.py``.

Initial states are the recorded ones (``keep``), or re-sampled per conversation with a seed that
depends only on (init_seed, conversation key) -- common random numbers, so two settings with the
same initial-state rules start every conversation from the same state.
"""

from __future__ import annotations

import logging

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.states import KNOWS_WELL
from ray_knowsim.rules.config import RuleConfig
from ray_knowsim.rules.final_metrics import _f1, legacy_absorbed_total, raw_progress
from ray_knowsim.rules.init_state import session_initial_states
from ray_knowsim.rules.termination import mastery_turn
from ray_knowsim.rules.trajectory import run_trajectory
from ray_knowsim.sweep.conversation import META_COLUMNS, Conversation
from ray_knowsim.sweep.metrics import FLOAT_COLUMNS, FM_COLUMNS, INT_COLUMNS, NULLABLE_INT, STOP_REASONS, Termination, summarize
from ray_knowsim.sweep.space import Setting, changes_init, init_key

log = logging.getLogger(__name__)

#: sessions per kernel call (bounds the [S, T, counters] float64 array to tens of MB)
KERNEL_SESSIONS_PER_CALL = 8192


def kernel_available() -> bool:
    """Whether the numba kernel imports here. numba is a dependency, so False means a broken
    install; the reason is logged."""
    try:
        from ray_knowsim.kernels import sessions  # noqa: F401
    except ImportError as exc:
        log.warning("the numba kernel cannot be imported (%s): a broken install", exc)
        return False
    return hasattr(sessions, "run_packed")


def pick_backend(backend: str) -> str:
    """``auto`` is the kernel: the sweep never switches to the Python loop quietly. A kernel that
    cannot be imported is an error naming why; ``python`` must be asked for."""
    if backend in ("auto", "kernel"):
        try:
            from ray_knowsim.kernels import sessions
        except ImportError as exc:
            raise RuntimeError(f"the sweep's numba kernel cannot be imported ({exc}); fix the install, or "
                               "ask for execution.backend: python explicitly") from exc
        if not hasattr(sessions, "run_packed"):
            raise RuntimeError("ray_knowsim.kernels.sessions has no run_packed: a stale or broken install")
        return "kernel"
    return backend


@dataclass(frozen=True)
class InitPlan:
    """How each (setting, conversation) gets its initial state."""

    mode: str = "keep"  # keep | resample | resample_if_changed
    seed: int = 0
    default: RuleConfig | None = None  # needed by resample_if_changed

    def resamples(self, rules: RuleConfig) -> bool:
        if self.mode == "keep":
            return False
        if self.mode == "resample":
            return True
        return self.default is None or changes_init(rules, self.default)


def resampled_states(graph: GraphIndex, level: str, key: str, rules: RuleConfig, plan: InitPlan, cache: dict | None = None) -> dict[str, int]:
    """Initial states drawn for one conversation (``key``) under ``rules``: seeded by (init seed,
    key) only, so settings with the same initial-state rules draw the same states."""
    memo = (init_key(rules), key)
    if cache is not None and memo in cache:
        return cache[memo]
    states = session_initial_states(graph, level, rules, f"{plan.seed}/{key}")  # the seed string is part of the sweep's identity
    if cache is not None:
        cache[memo] = states
    return states


def initial_for(
    conv: Conversation, rules: RuleConfig, plan: InitPlan, cache: dict | None = None
) -> tuple[dict[str, int], dict[str, float] | None]:
    """(states, carries) a session starts from."""
    if not plan.resamples(rules):
        return conv.initial, conv.carries
    return resampled_states(conv.graph, conv.meta.get("knowledge_level", ""), conv.key, rules, plan, cache), None


# --- prepared conversations (what a task receives) ----------------------------------------------


@dataclass
class Prepared:
    """A block of conversations as a task receives it.

    Why arrays only: a task that unpickles Conversation objects (graph indexes, per-turn signal
    objects) spends a large multiple of its arrays' transfer time doing it, and a sweep ships each
    block to every task that re-scores it. The kernel backend therefore carries numpy arrays (the
    packed graphs and signals, initial rows, horizons, KG bases, the rows' label codes) and,
    only when initial states are re-sampled, the few distinct graph indexes plus each
    conversation's key (what the seeded draw needs). The plain-Python backend replays
    ``SignalEntry`` lists and carries the conversations themselves (its replay costs ~1,000x
    the transfer).
    """

    backend: str
    positions: np.ndarray  # int32 per conversation: its index in the source (rows' ``conversation``)
    meta_codes: dict[str, np.ndarray]  # META column -> int32 code per conversation
    meta_values: dict[str, list[str]]  # META column -> its distinct values, sorted (the codes index them)
    packed: Any = None  # PackedGraphs
    signals: Any = None  # PackedSignals
    graph_of: np.ndarray | None = None  # per conversation
    sizes: np.ndarray | None = None
    state0: np.ndarray | None = None  # concatenated recorded initial rows (conversation order)
    carry0: np.ndarray | None = None
    max_turns: np.ndarray | None = None
    basis0: np.ndarray | None = None  # int8 rows: 1 = the node counts in the KG normalisations (recorded KS)
    extra_h0: np.ndarray | None = None  # per conversation: headroom of initial-KS labels outside the graph
    graphs: list[GraphIndex] | None = None  # kernel + re-sampling: distinct graphs (graph_of indexes them)
    keys: list[str] | None = None  # kernel + re-sampling: conversation keys (seeds of the draws)
    conversations: list[Conversation] | None = None  # python backend only
    _entries: list | None = field(default=None, repr=False)
    _pairs: tuple | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.positions)

    def levels(self) -> list[str]:
        values = self.meta_values["knowledge_level"]
        return [values[k] for k in self.meta_codes["knowledge_level"]]

    def entries(self) -> list:
        """SignalEntry lists per conversation (python backend), built once."""
        if self._entries is None:
            self._entries = [c.entries() for c in self.conversations or []]
        return self._entries


def _meta(convs: Sequence[Conversation]) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    codes, values = {}, {}
    for name in META_COLUMNS:
        column = [c.meta.get(name, "") for c in convs]
        uniq = sorted(set(column))
        index = {v: k for k, v in enumerate(uniq)}
        codes[name] = np.array([index[v] for v in column], dtype=np.int32)
        values[name] = uniq
    return codes, values


def prepare(conversations: Sequence[Conversation], backend: str = "auto", *, resample: bool = True) -> Prepared:
    """Pack ``conversations`` for ``backend``. ``resample=False`` leaves out what drawing new
    initial states needs (the runner passes it when the sweep keeps the recorded states)."""
    backend = pick_backend(backend)
    convs = list(conversations)
    codes, values = _meta(convs)
    prep = Prepared(backend, np.array([c.position for c in convs], dtype=np.int32), codes, values)
    if backend != "kernel":
        prep.conversations = convs
        return prep
    from ray_knowsim.kernels.pack import pack_graphs, pack_states, pack_trajectories

    distinct: dict[int, int] = {}
    graphs = []
    graph_of = np.empty(len(convs), dtype=np.int64)
    for k, c in enumerate(convs):
        g = distinct.get(id(c.graph))
        if g is None:
            g = distinct[id(c.graph)] = len(graphs)
            graphs.append(c.graph)
        graph_of[k] = g
    prep.packed = pack_graphs(graphs)
    prep.graph_of = graph_of
    prep.sizes = prep.packed.sizes[graph_of]
    prep.signals = pack_trajectories(prep.packed, graph_of, [c.turns for c in convs])
    _, prep.state0, prep.carry0 = pack_states(prep.packed, graph_of, [c.initial for c in convs], [c.carries for c in convs])
    prep.max_turns = np.array([c.max_turns for c in convs], dtype=np.int64)
    prep.basis0, prep.extra_h0 = _basis_rows(convs)
    if resample:
        prep.graphs = graphs
        prep.keys = [c.key for c in convs]
    return prep


def _basis_rows(convs: Sequence[Conversation]) -> tuple[np.ndarray, np.ndarray]:
    """The recorded initial KS's labels (``Conversation.basis``, spec §9.1) as a node mask over the
    packed state rows and the headroom of its labels outside the graph, per conversation."""
    masks, extra = [], np.zeros(len(convs), dtype=np.int64)
    for k, c in enumerate(convs):
        if c.basis is None:
            masks.append(np.ones(c.graph.size, dtype=np.int8))
            continue
        index = {v: i for i, v in enumerate(c.graph.ids)}
        m = np.zeros(c.graph.size, dtype=np.int8)
        m[[index[v] for v in c.basis.nodes]] = 1
        masks.append(m)
        extra[k] = sum(KNOWS_WELL - s for s in c.basis.extra if s < KNOWS_WELL)
    return np.concatenate(masks) if masks else np.zeros(0, dtype=np.int8), extra


# --- the interface ------------------------------------------------------------------------------


def rescore(prepared: Prepared | Sequence[Conversation], settings: Sequence[Setting], plan: InitPlan = InitPlan()) -> pa.Table:
    """Rows for every (setting, conversation) pair, setting-major, conversations in block order."""
    prep = prepared if isinstance(prepared, Prepared) else prepare(prepared)
    if not settings or not len(prep):
        return empty_table()
    drawing = [s for s in settings if plan.resamples(s.rules)]
    if drawing:
        if prep.backend == "kernel" and prep.graphs is None:
            raise ValueError("these conversations were prepared with resample=False; the plan re-samples initial states")
        levels = prep.levels()
        for s in drawing:
            for k, level in enumerate(levels):
                if level not in s.rules.init_ratios:
                    key = prep.keys[k] if prep.keys is not None else prep.conversations[k].key
                    raise ValueError(f"conversation {key!r}: cannot re-sample level {level!r}")
    if prep.backend == "kernel":
        cols = _kernel_columns(prep, settings, plan)
    else:
        cols = _python_columns(prep, settings, plan)
    return to_table(prep, settings, cols)


# --- kernel backend ------------------------------------------------------------------------------


def _param_rows(prep: Prepared, rules: RuleConfig) -> np.ndarray:
    """``params`` rows of one setting for the chunk's conversations (tau and the hinge size
    depend on the graph size, temporal decay on the horizon: one row per distinct pair)."""
    from ray_knowsim.kernels.pack import rule_params

    if prep._pairs is None:
        uniq, inverse = np.unique(np.stack([prep.sizes, prep.max_turns], axis=1), axis=0, return_inverse=True)
        prep._pairs = (uniq, inverse.reshape(-1))
    uniq, inverse = prep._pairs
    rows = np.stack([rule_params(rules, int(n), int(t)) for n, t in uniq])
    return rows[inverse]


def _initial_rows(
    prep: Prepared, slab: Sequence[Setting], plan: InitPlan, cache: dict
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(state, carry, basis mask) rows and the per-session extra headroom of the slab's sessions."""
    if not any(plan.resamples(s.rules) for s in slab):
        reps = len(slab)
        return np.tile(prep.state0, reps), np.tile(prep.carry0, reps), np.tile(prep.basis0, reps), np.tile(prep.extra_h0, reps)
    states, carries, masks, extras = [], [], [], []
    levels = prep.levels()
    for s in slab:
        if not plan.resamples(s.rules):
            states.append(prep.state0)
            carries.append(prep.carry0)
            masks.append(prep.basis0)
            extras.append(prep.extra_h0)
            continue
        # a re-sampled state covers the graph's nodes
        masks.append(np.ones_like(prep.basis0))
        extras.append(np.zeros_like(prep.extra_h0))
        drawn = []
        for k, level in enumerate(levels):
            graph = prep.graphs[prep.graph_of[k]]
            draw = resampled_states(graph, level, prep.keys[k], s.rules, plan, cache)
            drawn.append(np.array([draw[v] for v in graph.ids], dtype=np.int8))
        states.append(np.concatenate(drawn))
        carries.append(np.zeros_like(prep.carry0))
    return np.concatenate(states), np.concatenate(carries), np.concatenate(masks), np.concatenate(extras)


def _kernel_columns(prep: Prepared, settings: Sequence[Setting], plan: InitPlan) -> dict[str, np.ndarray]:
    from ray_knowsim.kernels.sessions import COUNTER_INDEX, run_packed
    from ray_knowsim.kernels.pack import session_offsets

    n_conv = len(prep)
    per_call = max(1, KERNEL_SESSIONS_PER_CALL // n_conv)
    parts: list[dict[str, np.ndarray]] = []
    cache: dict = {}
    for start in range(0, len(settings), per_call):
        slab = settings[start : start + per_call]
        reps = len(slab)
        graph_of = np.tile(prep.graph_of, reps)
        traj_of = np.tile(np.arange(n_conv, dtype=np.int64), reps)
        params = np.concatenate([_param_rows(prep, s.rules) for s in slab])
        state, carry, basis, extra_h = _initial_rows(prep, slab, plan, cache)
        res = run_packed(prep.packed, graph_of, params, prep.signals, traj_of, state, carry, parallel=False)
        s_off = session_offsets(prep.packed, graph_of)
        starts = s_off[:-1]
        # KG normalisations over the initial KS's labels (spec §9.1): masked nodes + labels outside the graph
        counted = basis != 0
        headroom = np.add.reduceat(np.where(counted & (state < KNOWS_WELL), KNOWS_WELL - state.astype(np.int64), 0), starts)
        headroom += extra_h
        gained = np.maximum(0, res.state.astype(np.int64) - state.astype(np.int64))
        progress = np.add.reduceat(np.where(counted, gained, 0), starts)
        n_ius = np.tile(prep.sizes, reps)
        term = Termination.repeat([s.rules.termination for s in slab], n_conv)
        cols = summarize(res.counters, COUNTER_INDEX, res.n_turns, headroom, n_ius, term)
        cols["tau"] = params[:, _tau_column()].astype(np.int64)
        cols["raw_state_progress"] = progress.astype(np.int64)
        parts.append(cols)
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _tau_column() -> int:
    from ray_knowsim.kernels.update import P_TAU

    return P_TAU


# --- plain-Python backend ------------------------------------------------------------------------


def python_row(traj, rules: RuleConfig) -> dict[str, Any]:
    """One row from a ``rules.trajectory.Trajectory`` (the executable definition of every column)."""
    row: dict[str, Any] = dict(traj.summary(rules))
    metrics = traj.metrics
    den = float(sum(m.ic_denominator for m in metrics))
    zpd = float(sum(m.zpd_size for m in metrics))
    row["dc_any"] = _f1(sum(m.absorbed_ic_numerator_any_partial for m in metrics), den, zpd)[2]
    row["dc_legacy"] = _f1(legacy_absorbed_total(metrics), den, zpd)[2]
    row["tau"] = traj.tau
    row["turns"] = len(traj.updates)
    row["mastery_turn"] = mastery_turn(traj.stop_signals(), rules.termination)
    row["overloaded_turns"] = sum(1 for u in traj.updates if u.overload)
    row["raw_state_progress"] = raw_progress(traj.initial, traj.final, traj.basis)
    row["new_ius"] = sum(m.new_ius for m in metrics)
    row["disallowed"] = sum(m.disallowed for m in metrics)
    for col in FM_COLUMNS:
        row[col] = sum(m.failure_modes.get(col[3:], 0) for m in metrics)
    return row


def _python_columns(prep: Prepared, settings: Sequence[Setting], plan: InitPlan) -> dict[str, np.ndarray]:
    entries = prep.entries()
    rows: list[dict[str, Any]] = []
    cache: dict = {}
    for s in settings:
        for c, signal_lists in zip(prep.conversations, entries):
            initial, carries = initial_for(c, s.rules, plan, cache)
            basis = None if plan.resamples(s.rules) else c.basis  # a re-sampled state covers the graph
            traj = run_trajectory(
                c.graph, initial, signal_lists, s.rules, initial_carries=carries, max_turns=c.max_turns, basis=basis
            )
            rows.append(python_row(traj, s.rules))
    cols: dict[str, np.ndarray] = {}
    for name in FLOAT_COLUMNS:
        cols[name] = np.array([r[name] for r in rows], dtype=np.float64)
    for name in INT_COLUMNS:
        cols[name] = np.array([r[name] or 0 for r in rows], dtype=np.int64)
    cols["early_stop_reason"] = np.array([STOP_REASONS.index(r["early_stop_reason"]) for r in rows], dtype=np.int8)
    return cols


# --- rows as an Arrow table ----------------------------------------------------------------------

_REASON_DICT = pa.array([r for r in STOP_REASONS if r is not None], type=pa.string())


def row_schema() -> pa.Schema:
    fields = [pa.field("setting", pa.int32()), pa.field("conversation", pa.int32())]
    fields += [pa.field(c, pa.dictionary(pa.int32(), pa.string())) for c in META_COLUMNS]
    fields += [pa.field(c, pa.float64()) for c in FLOAT_COLUMNS]
    fields += [pa.field(c, pa.int64(), nullable=c in NULLABLE_INT) for c in INT_COLUMNS]
    fields.append(pa.field("early_stop_reason", pa.dictionary(pa.int32(), pa.string())))
    return pa.schema(fields)


def empty_table() -> pa.Table:
    return row_schema().empty_table()


def to_table(prep: Prepared, settings: Sequence[Setting], cols: dict[str, np.ndarray]) -> pa.Table:
    n_conv = len(prep)
    reps = len(settings)
    conv_idx = np.tile(np.arange(n_conv, dtype=np.int32), reps)
    arrays: dict[str, pa.Array] = {
        "setting": pa.array(np.repeat(np.array([s.index for s in settings], dtype=np.int32), n_conv)),
        "conversation": pa.array(np.tile(prep.positions, reps)),
    }
    for name in META_COLUMNS:
        codes = prep.meta_codes[name]
        arrays[name] = pa.DictionaryArray.from_arrays(pa.array(codes[conv_idx]), pa.array(prep.meta_values[name], type=pa.string()))
    for name in FLOAT_COLUMNS:
        arrays[name] = pa.array(cols[name], type=pa.float64())
    for name in INT_COLUMNS:
        values = cols[name].astype(np.int64)
        mask = values == 0 if name in NULLABLE_INT else None
        arrays[name] = pa.array(values, type=pa.int64(), mask=mask)
    reason = cols["early_stop_reason"].astype(np.int32)
    arrays["early_stop_reason"] = pa.DictionaryArray.from_arrays(
        pa.array(reason - 1, mask=reason == 0, type=pa.int32()), _REASON_DICT
    )
    return pa.table(arrays, schema=row_schema())


__all__ = [
    "KERNEL_SESSIONS_PER_CALL",
    "InitPlan",
    "Prepared",
    "initial_for",
    "kernel_available",
    "pick_backend",
    "prepare",
    "python_row",
    "resampled_states",
    "rescore",
    "row_schema",
    "to_table",
]
