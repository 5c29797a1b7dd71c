"""The per-turn update of many sessions at once: the numba twin of ``rules.update.apply_turn`` +
``rules.turn_metrics.turn_metrics`` (spec §6, §7, §10).

Why a twin: the sweep engine replays thousands of rule settings x conversations; the plain-Python
rules cost ~250 us of CPU per session-turn, this ~1.5 us (scripts/bench/kernel.py). The Python rules stay the
executable truth; ``tests/kernels/test_kernel_equivalence.py`` checks that every state, carry and
counter here is bit-identical to them, so every float below is computed with the same operations in
the same order as the Python (do not "simplify" an expression without rerunning that test).

Layout (built by ``ray_knowsim.kernels.pack``): graphs and sessions are flat arrays.

* graph g owns graph-node rows ``g_node_off[g] .. g_node_off[g+1]``, laid out in node order, so a
  node's local index *is* its ``order``; ``g_pre_off``/``g_pre_idx`` is the per-node prerequisite
  CSR in edge order, duplicates kept, ``-1`` for a prerequisite id that is not a graph node (it
  reads as unaware); ``g_upd`` holds the update order (local indices), ``g_depth`` the depth.
* session s uses graph ``graph_of[s]`` and owns state rows ``s_off[s] .. s_off[s+1]`` of ``state``
  (int8) and ``carry`` (float64), indexed by local node index. They are updated in place.
* a turn's signal entries are ``sig_*[e0:e1]`` in signal-list order: ``sig_node`` (local index, or
  NOT_IN_GRAPH for an id that is not a node, or NO_ID for an entry without an id), ``sig_tq``
  (TQ_* code), ``sig_att`` (ATTEMPT_* code), ``sig_role`` (1 = confirmed_incorrect_no_explanation).
* ``params[s]`` holds the session's rule settings (columns P_*), so one call can mix rule sets.
* scratch (the pre-turn snapshot, per-IU bookkeeping, the hinge ranking) is allocated once per
  ``run_range`` call, sized by ``max_n`` (largest graph) and ``max_seg`` (longest signal list), and
  indexed by local node / entry position: threads never share it, and sessions may share one
  signal trajectory (the sweep layout) because they only read it.
* one kernel family serves both whole replays and the turn-by-turn loop (a turn is a trajectory of
  one segment; an inactive session is given 0 turns): fewer kernels, less compile time. The
  loop's micro-batcher, which steps a few ready sessions of thousands, calls ``run_picked``: the
  same ``session_turn`` for just the sessions named, so its cost follows them, not the batch.

``two`` must be the run-time value 2.0: eta uses ``math.pow(x, two)`` because CPython evaluates
``x**2`` with libm ``pow``, which differs from ``x*x`` (what LLVM folds a constant exponent into) in
about 1 of 1000 doubles on this glibc.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ray_knowsim.schema.results import FAILURE_MODES
from ray_knowsim.rules.turn_metrics import FAILURE_MODE_VARIANTS

#: ``sig_node`` sentinels
NOT_IN_GRAPH = -1  # an id that is not a node of the session's graph: pre-state 0, depth 0, order 0
NO_ID = -2  # an entry without an id: never mentioned, but its attempt still adds load

#: rule-parameter columns of ``params`` (one row per session)
PARAM_NAMES: tuple[str, ...] = (
    "w_state_0", "w_state_1", "w_state_2", "w_state_3",
    "w_reasoning_0", "w_reasoning_1", "w_reasoning_2", "w_reasoning_3",
    "w_articulation",
    "include_attempt_load",
    "tau",  # capacity, already max(floor, round(ratio * |G|)) for the session's graph
    "overload_flag_strict",
    "dropoff_softening",
    "hinge",
    "hinge_n",  # max(1, round(hinge_ratio * |G|)) for the session's graph
    "hinge_tail",
    "reset_carry_on_transition",
    "carry_persists",
    "temporal_decay",
    "max_turns",
)  # fmt: skip
N_PARAMS = len(PARAM_NAMES)
P_WS = PARAM_NAMES.index("w_state_0")
P_WR = PARAM_NAMES.index("w_reasoning_0")
P_WA = PARAM_NAMES.index("w_articulation")
P_INCLUDE_ATTEMPT = PARAM_NAMES.index("include_attempt_load")
P_TAU = PARAM_NAMES.index("tau")
P_STRICT = PARAM_NAMES.index("overload_flag_strict")
P_SOFTENING = PARAM_NAMES.index("dropoff_softening")
P_HINGE = PARAM_NAMES.index("hinge")
P_HINGE_N = PARAM_NAMES.index("hinge_n")
P_HINGE_TAIL = PARAM_NAMES.index("hinge_tail")
P_RESET_CARRY = PARAM_NAMES.index("reset_carry_on_transition")
P_CARRY_PERSISTS = PARAM_NAMES.index("carry_persists")
P_TEMPORAL_DECAY = PARAM_NAMES.index("temporal_decay")
P_MAX_TURNS = PARAM_NAMES.index("max_turns")

#: per-session per-turn counters (columns of the float64 output); names follow TurnUpdate /
#: TurnMetrics, failure modes in rules.turn_metrics order; the last one is extra bookkeeping
COUNTERS: tuple[str, ...] = (
    "comprehension_load",
    "attempt_load",
    "effective_load",
    "overload",  # the recorded flag, 0/1
    "dropoff_active",  # eta < 1, 0/1
    "eta",
    "n_upward_transitions",
    "absorbed_gain",
    "ic_numerator",
    "ic_denominator",
    "zpd_size",
    "absorbed_ic_numerator",
    "absorbed_ic_numerator_any_partial",
    "new_ius",
    "disallowed",
    "familiarity",
    "novelty",
    "engagement",
    "perceived_overload",
    "capacity_load",
    *FAILURE_MODES,
    *FAILURE_MODE_VARIANTS,
    "n_knows_well",  # post-turn IUs at knows_well (termination's mastery share = this / |G|)
)
N_COUNTERS = len(COUNTERS)
C_COMP = COUNTERS.index("comprehension_load")
C_ATT = COUNTERS.index("attempt_load")
C_LOAD = COUNTERS.index("effective_load")
C_OVERLOAD = COUNTERS.index("overload")
C_DROPOFF = COUNTERS.index("dropoff_active")
C_ETA = COUNTERS.index("eta")
C_NUP = COUNTERS.index("n_upward_transitions")
C_GAIN = COUNTERS.index("absorbed_gain")
C_ICNUM = COUNTERS.index("ic_numerator")
C_ICDEN = COUNTERS.index("ic_denominator")
C_ZPD = COUNTERS.index("zpd_size")
C_ABS = COUNTERS.index("absorbed_ic_numerator")
C_ABS_ANY = COUNTERS.index("absorbed_ic_numerator_any_partial")
C_NEW = COUNTERS.index("new_ius")
C_DISALLOWED = COUNTERS.index("disallowed")
C_FAM = COUNTERS.index("familiarity")
C_NOV = COUNTERS.index("novelty")
C_ENG = COUNTERS.index("engagement")
C_PO = COUNTERS.index("perceived_overload")
C_CAP = COUNTERS.index("capacity_load")
C_REDUNDANT = COUNTERS.index("redundant")
C_BLOCKED = COUNTERS.index("prereq_blocked")
C_EFFECTIVE = COUNTERS.index("effective")
C_WASTED = COUNTERS.index("overload_wasted")
C_UNDER = COUNTERS.index("under_absorbed")
C_BLOCKED_MOVED = COUNTERS.index("blocked_but_moved")
C_FLAG_ONLY = COUNTERS.index("wasted_flag_only")
C_CAPPED = COUNTERS.index("capped_in_zpd")
C_KNOWS_WELL = COUNTERS.index("n_knows_well")

#: hinge key layout: weight rank | depth | order; graphs must stay below 2**21 nodes
MAX_GRAPH_NODES = 1 << 21
_KEY_SHIFT_D = 21
_KEY_SHIFT_W = 42

# codes (model.signals / model.states); literals so numba sees constants
_TQ_NOT_MENTIONED = 0
_TQ_SHALLOW = 1
_ATT_REASONING = 1
_ATT_ARTICULATION = 2
_STRUGGLING = 1
_PARTIAL = 2
_KNOWS_WELL = 3


@njit(cache=True)
def _ceiling(states, so, gv, g_pre_off, g_pre_idx):
    """Weakest-prerequisite ceiling (spec §3.1) of graph-node row ``gv`` over ``states[so + local]``."""
    a = g_pre_off[gv]
    b = g_pre_off[gv + 1]
    if a == b:
        return _KNOWS_WELL
    weakest = 127
    for k in range(a, b):
        p = g_pre_idx[k]
        sv = states[so + p] if p >= 0 else 0
        if sv < weakest:
            weakest = sv
    if weakest <= _STRUGGLING:
        return _STRUGGLING
    return _PARTIAL if weakest == _PARTIAL else _KNOWS_WELL


@njit(cache=True)
def _ceiling_any_partial(states, so, gv, g_pre_off, g_pre_idx):
    """The reference metrics helper's ceiling: all prereqs known -> 3, any partial -> 2, else 1."""
    all_known = True
    any_partial = False
    for k in range(g_pre_off[gv], g_pre_off[gv + 1]):
        p = g_pre_idx[k]
        sv = states[so + p] if p >= 0 else 0
        if sv != _KNOWS_WELL:
            all_known = False
        if sv == _PARTIAL:
            any_partial = True
    if all_known:
        return _KNOWS_WELL
    return _PARTIAL if any_partial else _STRUGGLING


@njit(cache=True)
def session_turn(
    turn, p, gn0, n, so, e0, e1,
    g_pre_off, g_pre_idx, g_upd, g_depth,
    sig_node, sig_tq, sig_att, sig_role,
    state, carry, out,
    pre, cpre, last, expl, eff, rank, keys, wrank, two,
):  # fmt: skip
    """Advance one session (graph rows ``gn0..gn0+n``, state rows ``so..so+n``) by one turn and
    write its counters into ``out`` (a row of N_COUNTERS). ``pre``, ``cpre``, ``last``, ``expl``,
    ``eff`` (>= n), ``rank``, ``keys`` (>= e1 - e0) and ``wrank`` (4) are scratch."""
    ws = p[P_WS : P_WS + 4]
    wr = p[P_WR : P_WR + 4]
    tau = p[P_TAU]

    # pre-turn snapshot and its weakest-prerequisite ceilings (Z_t and the failure modes use them)
    for v in range(n):
        pre[v] = state[so + v]
        last[v] = -1
        expl[v] = 0
    for v in range(n):
        cpre[v] = _ceiling(pre, 0, gn0 + v, g_pre_off, g_pre_idx)

    # one pass over the signal list: by_id (last entry per IU), E_t flags, the load sums and the
    # entry-level counters (spec §6.1, §6.2, §7.1, §7.5, §7.6). Summation order (spec §0): the
    # comprehension sum takes the mentions with pre < 3 in list order, then ``n_known`` mentions
    # with pre == 3 (all of weight ws[3], so adding ws[3] n_known times is the same float sequence);
    # the attempt sum runs over every entry, in list order, from 0.0.
    comprehension = 0.0
    attempt = 0.0
    n_known = 0
    include_attempt = p[P_INCLUDE_ATTEMPT] != 0.0
    n_mentioned = 0
    ic_num = 0
    new_ius = 0
    disallowed = 0
    fam = 0
    for e in range(e0, e1):
        node = sig_node[e]
        ps = pre[node] if node >= 0 else 0  # ids outside the graph (and entries without id) read as unaware
        if node >= 0:
            last[node] = e
        if sig_tq[e] != _TQ_NOT_MENTIONED and node != NO_ID:
            n_mentioned += 1
            if ps < _KNOWS_WELL:
                comprehension += ws[ps]
            elif ps == _KNOWS_WELL:
                n_known += 1
            if node < 0:  # an id outside the graph: unaware, no prerequisites, teachable
                ic_num += 1
                new_ius += 1
            else:
                expl[node] += 1  # mention entries of this IU (the reference-format absorbed count)
                teachable = ps < _KNOWS_WELL and cpre[node] >= _PARTIAL
                if teachable:
                    ic_num += 1
                if ps <= _STRUGGLING:
                    new_ius += 1
                    if not teachable:
                        disallowed += 1
                if ps >= _PARTIAL:
                    fam += 1
        if include_attempt:
            if sig_att[e] == _ATT_REASONING:
                attempt += wr[ps]
            elif sig_att[e] == _ATT_ARTICULATION:
                attempt += p[P_WA]
    for _ in range(n_known):
        comprehension += ws[_KNOWS_WELL]
    load = comprehension + attempt

    # 6.3 / 6.4 overload flag and eta
    if p[P_STRICT] != 0.0:
        overload = load > tau
    else:
        overload = load >= tau
    eta = 1.0
    if load > tau:
        x = (load - tau) / (tau * p[P_SOFTENING])
        eta = 1 / (1 + math.pow(x, two))
    if p[P_TEMPORAL_DECAY] != 0.0:
        max_turns = np.int64(p[P_MAX_TURNS])
        eta *= max_turns / (max_turns + turn - 1)
    dropoff_active = eta < 1.0

    # 6.5 hinge: only read under dropoff, so only computed then
    if dropoff_active:
        for v in range(n):
            eff[v] = eta
        if p[P_HINGE] != 0.0:
            # the ranking key (-W_S[pre], depth, order) as one int64: -W_S[pre] becomes the number
            # of states with a strictly larger weight (same order, ties kept), then depth, then order
            for a in range(4):
                wrank[a] = 0
                for b in range(4):
                    if ws[b] > ws[a]:
                        wrank[a] += 1
            m = 0
            for e in range(e0, e1):
                node = sig_node[e]
                if sig_tq[e] != _TQ_NOT_MENTIONED and node != NO_ID:
                    if node >= 0:  # ids outside the graph: state 0, depth 0, order 0
                        key = (wrank[pre[node]] << _KEY_SHIFT_W) | (g_depth[gn0 + node] << _KEY_SHIFT_D) | node
                    else:
                        key = wrank[0] << _KEY_SHIFT_W
                    # stable insertion: entries with an equal key keep signal-list order, as sorted() does
                    j = m - 1
                    while j >= 0 and keys[j] > key:
                        keys[j + 1] = keys[j]
                        rank[j + 1] = rank[j]
                        j -= 1
                    keys[j + 1] = key
                    rank[j + 1] = e
                    m += 1
            top = np.int64(p[P_HINGE_N])
            for r in range(m):
                node = sig_node[rank[r]]
                if node >= 0:  # a later rank of a duplicated id overwrites, as the dict does
                    eff[node] = (1.0 if r < top else p[P_HINGE_TAIL]) * eta

    # 6.6 proposal, cascading ceiling, dropoff, carry -- in update order; ``state`` is ``cur``
    reset = p[P_RESET_CARRY] != 0.0
    persists = p[P_CARRY_PERSISTS] != 0.0
    for k in range(n):
        v = g_upd[gn0 + k]
        prev = np.int64(state[so + v])
        le = last[v]
        tq = sig_tq[le] if le >= 0 else _TQ_NOT_MENTIONED
        if tq == _TQ_NOT_MENTIONED or (tq == _TQ_SHALLOW and prev != 0):
            prop = prev
        else:
            ceil = np.int64(_ceiling(state, so, gn0 + v, g_pre_off, g_pre_idx))
            prop = max(prev, min(prev + 1, ceil))
        c_in = carry[so + v]
        if dropoff_active and prop > prev:
            total = c_in + (prop - prev) * eff[v]
            fl = math.floor(total)
            steps = np.int64(fl)
            new = min(prev + steps, _KNOWS_WELL)
            c = total - fl
            if reset and steps > 0:
                c = 0.0
        else:
            new = prop
            if persists and not (reset and prop > prev):
                c = c_in
            else:
                c = 0.0
        state[so + v] = new
        carry[so + v] = c

    # 6.7 monotonicity (state becomes post), then the node-level counters (spec §7.3-7.4, §10)
    zpd = 0
    n_up = 0
    gain = 0
    absorbed = 0
    absorbed_any = 0
    novel = 0
    redundant = 0
    blocked = 0
    blocked_moved = 0
    effective = 0
    wasted = 0
    under = 0
    flag_only = 0
    capped = 0
    knows_well = 0
    over_tau = load > tau
    for v in range(n):
        le = last[v]
        pv = np.int64(pre[v])
        post = np.int64(state[so + v])
        demoted = le >= 0 and sig_att[le] == _ATT_REASONING and sig_role[le] != 0 and pv < _KNOWS_WELL
        if not demoted and pv > post:
            post = pv
            state[so + v] = pv
        if post == _KNOWS_WELL:
            knows_well += 1
        ceil = np.int64(cpre[v])
        in_zpd = pv < _KNOWS_WELL and ceil >= _PARTIAL
        if in_zpd:
            zpd += 1
        if expl[v] == 0:
            continue
        moved = post > pv
        if moved:
            n_up += 1
            gain += post - pv
            if in_zpd:
                absorbed += 1
            if pv < _KNOWS_WELL and _ceiling_any_partial(pre, 0, gn0 + v, g_pre_off, g_pre_idx) >= _PARTIAL:
                absorbed_any += expl[v]  # counts entries, duplicates twice (spec §7.4)
        if pv == 0 and (post == _STRUGGLING or post == _PARTIAL or (post == _KNOWS_WELL and sig_att[le] == _ATT_REASONING)):
            novel += 1
        # 10 failure modes, first match wins
        if pv == _KNOWS_WELL:
            redundant += 1
        elif not in_zpd:
            blocked += 1
            if moved:
                blocked_moved += 1
        elif moved:
            effective += 1
        elif over_tau:
            wasted += 1
        else:
            under += 1
            if overload:
                flag_only += 1
            if pv == ceil:
                capped += 1

    if n_mentioned:
        familiarity = fam / n_mentioned
        novelty = novel / n_mentioned
    else:
        familiarity = 0.0
        novelty = 0.0

    out[C_COMP] = comprehension
    out[C_ATT] = attempt
    out[C_LOAD] = load
    out[C_OVERLOAD] = 1.0 if overload else 0.0
    out[C_DROPOFF] = 1.0 if dropoff_active else 0.0
    out[C_ETA] = eta
    out[C_NUP] = n_up
    out[C_GAIN] = gain
    out[C_ICNUM] = ic_num
    out[C_ICDEN] = n_mentioned
    out[C_ZPD] = zpd
    out[C_ABS] = absorbed
    out[C_ABS_ANY] = absorbed_any
    out[C_NEW] = new_ius
    out[C_DISALLOWED] = disallowed
    out[C_FAM] = familiarity
    out[C_NOV] = novelty
    out[C_ENG] = familiarity * novelty
    out[C_PO] = max(0.0, load - tau) / load if load != 0.0 else 0.0
    out[C_CAP] = min(1.0, load / tau) if load != 0.0 else 0.0
    out[C_REDUNDANT] = redundant
    out[C_BLOCKED] = blocked
    out[C_EFFECTIVE] = effective
    out[C_WASTED] = wasted
    out[C_UNDER] = under
    out[C_BLOCKED_MOVED] = blocked_moved
    out[C_FLAG_ONLY] = flag_only
    out[C_CAPPED] = capped
    out[C_KNOWS_WELL] = knows_well


@njit(cache=True)
def _scratch(state, max_n, max_seg):
    """One caller's scratch for ``session_turn``: pre, cpre, last, expl, eff (``max_n``), rank,
    keys (``max_seg``), wrank (4)."""
    return (
        np.empty(max_n, dtype=state.dtype), np.empty(max_n, dtype=np.int8), np.empty(max_n, dtype=np.int64),
        np.empty(max_n, dtype=np.int64), np.empty(max_n, dtype=np.float64), np.empty(max_seg, dtype=np.int64),
        np.empty(max_seg, dtype=np.int64), np.empty(4, dtype=np.int64),
    )  # fmt: skip


@njit(cache=True)
def run_range(
    lo, hi, graph_of, g_node_off, g_pre_off, g_pre_idx, g_upd, g_depth,
    s_off, state, carry, params, first_turn, traj_of, n_turns,
    seg_off, sig_node, sig_tq, sig_att, sig_role,
    out, state_hist, carry_hist, max_n, max_seg, two,
):  # fmt: skip
    """Whole trajectories of sessions ``lo..hi``: session s plays trajectory j = ``traj_of[s]``,
    i.e. ``n_turns[j]`` turns numbered from ``first_turn[s]``; turn t (0-based) reads segment
    ``j * T + t`` of ``seg_off`` (T = out.shape[1]) and writes ``out[s, t]``;
    ``state_hist``/``carry_hist`` ([T, rows], or 0 rows to skip) get the post-turn rows.
    ``max_n`` >= the largest graph, ``max_seg`` >= the longest segment."""
    t_max = out.shape[1]
    record = state_hist.shape[0] > 0
    pre, cpre, last, expl, eff, rank, keys, wrank = _scratch(state, max_n, max_seg)
    for s in range(lo, hi):
        g = graph_of[s]
        gn0 = g_node_off[g]
        n = g_node_off[g + 1] - gn0
        so = s_off[s]
        j = traj_of[s]
        for t in range(n_turns[j]):
            seg = j * t_max + t
            session_turn(
                first_turn[s] + t, params[s], gn0, n, so, seg_off[seg], seg_off[seg + 1],
                g_pre_off, g_pre_idx, g_upd, g_depth, sig_node, sig_tq, sig_att, sig_role,
                state, carry, out[s, t], pre, cpre, last, expl, eff, rank, keys, wrank, two,
            )  # fmt: skip
            if record:
                for v in range(n):
                    state_hist[t, so + v] = state[so + v]
                    carry_hist[t, so + v] = carry[so + v]


def run_serial(graph_of, *args):
    """All sessions in this thread: ``run_range(0, S, ...)``."""
    run_range(0, graph_of.shape[0], graph_of, *args)


@njit(cache=True)
def run_picked(
    picked, graph_of, g_node_off, g_pre_off, g_pre_idx, g_upd, g_depth,
    s_off, state, carry, params, turn, seg_off, sig_node, sig_tq, sig_att, sig_role, max_n, two,
):  # fmt: skip
    """One turn of sessions ``picked`` (distinct indices) only, session ``picked[j]`` reading
    segment ``j`` of ``seg_off``; its turn number ``turn[s]`` is used and advanced. Returns the
    counters ``[len(picked), N_COUNTERS]`` in that order. The micro-batcher's call: it steps the few
    sessions ready out of thousands, so everything it does is sized by ``picked``, and the subset
    is taken here rather than by fancy indexing the per-session arrays in Python first."""
    k = picked.shape[0]
    out = np.full((k, N_COUNTERS), np.nan)
    max_seg = 1
    for j in range(k):
        max_seg = max(max_seg, seg_off[j + 1] - seg_off[j])
    pre, cpre, last, expl, eff, rank, keys, wrank = _scratch(state, max_n, max_seg)
    for j in range(k):
        s = picked[j]
        g = graph_of[s]
        gn0 = g_node_off[g]
        session_turn(
            turn[s], params[s], gn0, g_node_off[g + 1] - gn0, s_off[s], seg_off[j], seg_off[j + 1],
            g_pre_off, g_pre_idx, g_upd, g_depth, sig_node, sig_tq, sig_att, sig_role,
            state, carry, out[j], pre, cpre, last, expl, eff, rank, keys, wrank, two,
        )  # fmt: skip
        turn[s] += 1
    return out


@njit(cache=True, parallel=True)
def run_parallel(
    graph_of, g_node_off, g_pre_off, g_pre_idx, g_upd, g_depth,
    s_off, state, carry, params, first_turn, traj_of, n_turns,
    seg_off, sig_node, sig_tq, sig_att, sig_role,
    out, state_hist, carry_hist, max_n, max_seg, two, n_chunks,
):  # fmt: skip
    """``run_range`` over all sessions in ``n_chunks`` chunks spread over numba's threads (sessions
    share no writable rows; a few chunks per thread balance uneven sessions)."""
    n_sessions = graph_of.shape[0]
    n_chunks = max(1, min(n_sessions, n_chunks))
    for c in prange(n_chunks):
        run_range(
            c * n_sessions // n_chunks, (c + 1) * n_sessions // n_chunks,
            graph_of, g_node_off, g_pre_off, g_pre_idx, g_upd, g_depth, s_off, state, carry, params,
            first_turn, traj_of, n_turns, seg_off, sig_node, sig_tq, sig_att, sig_role,
            out, state_hist, carry_hist, max_n, max_seg, two,
        )  # fmt: skip
