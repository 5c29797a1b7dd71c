"""Benchmark: the Ray engine around the per-shard lockstep loop (planning, shard tasks, atomic
Parquet commits, the Ray Data reduction), each figure against a baseline measured in this run.

(a) throughput: sessions/s of ``ray-knowsim run`` on a local Ray with ``--cpus`` CPUs (default 2;
    Ray start and the table reduction excluded, the latter reported as ``reduce_s``) vs a
    single-process loop over the same shards (same shard function, offline backend, rows written
    to one Parquet file): ``ray_vs_single_ratio``.
(b) LLM-bound scheduling: ``--sessions-b`` sessions (default 1,000) against a local
    OpenAI-compatible server answering after ``--delay`` seconds (``ray-knowsim serve-offline``),
    with ``--concurrency`` requests in flight in all. The ideal lockstep bound is
    turns x roles x delay x ceil(sessions / concurrency) (3 roles per turn: user simulator,
    assistant, extractor; no judge): ``http_wall_vs_bound_ratio`` (target <= 1.15, issue 30), for the
    layout recommended for LLM-bound runs (``--shards-per-cpu`` concurrent shards per CPU, the
    cap split between them);
    ``--limiter-variant`` adds the same cap enforced by the run-wide limiter (local shares of one
    Ray actor's budget) over smaller shards: ``limiter_vs_bound_ratio`` (target <= 1.15) and
    ``limiter_vs_per_process_ratio`` (against the per-process cap measured in the same run).
    The shards that share a CPU run in one worker process (``engine.shards_per_worker``: the
    engine's default unless ``--shards-per-worker`` says otherwise; 1 is the layout of a process
    per shard, for a before/after in the same run): ``<name>_shards``, ``<name>_worker_processes``.
    Each variant is measured on warm workers: a one-turn run in its layout, then as many worker
    processes as it runs held at once (``<name>_workers_prestarted``), kept idle by Ray
    until the measured run (``IDLE_WORKERS_KEPT``); workers Ray still starts during it are
    counted (``<name>_workers_started``) with their CPU.
    Beside the client's CPU, the host's pace: a fixed piece of Python work timed in the driver just
    before each variant and every 2 s during it (``<name>_reference_ms_before/during``), so a run
    on a slow host says so (a witness, not a divisor: docs/performance.md). After each variant,
    its baseline: the transport alone in the same layout (as many Ray tasks at the shards' CPUs,
    the variant's requests and cap split between them, no simulation):
    ``<name>_transport_cpu_ms_per_request`` and ``<name>_client_vs_transport_ratio``.
(d) with ``--limiter-variant``, the limiter alone: (b)'s lockstep request pattern from
    ``--limiter-tasks`` Ray tasks with no simulation CPU, per-process semaphores (baseline) vs the
    run-wide limiter: ``limiter_isolated_vs_bound_ratio``, ``limiter_isolated_vs_per_process_ratio``.
(c) driver memory: peak RSS of the driver process (``ray-knowsim run`` in a subprocess) at
    1,000 vs 10,000 sessions: ``driver_memory_10k_vs_1k_ratio`` (target ~1: flat).
(e) hosted-API latency: ``--sessions-e`` sessions (default 96: the math demo items x 3 levels x 4
    strategies x 2 trials) x ``--turns-e`` turns, every role over HTTP through
    ``scripts/bench/latency_proxy.py`` in front of ``serve-offline``, each answer held for a delay
    drawn from ``--latency`` (``lognormal`` with ``--median-s`` and ``--log-sd``, or ``constant``),
    seeded by a hash of the request body, so every run meets the same delays. No rate limit or
    in-flight cap binds (``--in-flight-e``, default 1,000 per process) and every shard runs at once.
    The ideal is per session: the slowest session's own chain of calls, summed from the delays the
    proxy actually served: ``wall_vs_ideal_ratio`` (target <= 1.1 at log-sd 1.0). Also reported:
    the lockstep loop's own bound from the same delays (per shard, per turn, the slowest request
    of each role in turn), ``sessions_per_hour`` at that latency and concurrency, and the kernel's
    sessions per call (``kernel_sessions_per_flush_*``, from the shards' summaries).

Every figure measures the real simulation loop (``ray_knowsim.sim.shard:run_shard``, or ``--shard-fn``); the judges
run after it as the scoring stage (``ray_knowsim.score``), as in any run. The last line is one JSON object with the figures.

Run: ``source scripts/_venv.sh && python scripts/bench/engine.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from python_build import describe as python_build, warn_if_plain  # noqa: E402  (the interpreter's build, reported beside the figures)
REAL = "ray_knowsim.sim.shard:run_shard"
DEMO_ITEMS = 7  # 4 math + 3 expertqa demo items


MATH_ITEMS = 4


_SHARD_FN = [REAL]  # --shard-fn: another shard function measured the same way (e.g. an older loop)


def shard_fn() -> str:
    return _SHARD_FN[0]


TASKS = {"math": {"name": "math", "items": "pkg:demo/math.jsonl", "graphs": "pkg:demo/iu_math.json"},
         "expertqa": {"name": "expertqa", "items": "pkg:demo/expertqa.jsonl", "graphs": "pkg:demo/iu_expertqa.json"}}


def base_config(trials: int, conditions: int, max_turns: int, shard_size: int, tasks=("math", "expertqa"), **engine) -> dict:
    strategies = ["minimal", "adaptive", "socratic", "comprehensive"][:conditions]
    fn = shard_fn()
    return {
        "name": "bench",
        "tasks": [TASKS[t] for t in tasks],
        "models": {"offline": {"backend": "offline"}},
        "roles": {"user_sim": "offline", "extractor": "offline", "judge": "offline", "assistant": {"model": "offline"}},
        "conditions": [{"strategy": s} for s in strategies],
        "trials": trials,
        "max_turns": max_turns,
        "engine": {"shard_size": shard_size, "shard_fn": fn, **engine},
    }


def trials_for(sessions: int, conditions: int) -> int:
    return max(1, math.ceil(sessions / (DEMO_ITEMS * 3 * conditions)))


# ----------------------------------------------------------------------------- (a)


def single_process(cfg) -> tuple[float, int]:
    """The same shards, one after another in this process, rows to one Parquet file."""
    import pyarrow.parquet as pq

    from ray_knowsim.backends.model_set import build_models
    from ray_knowsim.plan.sessions import Plan, load_inputs
    from ray_knowsim.io.commits import SESSION_SCHEMA, TURN_SCHEMA
    from ray_knowsim.io.parquet import rows_table
    from ray_knowsim.plan.build import make_context
    from ray_knowsim.run.worker import load_shard_fn, with_initial_states
    from ray_knowsim.llm.accounting import Accounting

    t0 = time.perf_counter()
    inputs = load_inputs(cfg)
    plan = Plan(cfg, inputs)
    models = build_models(cfg, inputs.graphs, None)
    ctx = make_context(cfg, "single", cfg.config_hash())
    fn = load_shard_fn(cfg.engine.shard_fn, cfg.engine.shard_fn_options)
    sessions, turns = [], []
    for k in range(plan.n_shards):
        shard = with_initial_states(plan.shard(k), ctx)
        role_models = models.role_models(Accounting())

        async def collect():
            return [r async for r in fn(shard, role_models, ctx)]

        for r in asyncio.run(collect()):
            sessions.append(r.session)
            turns.extend(r.turns)
    with tempfile.TemporaryDirectory() as d:
        pq.write_table(rows_table(sessions, SESSION_SCHEMA), f"{d}/s.parquet")
        pq.write_table(rows_table(turns, TURN_SCHEMA), f"{d}/t.parquet")
    return time.perf_counter() - t0, len(sessions)


def bench_a(args, workdir: Path) -> dict:
    from ray_knowsim.config import parse_run_config
    from ray_knowsim.run.fan_out import run

    from ray_knowsim.tables.reduce import aggregate_item_sums
    from ray_knowsim.io.rundir import RunReader

    n_planned = trials_for(args.sessions_a, 4) * DEMO_ITEMS * 3 * 4
    shard_size = args.shard_size or math.ceil(n_planned / (4 * args.cpus))  # 4 even waves per CPU
    cfg = parse_run_config(base_config(trials_for(args.sessions_a, 4), 4, args.turns_a, shard_size))
    single_s, n = single_process(cfg)
    t0 = time.perf_counter()
    out = run(cfg, output=workdir / "a", quiet=True, tables=False)
    engine_s = time.perf_counter() - t0
    assert out.n_ok + out.n_failed == n, (out.n_ok, out.n_failed, n)
    t0 = time.perf_counter()
    aggregate_item_sums(RunReader.open(workdir / "a").sessions.files)  # the Ray Data groupby, for reference
    reduce_s = time.perf_counter() - t0
    res = {"a_sessions": n, "a_turns": args.turns_a, "single_s": round(single_s, 2), "ray_engine_s": round(engine_s, 2),
           "reduce_s": round(reduce_s, 2), "single_sessions_per_s": round(n / single_s, 2),
           "ray_sessions_per_s": round(n / engine_s, 2)}
    res["ray_vs_single_ratio"] = round(res["ray_sessions_per_s"] / res["single_sessions_per_s"], 3)
    print(f"(a) {n} sessions x {args.turns_a} turns: single process {single_s:.1f}s ({n / single_s:.1f}/s), "
          f"Ray engine (plan, shards, commits; Ray start excluded) {engine_s:.1f}s ({n / engine_s:.1f}/s): "
          f"ratio {res['ray_vs_single_ratio']}; the table reduction adds {reduce_s:.1f}s", flush=True)
    return res


# ----------------------------------------------------------------------------- (b)


def listening_port(pid: int) -> int | None:
    """The TCP port process ``pid`` listens on at 127.0.0.1, once it does (the server is started
    on port 0 and the kernel picks: no port is chosen here and released for it to take)."""
    import psutil

    for c in psutil.Process(pid).net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr.ip == "127.0.0.1":
            return c.laddr.port
    return None


def _cpu_s(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


#: process titles of the per-node daemons Ray starts as Python processes named like workers
#: (every node runs one of each; counting them as the client's workers inflated its CPU per request)
RAY_AGENT_TITLES = frozenset({"ray::DashboardAgent", "ray::RuntimeEnvAgent"})


class ClientCpu:
    """CPU-seconds the client spends during a run: this process (the driver) and every process
    under it (Ray's own processes and the shard workers), the endpoint's processes (``exclude``
    and theirs) left out; sampled every ``every_s`` from a thread, so a worker that exits mid-run
    keeps what it used up to its last sample (the sampling thread's own CPU is taken out of the
    driver's). Split into ``driver``, ``workers`` (``ray::`` task
    and actor processes: the shards, the limiter, the progress board) and ``ray_system``
    (GCS, raylet, each node's dashboard and runtime-env agents and the other daemons). Children's time is not in their parents' figures (only
    reaped children's is, and these are sampled themselves)."""

    PARTS = ("driver", "workers", "ray_system")

    def __init__(self, exclude: tuple[int, ...] = (), every_s: float = 1.0) -> None:
        import threading

        import psutil

        self._psutil, self._me = psutil, psutil.Process()
        self.exclude, self.every_s = set(exclude), every_s
        self._start: dict[int, float] = {}
        self._last: dict[int, tuple[str, float]] = {}
        self._titles: dict[int, str] = {}  # worker pid -> the title of the last task it ran (ray::IDLE: none)
        self._stop = threading.Event()
        self._not_client = 0.0  # the bench's own threads' CPU in the driver process (this sampler's included)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _kind(self, p) -> str:
        if p.pid == self._me.pid:
            return "driver"
        try:
            cmd = p.cmdline() or [""]
        except self._psutil.Error:
            cmd = [""]
        # a worker names itself ray::<task> once it runs (ray::IDLE between tasks); before that it is
        # default_worker.py. Each node's agents also title themselves ray::...: daemons, not client
        if cmd[0] in RAY_AGENT_TITLES:
            return "ray_system"
        if cmd[0].startswith("ray::") or any("default_worker.py" in c for c in cmd):
            if cmd[0] != "ray::IDLE" or p.pid not in self._titles:  # the last task it ran names it
                self._titles[p.pid] = cmd[0] if cmd[0].startswith("ray::") else "default_worker.py"
            return "workers"
        return "ray_system"

    def _processes(self):
        skip = set(self.exclude)
        for pid in self.exclude:
            try:
                skip.update(c.pid for c in self._psutil.Process(pid).children(recursive=True))
            except self._psutil.Error:
                pass
        for p in [self._me, *self._me.children(recursive=True)]:
            if p.pid not in skip:
                yield p

    def sample(self) -> None:
        for p in self._processes():
            try:
                t = p.cpu_times()
                kind = self._kind(p)
            except self._psutil.Error:
                continue
            self._last[p.pid] = (kind, t.user + t.system)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()
        self.exclude_driver_cpu(time.thread_time())  # the sampling's own CPU, which is no part of the driver's

    def __enter__(self) -> "ClientCpu":
        self.sample()
        self._start = {pid: cpu for pid, (_, cpu) in self._last.items()}
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def seconds(self) -> dict[str, float]:
        out = dict.fromkeys(self.PARTS, 0.0)
        for pid, (kind, cpu) in self._last.items():
            out[kind] += cpu - self._start.get(pid, 0.0)
        out["driver"] = max(0.0, out["driver"] - self._not_client)
        return out

    def exclude_driver_cpu(self, seconds: float) -> None:
        """Take ``seconds`` of the bench's own work in the driver process (a thread's CPU clock)
        out of the driver's figure (the sampling thread takes its own out so too)."""
        self._not_client += seconds

    def workers_started(self) -> int:
        """Worker processes that started while sampled (each pays the process start, the imports
        and the kernel's load: a cost per worker, which a warm-up before the measured run avoids)."""
        return sum(1 for pid, (kind, _) in self._last.items() if kind == "workers" and pid not in self._start)

    def workers_by_title(self) -> dict[str, dict[str, float]]:
        """The workers' CPU-seconds by what they ran (``ray::<task or actor method>``; ``ray::IDLE``:
        workers that ran nothing while sampled), with how many processes: where the workers' share goes."""
        out: dict[str, dict[str, float]] = {}
        for pid, (kind, cpu) in self._last.items():
            if kind == "workers":
                entry = out.setdefault(self._titles.get(pid, "ray::IDLE"), {"processes": 0, "cpu_s": 0.0})
                entry["processes"] += 1
                entry["cpu_s"] = round(entry["cpu_s"] + cpu - self._start.get(pid, 0.0), 3)
        return out


def kernel_figures(run_dir: Path, prefix: str) -> dict:
    """The kernel micro-batcher's figures of a run, from its commit markers (the figures so far
    travel with each commit of a shard: its latest is the shard's): calls, sessions stepped per
    call (mean, max, and how many calls stepped 1, 2-3, ... sessions) and the time per call."""
    from ray_knowsim.io.commits import read_markers

    latest: dict[str, dict] = {}
    for c in sorted(read_markers(run_dir), key=lambda c: c.committed_at):
        latest[c.shard_id] = (c.summary or {}).get("kernel") or latest.get(c.shard_id, {})
    kernel = list(latest.values())
    calls, stepped = sum(k.get("calls", 0) for k in kernel), sum(k.get("sessions", 0) for k in kernel)
    if not calls:
        return {}
    sizes: dict[str, int] = {}
    for k in kernel:
        for size, n in (k.get("sizes") or {}).items():
            sizes[size] = sizes.get(size, 0) + n
    seconds = sum(k.get("seconds", 0.0) for k in kernel)
    return {f"{prefix}kernel_calls": calls, f"{prefix}kernel_sessions_per_flush_mean": round(stepped / calls, 2),
            f"{prefix}kernel_sessions_per_flush_max": max(k.get("max", 0) for k in kernel),
            f"{prefix}kernel_ms_per_call": round(1000 * seconds / calls, 3),
            f"{prefix}kernel_ms_per_session_step": round(1000 * seconds / max(1, stepped), 3),
            f"{prefix}kernel_calls_by_size": sizes}


SHARD_TITLE = "ray::ray-knowsim "  # a shard task's process title (run/fan_out.py names each task so)


def per_run_split(name: str, by_title: dict[str, dict[str, float]], driver_s: float, llm: dict) -> dict:
    """The workers' CPU split into the shard tasks' (what grows with requests) and the rest, a cost
    per run that a longer run spreads thinner: the run's progress-board actor and code probe, each a
    fresh worker process, and workers starting up. ``<name>_shard_cpu_ms_per_request``: driver +
    shard tasks per request; ``<name>_per_run_workers_cpu_s``: the rest of the workers' CPU."""
    from ray_knowsim.llm.accounting import Accounting

    requests = Accounting.from_dict(llm).total().calls
    shards = sum(v["cpu_s"] for t, v in by_title.items() if t.startswith(SHARD_TITLE))
    rest = sum(v["cpu_s"] for t, v in by_title.items() if not t.startswith(SHARD_TITLE))
    return {f"{name}_shard_cpu_ms_per_request": round(1000 * (driver_s + shards) / max(1, requests), 3),
            f"{name}_per_run_workers_cpu_s": round(rest, 2), f"{name}_workers_by_title": by_title}


def client_cpu_figures(name: str, cpu: dict[str, float], llm: dict, wall: float, sessions: int) -> dict:
    """The client's CPU figures of one run: seconds per part, and per request answered (the
    driver and the workers; Ray's daemons are reported beside it, not in it), and the ceiling
    they set: sessions per hour per client core (sessions per CPU-hour of driver + workers, and
    of driver + workers + Ray's daemons), what one core could drive if the endpoint kept up."""
    from ray_knowsim.llm.accounting import Accounting

    requests = Accounting.from_dict(llm).total().calls
    client = cpu["driver"] + cpu["workers"]
    out = {f"{name}_{part}_cpu_s": round(v, 2) for part, v in cpu.items()}
    out.update({f"{name}_requests": requests, f"{name}_client_cpu_s": round(client, 2),
                f"{name}_client_cpu_ms_per_request": round(1000 * client / max(1, requests), 3),
                f"{name}_ray_system_cpu_ms_per_request": round(1000 * cpu["ray_system"] / max(1, requests), 3),
                f"{name}_client_cores_busy": round(client / wall, 2) if wall else None,
                f"{name}_sessions_per_client_core_hour": round(sessions / client * 3600) if client else None,
                f"{name}_sessions_per_core_hour_with_ray": round(sessions / (client + cpu["ray_system"]) * 3600)
                if client else None})
    return out


_REFERENCE_BODY = {"model": "offline", "temperature": 0.7, "max_tokens": 512,
                   "messages": [{"role": "system", "content": "You are a learner. " * 40},
                                {"role": "user", "content": "Explain the chain rule, step by step. " * 20}],
                   "state": {f"iu_{k}": ("unaware", "struggling", "partial_understanding", "knows_well")[k % 4]
                             for k in range(24)}}


def reference_ms(repeats: int = 5, clock=time.process_time) -> float:
    """The CPU time of a fixed piece of client-like Python work (a request-sized body encoded and
    decoded, a template filled, a state walked), in ms: the median of ``repeats`` rounds, in this
    process. The host's speed varies (one two-core KVM guest ran the same loop 1.85x slower two
    hours apart, docs/performance.md), so each variant reports it beside the client's CPU
    (:class:`ReferenceDuringRun`): a figure from a slow host is then visibly one. It is not a
    divisor: the client's CPU per request did not move in proportion to it (measured: the
    reference 5.1 -> 9.6 ms between two runs, the client's 1.41 -> 1.62 ms per request)."""
    rounds = []
    for _ in range(repeats):
        t0 = clock()
        for k in range(200):
            text = json.dumps(_REFERENCE_BODY)
            back = json.loads(text)
            "{}: {} ({})".format(k, back["messages"][1]["content"][:40], len(text))
            sum(1 for v in back["state"].values() if v != "unaware")
        rounds.append(1000 * (clock() - t0))
    return statistics.median(rounds)


class ReferenceDuringRun:
    """:func:`reference_ms` in a driver thread every ``every_s`` while a run goes on (its own
    thread's CPU clock), so the host's pace is sampled under the run's own load, where the
    client's CPU is measured (a neighbour on the other core slows the same work too: 5.2 ms
    before a run, 13.1 ms in the second after it, in one measured case). Its CPU (~5 ms a
    sample, ~0.07 CPU-s over one variant of the issue's command) is the bench's work, not the
    client's: it is taken out of the driver's figure (:meth:`ClientCpu.exclude_driver_cpu`)."""

    def __init__(self, every_s: float = 2.0) -> None:
        import threading

        self.samples: list[float] = []
        self.own_cpu_s = 0.0  # this thread's CPU: the bench's work, which the driver's figure leaves out
        self._stop = threading.Event()
        self._every = every_s
        self._thread = threading.Thread(target=self._sample, name="bench-reference", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self._every):
            self.samples.append(reference_ms(repeats=1, clock=time.thread_time))
        self.own_cpu_s = time.thread_time()

    def __enter__(self) -> "ReferenceDuringRun":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None


def transport_only(port: int, bodies: list[bytes], in_flight: int) -> tuple[float, float]:
    """The baseline: ``bodies`` POSTed, ``in_flight`` at a time, answers read as bytes, through
    the transport the model client uses for this URL (:func:`ray_knowsim.llm.http.plain.use_plain`:
    the plain-http client, or aiohttp with ``RAY_KNOWSIM_HTTP_TRANSPORT=aiohttp``); (CPU seconds
    of this process, wall seconds)."""
    import aiohttp

    from ray_knowsim.llm.http.plain import PlainHTTPPool, use_plain

    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    headers = {"Content-Type": "application/json"}

    async def main() -> None:
        sem = asyncio.Semaphore(in_flight)
        if use_plain(url):
            pool = PlainHTTPPool(url, timeout_s=120, connect_timeout_s=10)

            async def one(body: bytes) -> None:
                async with sem:
                    await pool.post(body, headers)

            await asyncio.gather(*(one(b) for b in bodies))
            await pool.close()
            return
        connector = aiohttp.TCPConnector(limit=in_flight, limit_per_host=in_flight)
        async with aiohttp.ClientSession(connector=connector) as session:
            async def one(body: bytes) -> None:
                async with sem:
                    async with session.post(url, data=body, headers=headers) as resp:
                        await resp.read()

            await asyncio.gather(*(one(b) for b in bodies))

    c0, t0 = time.process_time(), time.perf_counter()
    asyncio.run(main())
    return time.process_time() - c0, time.perf_counter() - t0


def sample_bodies(cfg, n: int) -> list[bytes]:
    """``n`` request bodies of the shape the loop sends (one learner request per planned session
    of ``cfg``'s first shard, through the real client's payload builder)."""
    from ray_knowsim.backends.model_set import build_models
    from ray_knowsim.llm.accounting import Accounting
    from ray_knowsim.plan.build import make_context
    from ray_knowsim.plan.sessions import Plan, load_inputs
    from ray_knowsim.sim.requests import TurnRequests
    from ray_knowsim.sim.session import start_session

    inputs = load_inputs(cfg)
    shard = Plan(cfg, inputs).shard(0)
    ctx = make_context(cfg, "bodies", cfg.config_hash())
    model = build_models(cfg, inputs.graphs, None).role_models(Accounting()).user_sim
    while not hasattr(model, "build_payload"):  # the HTTP client under its wrappers
        model = model.inner
    build = TurnRequests.of(ctx)
    bodies = []
    for spec in shard.sessions[:n]:
        live = start_session(spec, shard.item_of(spec), shard.graph_of(spec), ctx.rules)
        bodies.append(json.dumps(model.build_payload(ctx.roles["user_sim"].apply(build.learner(live, [], 1)))).encode())
    return bodies


def _transport_shard(port: int, bodies: list[bytes], requests: int, in_flight: int) -> float:
    """One shard task's worth of the transport baseline, in a Ray worker: ``requests`` POSTs of
    ``bodies`` (cycled), ``in_flight`` at a time; the worker's CPU seconds for them."""
    return transport_only(port, (bodies * math.ceil(requests / len(bodies)))[:requests], in_flight)[0]


def transport_baseline(name: str, port: int, bodies: list[bytes], requests: int, shards: int, shard_cpus: float,
                       in_flight: int, server_pid: int) -> dict:
    """The client's CPU with no simulation, over Ray, in the variant's layout: ``shards`` tasks (the
    run's worker processes) at ``shard_cpus`` each (a process's CPUs), all at once, sending the
    variant's ``requests`` between them (``in_flight`` per task: the run's cap split evenly between
    its processes) through the same HTTP transport; measured like the run
    (driver and workers, the server left out: :class:`ClientCpu`) after a warm pass. The run's
    client CPU over this is ``<name>_client_vs_transport_ratio``: both are measured on the same host
    minutes apart, so the ratio moves less with the host's pace than the ms figures do (measured:
    about half as much, docs/performance.md)."""
    import ray

    remote = ray.remote(num_cpus=shard_cpus)(_transport_shard)
    per = math.ceil(requests / shards)
    ray.get([remote.remote(port, bodies, min(per, 4 * in_flight), in_flight) for _ in range(shards)])  # warm
    with ClientCpu(exclude=(server_pid,)) as cpu:
        t0 = time.perf_counter()
        ray.get([remote.remote(port, bodies, per, in_flight) for _ in range(shards)])
        wall = time.perf_counter() - t0
    seconds = cpu.seconds()
    client = seconds["driver"] + seconds["workers"]
    sent = per * shards
    return {f"{name}_transport_requests": sent, f"{name}_transport_wall_s": round(wall, 2),
            f"{name}_transport_cpu_ms_per_request": round(1000 * client / max(1, sent), 3),
            f"{name}_transport_in_flight_per_task": in_flight}


def _hold_warm(gate, n: int, timeout_s: float) -> int:
    """One worker's warm-up: the shard's imports and the kernel's load, then held until ``n``
    tasks hold a worker each (so they are ``n`` distinct processes)."""
    import ray

    from ray_knowsim.demo import demo_graphs
    from ray_knowsim.rules.config import reference_rules
    from ray_knowsim.run.worker import execute_shard  # noqa: F401  (what a shard task imports)
    from ray_knowsim.schema.graph import build_index
    from ray_knowsim.sim.kernel_steps import KernelBatcher

    item_id, graph = next(iter(demo_graphs().items()))
    index = build_index(graph, item_id)
    KernelBatcher([index], reference_rules(), [{v: 0 for v in index.ids}], max_turns=4)  # loads the kernel
    ray.get(gate.arrive.remote())
    deadline = time.monotonic() + timeout_s
    while ray.get(gate.arrived.remote()) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.getpid()


class _Gate:
    def __init__(self) -> None:
        self.n = 0

    def arrive(self) -> None:
        self.n += 1

    def arrived(self) -> int:
        return self.n


#: idle worker processes Ray keeps in the bench (more than any variant runs at once)
IDLE_WORKERS_KEPT = 32


def prestart_workers(n: int, cpus_each: float, cpus: int, timeout_s: float = 120.0) -> int:
    """Have ``n`` warm worker processes idle in the pool (the shard tasks' imports done and the
    kernel loaded in each): ``n`` tasks at the shards' CPUs held until all ``n`` run at once.
    Returns how many distinct processes held one (``n`` unless they cannot all fit at once)."""
    import ray

    if n * cpus_each > cpus + 1e-9:  # they could not all run at once: the measured run cannot either
        return 0
    gate = ray.remote(_Gate).options(num_cpus=0).remote()
    hold = ray.remote(_hold_warm).options(num_cpus=cpus_each)
    try:
        pids = ray.get([hold.remote(gate, n, timeout_s) for _ in range(n)], timeout=timeout_s + 60)
    finally:
        ray.kill(gate)
    return len(set(pids))


def bench_b(args, workdir: Path) -> dict:
    from ray_knowsim.config import parse_run_config
    from ray_knowsim.run.fan_out import run

    server = subprocess.Popen([sys.executable, "-m", "ray_knowsim.cli.main", "serve-offline", "--host", "127.0.0.1",
                               "--port", "0", "--delay-s", str(args.delay), "--model-name", "offline"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while (port := listening_port(server.pid)) is None:  # it listens once its app is set up
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("serve-offline did not start")
            time.sleep(0.2)
        conditions = 4
        n = trials_for(args.sessions_b, conditions) * DEMO_ITEMS * 3 * conditions
        roles = 3
        bound = args.turns * roles * args.delay * math.ceil(n / args.concurrency)
        res = {"b_sessions": n, "delay_s": args.delay, "concurrency": args.concurrency, "http_bound_s": round(bound, 2)}
        # Recommended layout for LLM-bound runs: a few shards per CPU, all running at once (one
        # renders and parses while the others wait on the server), the cap split between them
        # (max_in_flight is per shard process); then the same cap enforced by the run-wide limiter
        # actor (max_in_flight_global) over smaller shards.
        variants = {
            "http": dict(shard_size=math.ceil(n / (args.cpus * args.shards_per_cpu)), shard_cpus=1.0 / args.shards_per_cpu,
                         ep={"max_in_flight": math.ceil(args.concurrency / (args.cpus * args.shards_per_cpu))}),
            "http_global_limiter": dict(shard_size=args.shard_size_b, shard_cpus=args.shard_cpus_b,
                                        ep={"max_in_flight": args.concurrency, "max_in_flight_global": args.concurrency}),
        }
        def config(trials: int, turns: int, shard_size: int, shard_cpus: float, ep: dict):
            data = base_config(trials, conditions, turns, shard_size, shard_cpus=shard_cpus, llm_cache=False,
                               shards_per_worker=args.shards_per_worker)
            data["models"] = {"ep": {"backend": "http", "base_url": f"http://127.0.0.1:{port}/v1", "model": "offline",
                                     "timeout_s": 120, "structured_output": "json_object", "offline_server": True, **ep}}
            data["roles"] = {"user_sim": "ep", "extractor": "ep", "judge": None, "assistant": {"model": "ep"}}
            return parse_run_config(data)

        # learner request bodies for the transport baseline (a config without the run-wide limiter:
        # the bodies are the same, and building them starts no actor)
        bodies = sample_bodies(config(trials_for(args.sessions_b, conditions), 1, 10**6, 1.0, {"max_in_flight": 16}), 200)
        for name, v in variants.items():
            if name != "http" and not args.limiter_variant:
                continue
            # warm the variant's workers first (process start, imports, the kernel's load: a fixed
            # cost per worker, not one per request): a one-turn run in the same layout just before
            # it (as many shards at once, the same limits: the run-wide limiter's too), so the
            # measured run finds its processes started. Workers Ray still starts during the
            # measured run are counted (``<name>_workers_started``), not hidden.
            n_shards = math.ceil(n / v["shard_size"])
            cfg = config(trials_for(args.sessions_b, conditions), args.turns, v["shard_size"], v["shard_cpus"], v["ep"])
            # the run's worker processes: its shards in groups of the shards that share a CPU
            # (engine.worker_shards, run/fan_out.py), each group's CPUs asked for together
            per_worker = cfg.engine.worker_shards()
            n_workers, worker_cpus = math.ceil(n_shards / per_worker), v["shard_cpus"] * per_worker
            res[f"{name}_shards"], res[f"{name}_worker_processes"] = n_shards, n_workers
            run(config(1, 1, math.ceil(DEMO_ITEMS * 3 * conditions / n_shards), v["shard_cpus"], v["ep"]),
                output=workdir / f"b-warm-{name}", quiet=True, tables=False)
            # a short warm run's shards end before every worker has started, and Ray hands the
            # next shard to a worker that is free: so the run may warm fewer processes than the
            # measured run keeps busy at once, and each missing one starts mid-measurement (3-4
            # CPU-s of start, imports and the kernel's load, charged to its first shard)
            res[f"{name}_workers_prestarted"] = prestart_workers(n_workers, worker_cpus, args.cpus)
            ref_before = reference_ms()
            cpu0 = _cpu_s(server.pid)
            load0 = os.getloadavg()[0]
            with ClientCpu(exclude=(server.pid,)) as client, ReferenceDuringRun() as during:
                t0 = time.perf_counter()
                out = run(cfg, output=workdir / f"b-{name}", quiet=True, tables=False)
                wall = time.perf_counter() - t0
            server_cpu = _cpu_s(server.pid) - cpu0  # the test server's own work on the same cores
            client.exclude_driver_cpu(during.own_cpu_s)  # the reference samples are the bench's work
            ref_during = during.median() or ref_before
            res.update({f"{name}_wall_s": round(wall, 2), f"{name}_failed": out.n_failed,
                        f"{name}_server_cpu_s": round(server_cpu, 1), f"{name}_wall_vs_bound_ratio": round(wall / bound, 3) if bound else None,  # --delay 0: no bound
                        f"{name}_loadavg_1m": round(load0, 2)})
            res.update(client_cpu_figures(name, client.seconds(), out.llm, wall, n))
            res.update(per_run_split(name, client.workers_by_title(), client.seconds()["driver"], out.llm))
            res[f"{name}_workers_started"] = client.workers_started()
            # the host's pace on a quiet machine just before, and under the run's own load (the
            # median of the samples taken during it)
            res.update({f"{name}_reference_ms_before": round(ref_before, 2), f"{name}_reference_ms_during": round(ref_during, 2),
                        f"{name}_reference_samples": len(during.samples)})
            res.update(kernel_figures(workdir / f"b-{name}", f"{name}_"))
            res.update(transport_baseline(name, port, bodies, res[f"{name}_requests"], n_workers, worker_cpus,
                                          math.ceil(args.concurrency / n_workers), server.pid))
            transport = res[f"{name}_transport_cpu_ms_per_request"]
            res[f"{name}_client_vs_transport_ratio"] = (round(res[f"{name}_client_cpu_ms_per_request"] / transport, 3)
                                                        if transport else None)
            print(f"(b) {name}: {n} sessions x {args.turns} turns x {roles} roles at {args.delay}s, {args.concurrency} in flight "
                  f"({v['shard_size']}-session shards in {n_workers} worker processes): wall {wall:.1f}s vs ideal lockstep bound {bound:.1f}s: "
                  f"ratio {wall / bound if bound else float('nan'):.3f} (target <= 1.15); the server itself used {server_cpu:.0f} CPU-s; "
                  f"the client {res[f'{name}_client_cpu_s']:.1f} CPU-s, {res[f'{name}_client_cpu_ms_per_request']:.2f} ms "
                  f"per request (driver {res[f'{name}_driver_cpu_s']:.1f}, workers {res[f'{name}_workers_cpu_s']:.1f}, "
                  f"Ray's daemons {res[f'{name}_ray_system_cpu_s']:.1f} CPU-s); workers started meanwhile "
                  f"{res[f'{name}_workers_started']}; load {load0:.2f}; the host's reference work {ref_before:.1f} ms before, "
                  f"{ref_during:.1f} ms during; the transport alone in the same layout "
                  f"{transport:.3f} ms per request: the client {res[f'{name}_client_vs_transport_ratio']} x that",
                  flush=True)
        if "http_global_limiter_wall_s" in res:
            # the run-wide limiter against the per-process cap measured just before (same server,
            # same sessions): what sharing one cap across every worker costs
            res["limiter_vs_bound_ratio"] = res["http_global_limiter_wall_vs_bound_ratio"]
            res["limiter_vs_per_process_ratio"] = round(res["http_global_limiter_wall_s"] / res["http_wall_s"], 3)
            print(f"(b) run-wide limiter: {res['limiter_vs_bound_ratio']} x the lockstep bound (target <= 1.15), "
                  f"{res['limiter_vs_per_process_ratio']} x the per-process cap's wall time", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return res


# ----------------------------------------------------------------------------- (e)


def _start(cmd: list[str], what: str) -> tuple[subprocess.Popen, int]:
    """Start a server process on port 0 and wait until it listens; returns (process, port)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while (port := listening_port(proc.pid)) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.2)
    return proc, port


def session_chains(served: list[dict]) -> dict[str, list[tuple[int, str, float]]]:
    """Served delays per session: ``{session: [(turn, role, delay_s), ...]}`` (request ids are
    ``<session>#<turn>:<role>``; a repaired request shares its id and adds to the chain)."""
    chains: dict[str, list[tuple[int, str, float]]] = {}
    for d in served:
        sid, _, rest = d["request_id"].partition("#")
        turn, _, role = rest.partition(":")
        chains.setdefault(sid, []).append((int(turn or 0), role, float(d["delay_s"])))
    return chains


def lockstep_bound(chains: dict[str, list[tuple[int, str, float]]], shards: list[list[str]]) -> float:
    """What the lockstep loop could at best do with these delays: per shard and turn, each role's
    phase lasts as long as its slowest request (the phases follow one another); shards run at once."""
    worst = 0.0
    for members in shards:
        phases: dict[tuple[int, str], float] = {}
        for sid in members:
            per_request: dict[tuple[int, str], float] = {}
            for turn, role, delay in chains.get(sid, []):
                per_request[(turn, role)] = per_request.get((turn, role), 0.0) + delay
            for key, delay in per_request.items():
                phases[key] = max(phases.get(key, 0.0), delay)
        worst = max(worst, sum(phases.values()))
    return worst


def bench_e(args, workdir: Path) -> dict:
    import urllib.request

    from ray_knowsim.config import parse_run_config
    from ray_knowsim.plan.sessions import Plan, load_inputs
    from ray_knowsim.run.fan_out import run

    server, port = _start([sys.executable, "-m", "ray_knowsim.cli.main", "serve-offline", "--host", "127.0.0.1",
                           "--port", "0", "--model-name", "offline"], "serve-offline")
    proxy = None
    try:
        proxy, proxy_port = _start([sys.executable, str(ROOT / "scripts" / "bench" / "latency_proxy.py"), "--upstream",
                                    f"http://127.0.0.1:{port}", "--port", "0", "--dist", args.latency,
                                    "--median-s", str(args.median_s), "--log-sd", str(args.log_sd),
                                    "--seed", str(args.latency_seed)], "latency proxy")
        conditions, levels = 4, 3
        trials = max(1, math.ceil(args.sessions_e / (MATH_ITEMS * levels * conditions)))
        n = trials * MATH_ITEMS * levels * conditions
        n_shards = math.ceil(n / args.shard_size_e)
        shard_cpus = round(args.cpus / n_shards, 3)  # every shard at once: none waits for a free CPU

        def config(name: str, turns: int, trials_: int, base_url: str):
            data = base_config(trials_, conditions, turns, args.shard_size_e, tasks=("math",), shard_cpus=shard_cpus,
                               llm_cache=False)
            data["name"] = name
            data["models"] = {"ep": {"backend": "http", "base_url": base_url, "model": "offline", "timeout_s": 300,
                                     "structured_output": "json_object", "offline_server": True, "send_knowsim_headers": True,
                                     "max_in_flight": args.in_flight_e}}
            data["roles"] = {"user_sim": "ep", "extractor": "ep", "judge": None, "assistant": {"model": "ep"}}
            return parse_run_config(data)

        # warm the shard workers (process start, imports, the kernel's load) with the server directly
        run(config("bench-e-warm", 1, 1, f"http://127.0.0.1:{port}/v1"), output=workdir / "e-warm", quiet=True, tables=False)
        cfg = config("bench-e", args.turns_e, trials, f"http://127.0.0.1:{proxy_port}/v1")
        load0 = os.getloadavg()[0]
        with ClientCpu(exclude=(server.pid, proxy.pid)) as client:
            t0 = time.perf_counter()
            out = run(cfg, output=workdir / "e", quiet=True, tables=False)
            wall = time.perf_counter() - t0
        with urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/delays", timeout=60) as resp:
            served = json.loads(resp.read())
        chains = session_chains(served)
        per_session = {sid: sum(d for _, _, d in chain) for sid, chain in chains.items()}
        ideal = max(per_session.values())
        plan = Plan(cfg, load_inputs(cfg))
        shards = [[s.session_id for s in plan.shard(k).sessions] for k in range(plan.n_shards)]
        lockstep = lockstep_bound(chains, shards)
        delays = sorted(float(d["delay_s"]) for d in served)
        kernel = kernel_figures(workdir / "e", "")
    finally:
        for proc in (proxy, server):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=10)
    res = {"e_sessions": n, "e_turns": args.turns_e, "e_latency": args.latency, "e_median_s": args.median_s,
           "e_log_sd": args.log_sd, "e_requests": len(served), "e_delay_p50_s": round(delays[len(delays) // 2], 3),
           "e_delay_p99_s": round(delays[min(len(delays) - 1, int(0.99 * len(delays)))], 3),
           "e_shards": n_shards, "e_shard_cpus": shard_cpus, "e_in_flight_per_process": args.in_flight_e,
           "e_failed": out.n_failed, "e_wall_s": round(wall, 2), "e_ideal_s": round(ideal, 2),
           "e_lockstep_bound_s": round(lockstep, 2), "wall_vs_ideal_ratio": round(wall / ideal, 3),
           "lockstep_bound_vs_ideal_ratio": round(lockstep / ideal, 3),
           "sessions_per_hour": round(n / wall * 3600, 1), "e_loadavg_1m": round(load0, 2)}
    res.update(client_cpu_figures("e", client.seconds(), out.llm, wall, n))
    res.update(per_run_split("e", client.workers_by_title(), client.seconds()["driver"], out.llm))
    res.update(kernel)
    calls = kernel.get("kernel_calls", 0)
    print(f"(e) {n} sessions x {args.turns_e} turns over HTTP, {args.latency} latency (median {args.median_s}s, log-sd "
          f"{args.log_sd}; served p50 {res['e_delay_p50_s']}s, p99 {res['e_delay_p99_s']}s), {n_shards} shards at once: "
          f"wall {wall:.1f}s vs per-session ideal {ideal:.1f}s: ratio {res['wall_vs_ideal_ratio']} (target <= 1.1); "
          f"the lockstep bound of these delays is {lockstep:.1f}s; {res['sessions_per_hour']} sessions/hour"
          + (f"; kernel: {res['kernel_sessions_per_flush_mean']} sessions per call on average over {calls} calls "
             f"({res['kernel_ms_per_call']} ms per call; calls by sessions stepped: {res['kernel_calls_by_size']})"
             if calls else ""), flush=True)
    return res


# ----------------------------------------------------------------------------- (d)


def _lockstep_task(limits_dict, limiter, n_sessions: int, steps: int, delay: float, local_cap: int) -> float:
    """One shard's worth of lockstep traffic without the simulation: ``steps`` rounds, each one
    request per session held for ``delay`` s. The cap is either ``limiter`` (run-wide) or a
    per-process semaphore of ``local_cap``. Returns the seconds it took."""
    import asyncio as aio
    import time as t

    async def main() -> float:
        sem = aio.Semaphore(local_cap) if limiter is None else None

        async def one() -> None:
            if sem is not None:
                async with sem:
                    await aio.sleep(delay)
                return
            grant = await limiter.acquire()
            try:
                await aio.sleep(delay)
            finally:
                limiter.release(grant)

        t0 = t.perf_counter()
        for _ in range(steps):
            await aio.gather(*(one() for _ in range(n_sessions)))
        if limiter is not None:
            await limiter.aclose()
        return t.perf_counter() - t0

    return aio.run(main())


def bench_d(args) -> dict:
    """(d) the limiter alone: the same lockstep request pattern as (b) (sessions x 9 rounds, cap
    ``--concurrency``) with no simulation CPU, from ``--limiter-tasks`` concurrent Ray tasks: the
    cap as per-process semaphores (cap / tasks each; the baseline) vs the run-wide limiter."""
    import ray

    from ray_knowsim.backends.limiter import RateLimits, get_or_create_limiter

    tasks = args.limiter_tasks
    per_task = math.ceil(args.sessions_b / tasks)
    steps = args.turns * 3
    bound = steps * args.delay * math.ceil(per_task * tasks / args.concurrency)
    remote = ray.remote(num_cpus=min(1.0, args.cpus / tasks))(_lockstep_task)
    out = {"d_tasks": tasks, "d_sessions": per_task * tasks, "d_bound_s": round(bound, 2)}
    limits = RateLimits(max_in_flight=args.concurrency)
    owner = get_or_create_limiter("bench-limiter-d", limits)
    # warm the worker processes first, so neither variant pays their start-up
    ray.get([remote.remote(limits.model_dump(), None, 1, 1, 0.5, 1) for _ in range(tasks)])
    for name, limiter in (("per_process", None), ("run_wide", owner)):
        t0 = time.perf_counter()
        inner = ray.get([remote.remote(limits.model_dump(), limiter, per_task, steps, args.delay,
                                       max(1, args.concurrency // tasks)) for _ in range(tasks)])
        wall = time.perf_counter() - t0
        out[f"d_{name}_wall_s"] = round(wall, 2)
        out[f"d_{name}_slowest_task_s"] = round(max(inner), 2)
    out["limiter_isolated_vs_bound_ratio"] = round(out["d_run_wide_wall_s"] / bound, 3)
    out["limiter_isolated_vs_per_process_ratio"] = round(out["d_run_wide_wall_s"] / out["d_per_process_wall_s"], 3)
    # inside the tasks (from each task's start): what the cap costs, without Ray's task scheduling
    out["limiter_isolated_task_vs_bound_ratio"] = round(out["d_run_wide_slowest_task_s"] / bound, 3)
    out["per_process_task_vs_bound_ratio"] = round(out["d_per_process_slowest_task_s"] / bound, 3)
    print(f"(d) limiter alone: {per_task * tasks} sessions x {steps} rounds at {args.delay}s from {tasks} tasks, "
          f"{args.concurrency} in flight: per-process caps {out['d_per_process_wall_s']}s, run-wide limiter "
          f"{out['d_run_wide_wall_s']}s, bound {bound:.1f}s: ratio {out['limiter_isolated_vs_bound_ratio']} "
          f"(vs per-process {out['limiter_isolated_vs_per_process_ratio']})", flush=True)
    return out


# ----------------------------------------------------------------------------- (c)

def driver_peak_mb(args, workdir: Path, sessions: int) -> tuple[float, float]:
    # the tests' child: VmHWM, not ru_maxrss (which survives exec, so it would report the bench's own size)
    sys.path.insert(0, str(ROOT))
    from tests.doubles.peak_memory import CHILD_MAIN, peak_bytes

    data = base_config(trials_for(sessions, 4), 4, 2, 100)
    data["engine"]["num_cpus"] = args.cpus
    path = workdir / f"c{sessions}.yaml"
    path.write_text(yaml.safe_dump(data))
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD_MAIN, "run", str(path), "-o", str(workdir / f"c{sessions}"), "--quiet"],
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"driver run failed: {proc.stderr[-2000:]}")
    return peak_bytes(proc.stdout) / 2**20, wall


def bench_c(args, workdir: Path) -> dict:
    small, small_s = driver_peak_mb(args, workdir, args.sessions_c_small)
    big, big_s = driver_peak_mb(args, workdir, args.sessions_c_big)
    n_small, n_big = (trials_for(k, 4) * DEMO_ITEMS * 3 * 4 for k in (args.sessions_c_small, args.sessions_c_big))
    res = {"driver_peak_mb_small": round(small, 1), "driver_peak_mb_big": round(big, 1), "c_shard_fn": shard_fn(),
           "c_sessions_small": n_small, "c_sessions_big": n_big,
           "driver_memory_10k_vs_1k_ratio": round(big / small, 3)}
    print(f"(c) driver peak RSS: {small:.0f} MB at {n_small} sessions ({small_s:.0f}s), "
          f"{big:.0f} MB at {n_big} ({big_s:.0f}s): ratio {res['driver_memory_10k_vs_1k_ratio']}", flush=True)
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpus", type=int, default=2)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--sessions-a", type=int, default=500)
    p.add_argument("--turns-a", type=int, default=15, help="(a) turns per session (the paper's 15)")
    p.add_argument("--shard-size", type=int, default=0, help="(a) sessions per shard (default: 4 even waves per CPU)")
    p.add_argument("--sessions-b", type=int, default=1000)
    p.add_argument("--shard-size-b", type=int, default=125)
    p.add_argument("--shard-cpus-b", type=float, default=0.2)
    p.add_argument("--delay", type=float, default=0.5)
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--shards-per-cpu", type=int, default=2,
                   help="(b) concurrent shards per CPU: one renders/parses while the others wait on the server")
    p.add_argument("--shards-per-worker", type=int, default=None,
                   help="(b) engine.shards_per_worker (default: the engine's, as many shards as share a CPU; "
                        "1: a worker process per shard, as before 2026-12-06)")
    p.add_argument("--limiter-variant", action="store_true",
                   help="(b) also run the same cap through the run-wide limiter actor over smaller shards")
    p.add_argument("--limiter-tasks", type=int, default=10,
                   help="(d) concurrent Ray tasks sharing the cap in the limiter-only measurement")
    p.add_argument("--sessions-c-small", type=int, default=1000)
    p.add_argument("--sessions-c-big", type=int, default=10000)
    p.add_argument("--sessions-e", type=int, default=96)
    p.add_argument("--turns-e", type=int, default=6)
    p.add_argument("--shard-size-e", type=int, default=24)
    p.add_argument("--latency", choices=("lognormal", "constant"), default="lognormal")
    p.add_argument("--median-s", type=float, default=0.4, help="(e) the delay (constant) or its median (log-normal)")
    p.add_argument("--log-sd", type=float, default=1.0, help="(e) log-normal: standard deviation of log(delay)")
    p.add_argument("--latency-seed", type=int, default=0)
    p.add_argument("--in-flight-e", type=int, default=1000, help="(e) max_in_flight per process (high: no cap binds)")
    p.add_argument("--skip", default="", help="comma list of parts to skip: a,b,c,d,e")
    p.add_argument("--shard-fn", default=REAL,
                   help="'module:function' measured instead of the simulation loop (importable by the workers: "
                        "PYTHONPATH), e.g. an older loop kept outside the package for a before/after figure")
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test, not a measurement)")
    args = p.parse_args()
    if args.quick:
        args.sessions_a, args.sessions_b, args.delay, args.turns_a = 84, 168, 0.1, 3
        args.concurrency, args.sessions_c_small, args.sessions_c_big = 42, 84, 840
        args.sessions_e, args.turns_e, args.median_s = 48, 2, 0.1
    skip = set(filter(None, args.skip.split(",")))
    _SHARD_FN[0] = args.shard_fn
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    warn_if_plain()
    figures: dict = {"shard_fn": shard_fn(), "cpus": args.cpus, "turns": args.turns,
                     "loadavg_1m_start": round(os.getloadavg()[0], 2), "machine_cpus": os.cpu_count(), **python_build()}
    with tempfile.TemporaryDirectory(prefix="rk-bench-") as tmp:
        workdir = Path(tmp)
        if not {"a", "b", "d", "e"} <= skip:
            import ray
            from ray.data import DataContext

            # Ray keeps only num_cpus idle workers and ends the rest after a few idle seconds, so
            # between a variant's warm-up and its measured run the warmed processes would be ended
            # and started again mid-measurement (3-4 CPU-s each: process start, imports, the kernel's
            # load). A long run keeps its workers busy and pays that once; the bench keeps its warm
            # ones (IDLE_WORKERS_KEPT) so that what it measures is that long run's steady cost per request.
            ray.init(address="local", num_cpus=args.cpus, object_store_memory=256 * 2**20, include_dashboard=False,
                     logging_level="ERROR", log_to_driver=False, _system_config={"num_workers_soft_limit": IDLE_WORKERS_KEPT})
            DataContext.get_current().enable_progress_bars = False
            try:
                if "a" not in skip:
                    figures.update(bench_a(args, workdir))
                if "b" not in skip:
                    figures.update(bench_b(args, workdir))
                if "d" not in skip and args.limiter_variant:
                    figures.update(bench_d(args))
                if "e" not in skip:
                    figures.update(bench_e(args, workdir))
            finally:
                ray.shutdown()
        if "c" not in skip:
            figures.update(bench_c(args, workdir))
    figures["loadavg_1m_end"] = round(os.getloadavg()[0], 2)  # other work on the machine skews times
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
