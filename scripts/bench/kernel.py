"""Benchmark: the batched numba update kernel vs the plain-Python rules, on one random workload.

Workload: S sessions over a pool of random IU graphs (9-24 IUs, prerequisite DAGs with a few
cycles), novice-like initial states, T turns of realistic signal lists (one entry per IU in node
order, ~55% mentioned, ~35% with an attempt, a few incorrect-no-explanation roles), half the
sessions under the reference preset and half under the paper preset.

Measured in one run:
* numba compile time: first call in a fresh cache dir vs loading from that cache (subprocesses);
* kernel session-turns/s (whole trajectories in one call, serial and threaded);
* the plain-Python loop (rules.update.apply_turn + rules.turn_metrics.turn_metrics per session and
  turn) on a subsample, extrapolated per session-turn, and checked equal to the kernel there;
* wall time of a large batch (default 100,000 sessions x 15 turns) through the kernel.
The last line is one JSON object with the figures.

Run: ``source scripts/_venv.sh && python scripts/bench/kernel.py`` (``--help`` for sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numba
import numpy as np

from ray_knowsim.kernels.sessions import run_packed
from ray_knowsim.kernels.pack import PackedGraphs, PackedSignals, pack_graphs, params_matrix, session_offsets
from ray_knowsim.kernels.update import COUNTERS
from ray_knowsim.schema.graph import GraphIndex, IUGraph, build_index, capacity
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import paper_rules, reference_rules
from ray_knowsim.rules.turn_metrics import turn_metrics
from ray_knowsim.rules.update import apply_turn

TQ_NAMES = ("not_mentioned", "shallow", "well_explained")
ATTEMPT_NAMES = ("none", "reasoning", "articulation")


def random_graph_pool(rng: np.random.Generator, n_graphs: int, lo: int, hi: int) -> list[GraphIndex]:
    pool = []
    for _ in range(n_graphs):
        n = int(rng.integers(lo, hi + 1))
        ids = [f"IU{k + 1}" for k in range(n)]
        edges = []
        for v in range(1, n):
            for p in rng.choice(v, size=min(v, int(rng.integers(0, 4))), replace=False):
                edges.append((ids[p], ids[v]))
        if rng.random() < 0.1:  # a few reference graphs are cyclic
            a, b = sorted(rng.choice(n, 2, replace=False))
            edges.append((ids[b], ids[a]))
        raw = {"nodes": [{"id": i} for i in ids], "edges": [{"from": s, "to": t} for s, t in edges]}
        pool.append(build_index(IUGraph.model_validate(raw)))
    return pool


def random_workload(rng: np.random.Generator, packed: PackedGraphs, n_sessions: int, n_turns: int):
    """graph_of, initial states, and one trajectory per session (one entry per IU per turn)."""
    graph_of = rng.integers(0, packed.n_graphs, n_sessions)
    s_off = session_offsets(packed, graph_of)
    rows = int(s_off[-1])
    state = rng.choice(4, size=rows, p=[0.5, 0.3, 0.1, 0.1]).astype(np.int8)
    sizes = packed.sizes[graph_of]
    seg_len = np.repeat(sizes, n_turns)  # segment (s, t) = sizes[s] entries
    off = np.zeros(seg_len.shape[0] + 1, dtype=np.int64)
    np.cumsum(seg_len, out=off[1:])
    n_entries = int(off[-1])
    # node of entry k = its position inside its segment (node order)
    node = (np.arange(n_entries, dtype=np.int64) - np.repeat(off[:-1], seg_len)).astype(np.int32)
    mentioned = rng.random(n_entries) < 0.55
    tq = np.where(mentioned, np.where(rng.random(n_entries) < 0.45, 1, 2), 0).astype(np.int8)
    attempt = rng.choice(3, size=n_entries, p=[0.65, 0.2, 0.15]).astype(np.int8)
    role = (rng.random(n_entries) < 0.05).astype(np.int8)
    signals = PackedSignals(off, node, tq, attempt, role, n_turns, np.full(n_sessions, n_turns, np.int64), graph_of)
    rules = [reference_rules() if k % 2 == 0 else paper_rules() for k in range(2)]
    per_session = [rules[s % 2] for s in range(n_sessions)]
    params = params_matrix(per_session, sizes, n_turns)
    return graph_of, state, signals, params, per_session


def to_entries(packed: PackedGraphs, g: int, sig: PackedSignals, seg: int) -> list[SignalEntry]:
    ids = packed.ids[g]
    a, b = int(sig.off[seg]), int(sig.off[seg + 1])
    return [
        SignalEntry(
            id=ids[sig.node[k]],
            teaching_quality=TQ_NAMES[sig.tq[k]],
            user_attempt_type=ATTEMPT_NAMES[sig.attempt[k]],
            assistant_response_role="confirmed_incorrect_no_explanation" if sig.role[k] else "confirmed_correct",
        )
        for k in range(a, b)
    ]


def python_loop(pool, packed, graph_of, state, s_off, signals, rules, sample, n_turns):
    """Time apply_turn + turn_metrics over the sampled sessions: (wall s, CPU s, per-session results)."""
    inputs = []
    for s in sample:
        g = pool[graph_of[s]]
        init = dict(zip(g.ids, state[s_off[s] : s_off[s + 1]].tolist()))
        turns = [to_entries(packed, graph_of[s], signals, s * signals.t_max + t) for t in range(n_turns)]
        inputs.append((g, init, turns, rules[s]))
    results = []
    c0, t0 = time.process_time(), time.perf_counter()
    for g, init, turns, r in inputs:
        tau = capacity(g.size, r.capacity_ratio, r.capacity_floor)
        pre, carries, rows = init, {}, []
        for t, entries in enumerate(turns, start=1):
            u = apply_turn(g, pre, carries, entries, tau, t, r, n_turns)
            m = turn_metrics(g, pre, entries, u, tau)
            rows.append((u, m))
            pre, carries = u.post, u.carries
        results.append(rows)
    return time.perf_counter() - t0, time.process_time() - c0, results


def check_sample(res, sample, results) -> int:
    """Count counter/state mismatches between the kernel and the Python loop on the sample."""
    bad = 0
    idx = {n: i for i, n in enumerate(COUNTERS)}
    for s, rows in zip(sample, results):
        u, m = rows[-1]
        final = res.final(s)
        bad += final != (u.post, u.carries)
        for t, (u, m) in enumerate(rows):
            c = res.counters[s, t]
            bad += c[idx["effective_load"]] != u.effective_load or c[idx["eta"]] != u.eta
            bad += c[idx["n_upward_transitions"]] != m.n_upward_transitions or c[idx["ic_numerator"]] != m.ic_numerator
            bad += c[idx["engagement"]] != m.engagement or c[idx["zpd_size"]] != m.zpd_size
    return bad


COMPILE_PROBE = r"""
import sys, time
t0 = time.perf_counter()
import numpy as np
from ray_knowsim.kernels.sessions import run_batch
from ray_knowsim.schema.graph import IUGraph, build_index
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import reference_rules
g = build_index(IUGraph.model_validate({"nodes": [{"id": "A"}, {"id": "B"}], "edges": [{"from": "A", "to": "B"}]}))
sig = [[SignalEntry(id="A", teaching_quality="well_explained")]]
import numba
t1 = time.perf_counter()
numba.njit(lambda x: x + 1)(1)  # numba's own start-up (target init), paid by any first jit call
t2, c2 = time.perf_counter(), time.process_time()
run_batch([g], reference_rules(), [{}], [sig], parallel=sys.argv[1] == "parallel")
print(time.perf_counter() - t2, t2 - t1, time.process_time() - c2)
"""


def compile_times(mode: str) -> tuple[float, float, float, float]:
    """(kernel's first call in a fresh cache dir, its first call loading that cache, numba start-up,
    CPU seconds of the fresh first call), each first call in a new process, after numba's own
    start-up (a trivial jit) is paid."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = []
        for _ in range(2):
            cmd = [sys.executable, "-c", COMPILE_PROBE, mode]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            out.append([float(x) for x in proc.stdout.split()[:3]])
        return out[0][0], out[1][0], out[1][1], out[0][2]


def best_of(fn, repeats: int) -> tuple[float, float]:
    """(best wall seconds, CPU seconds of that run): the dev machine is shared, so wall times of a
    single run are noisy; CPU time (all threads) is reported alongside."""
    runs = []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    return min(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=15)
    ap.add_argument("--python-sample", type=int, default=300, help="sessions replayed by the Python loop")
    ap.add_argument("--big", type=int, default=100_000, help="sessions in the large-batch wall-time run")
    ap.add_argument("--graphs", type=int, default=400, help="distinct random graphs in the pool")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-compile", action="store_true", help="skip the fresh-cache compile measurement")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    threads = numba.get_num_threads()
    print(f"numba {numba.__version__}, {threads} threads, {os.cpu_count()} CPUs")

    figures: dict[str, float | int | str] = {}
    if not args.skip_compile:
        for mode in ("serial", "parallel"):
            fresh, cached, startup, fresh_cpu = compile_times(mode)
            figures[f"compile_{mode}_fresh_s"] = round(fresh, 3)
            figures[f"compile_{mode}_fresh_cpu_s"] = round(fresh_cpu, 3)
            figures[f"compile_{mode}_cached_load_s"] = round(cached, 3)
            figures["numba_startup_s"] = round(startup, 3)
            print(f"compile ({mode}): fresh cache {fresh:.2f} s ({fresh_cpu:.2f} s CPU), cached load {cached:.3f} s "
                  f"(plus numba's own start-up {startup:.2f} s, paid by any first jit call)")  # fmt: skip

    pool = random_graph_pool(rng, args.graphs, 9, 24)
    packed = pack_graphs(pool)
    graph_of, state, signals, params, rules = random_workload(rng, packed, args.sessions, args.turns)
    s_off = session_offsets(packed, graph_of)
    session_turns = args.sessions * args.turns
    print(f"workload: {args.sessions} sessions x {args.turns} turns, {signals.n_entries} signal entries, {len(pool)} graphs")

    run = lambda par: run_packed(packed, graph_of, params, signals, None, state, None, parallel=par)  # noqa: E731
    run(False), run(True)  # warm (compiled or loaded from cache)
    t_serial, cpu_serial = best_of(lambda: run(False), 3)
    t_parallel, cpu_parallel = best_of(lambda: run(True), 3)
    t_kernel = min(t_serial, t_parallel)
    res = run(t_parallel < t_serial)
    print(f"kernel: serial {session_turns / t_serial:,.0f} session-turns/s ({t_serial * 1e3:.1f} ms), "
          f"threaded {session_turns / t_parallel:,.0f} session-turns/s ({t_parallel * 1e3:.1f} ms)")  # fmt: skip

    sample = rng.choice(args.sessions, size=min(args.python_sample, args.sessions), replace=False)
    t_py, cpu_py, results = python_loop(pool, packed, graph_of, state, s_off, signals, rules, sample, args.turns)
    py_rate = len(sample) * args.turns / t_py
    mismatches = check_sample(res, sample, results)
    print(f"python: {py_rate:,.0f} session-turns/s, measured on {len(sample)} sessions x {args.turns} turns "
          f"({t_py:.2f} s) and extrapolated per session-turn to {args.sessions} sessions: "
          f"{session_turns / py_rate:.1f} s; kernel == python on the sample: {mismatches == 0}")  # fmt: skip
    kernel_rate = session_turns / t_kernel
    ratio = kernel_rate / py_rate
    cpu_ratio = (cpu_py / (len(sample) * args.turns)) / (cpu_serial / session_turns)
    print(f"kernel vs python: {ratio:,.0f}x wall (best kernel mode); serial CPU time per session-turn: {cpu_ratio:,.0f}x")

    big_graph_of, big_state, big_signals, big_params, _ = random_workload(rng, packed, args.big, args.turns)
    mode = "threaded" if t_parallel < t_serial else "serial"
    big = []
    threaded = t_parallel < t_serial
    t_big, cpu_big = best_of(
        lambda: big.append(run_packed(packed, big_graph_of, big_params, big_signals, None, big_state, None, parallel=threaded)), 2
    )
    print(f"large batch: {args.big} sessions x {args.turns} turns in {t_big:.2f} s wall, {cpu_big:.2f} s CPU, best of 2 "
          f"({args.big * args.turns / t_big:,.0f} session-turns/s, {mode}, includes output allocation)")  # fmt: skip
    assert not np.isnan(big[-1].counters).any()

    figures.update(
        {
            "threads": threads,
            "sessions": args.sessions,
            "turns": args.turns,
            "kernel_serial_session_turns_per_s": round(session_turns / t_serial),
            "kernel_parallel_session_turns_per_s": round(session_turns / t_parallel),
            "parallel_vs_serial_ratio": round(t_serial / t_parallel, 2),
            "kernel_serial_cpu_us_per_session_turn": round(cpu_serial / session_turns * 1e6, 3),
            "python_session_turns_per_s": round(py_rate, 1),
            "python_cpu_us_per_session_turn": round(cpu_py / (len(sample) * args.turns) * 1e6, 1),
            "python_sample_sessions": len(sample),
            "python_extrapolated": True,  # per session-turn from the sample
            "kernel_vs_python_ratio": round(ratio, 1),
            "kernel_vs_python_cpu_ratio": round(cpu_ratio, 1),
            "kernel_equals_python_on_sample": bool(mismatches == 0),
            "big_sessions": args.big,
            "big_wall_s": round(t_big, 3),
            "big_cpu_s": round(cpu_big, 3),
            "big_mode": mode,
        }
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
