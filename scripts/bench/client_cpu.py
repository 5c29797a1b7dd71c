"""Benchmark: the client's own CPU per request, in one process, without Ray (the shard worker's
share of ``scripts/bench/engine.py`` (b), isolated so it can be profiled and compared quietly).

One shard task as a Ray worker runs it (:func:`ray_knowsim.run.worker.execute_shard`: the
simulation loop, the HTTP client, the spend journal, the commits, the progress reporter against
a board that drops what it is sent), in this process, against ``ray-knowsim serve-offline``
answering after ``--delay`` seconds, with ``--in-flight`` requests in flight. The figure is this
process's CPU time (``time.process_time``: every thread, the commit thread included) per request
answered; the server runs in its own process and is not counted. Each of ``--repeats`` runs is
measured after a warm-up run (imports, the kernel's load, the first connections). The baseline
measured in the same run is the same shard's requests sent from the same process with no
simulation at all (the request bodies already built, answers read as bytes, through the transport
the model client uses: the plain-http client, or aiohttp with ``RAY_KNOWSIM_HTTP_TRANSPORT=aiohttp``):
what the HTTP transport alone costs here, so ``client_vs_transport_ratio`` says how much the simulation adds.

Of the client's CPU it also reports the garbage collector's share (``gc_cpu_ms_per_request``: thread CPU
inside collections, from ``gc.callbacks``) and the commit thread's and the fold's (``commit_cpu_ms_per_request``,
``fold_cpu_ms_per_request``), the parts a profile of the event loop does not show as such.

``--profile FILE`` writes cProfile stats of the last measured run (read them with ``python -m
pstats FILE`` or ``--top N`` here); profiling slows the run, so the CPU figures of a profiled run
are not the ones to report.

Run: ``source scripts/_venv.sh && python scripts/bench/client_cpu.py`` (``--quick``: a smoke run).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import math
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import _start, base_config, python_build, sample_bodies as engine_sample_bodies, transport_only, trials_for, warn_if_plain  # noqa: E402  (engine.py (b)'s configs and baseline)


class _DroppingBoard:
    """A progress board that takes the reporter's snapshots and drops them (the worker's side of
    the progress path is measured; the actor's is not in this process)."""

    class _Method:
        def remote(self, *args, **kwargs) -> None:
            return None

    report = _Method()


def _config(port: int, sessions: int, turns: int, in_flight: int):
    from ray_knowsim.config import parse_run_config

    conditions = 4
    data = base_config(trials_for(sessions, conditions), conditions, turns, 10**6, llm_cache=False)
    data["models"] = {"ep": {"backend": "http", "base_url": f"http://127.0.0.1:{port}/v1", "model": "offline",
                             "timeout_s": 120, "structured_output": "json_object", "offline_server": True,
                             "max_in_flight": in_flight}}
    data["roles"] = {"user_sim": "ep", "extractor": "ep", "judge": None, "assistant": {"model": "ep"}}
    return parse_run_config(data)


class _GcTime:
    """Thread CPU spent in the garbage collector's collections (any thread: a collection holds the
    GIL from its start callback to its end callback, so the two run back to back in one thread).
    Collections are charged to whatever allocates in a profile; this says what they cost in all."""

    def __init__(self) -> None:
        self.seconds, self.collections, self._start = 0.0, 0, 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._start
            self.collections += 1

    def __enter__(self) -> "_GcTime":
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self)


def run_shard_once(cfg, out: Path, profile: cProfile.Profile | None = None) -> dict:
    """One shard of every planned session through execute_shard; CPU and wall seconds, requests."""
    from ray_knowsim.plan.build import make_context
    from ray_knowsim.backends.model_set import build_models
    from ray_knowsim.plan.sessions import Plan, load_inputs
    from ray_knowsim.io.commits import RunDir
    from ray_knowsim.run.manifest import write_manifest
    from ray_knowsim.run.worker import CommitPolicy, execute_shard
    from ray_knowsim.llm.accounting import Accounting

    inputs = load_inputs(cfg)
    plan = Plan(cfg, inputs)
    models = build_models(cfg, inputs.graphs, None)
    ctx = make_context(cfg, "client-cpu", cfg.config_hash())
    write_manifest(RunDir(out), {"config_hash": ctx.config_hash})  # what a run's driver writes before any shard
    shard = plan.shard(0)
    c0, t0 = time.process_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    with _GcTime() as collector:
        summary = execute_shard(shard, models, ctx, str(out), cfg.engine.shard_fn, cfg.engine.shard_fn_options, None,
                                _DroppingBoard(), CommitPolicy(every=cfg.engine.commit_every, every_s=cfg.engine.commit_every_s),
                                plan.fingerprint)
    if profile is not None:
        profile.disable()
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    requests = Accounting.from_dict(summary["accounting"]).total().calls
    return {"sessions": summary["sessions"], "failed": summary["new_failed"], "requests": requests, "cpu_s": cpu,
            "wall_s": wall, "kernel": summary.get("kernel", {}), "commit_s": summary["commit_seconds"],
            "fold_s": summary["fold_seconds"], "commit_cpu_s": summary["commit_cpu_seconds"],
            "fold_cpu_s": summary["fold_cpu_seconds"], "commits": summary["commits"],
            "gc_cpu_s": collector.seconds, "gc_collections": collector.collections}


def sample_bodies(port: int, n: int) -> list[bytes]:
    """``n`` request bodies of the shape the loop sends (engine.py's :func:`engine.sample_bodies`
    over this bench's config)."""
    return engine_sample_bodies(_config(port, n, 1, 16), n)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=126, help="sessions in the shard (rounded up to whole trials)")
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--delay", type=float, default=0.2)
    p.add_argument("--in-flight", type=int, default=50)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--profile", default="", help="write cProfile stats of one more (profiled) run to this file")
    p.add_argument("--top", type=int, default=0, help="print the profile's top N functions by own time")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.sessions, args.turns, args.repeats, args.delay = 84, 2, 1, 0.05
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    warn_if_plain()
    server, port = _start([sys.executable, "-m", "ray_knowsim.cli.main", "serve-offline", "--host", "127.0.0.1",
                           "--port", "0", "--delay-s", str(args.delay), "--model-name", "offline"], "serve-offline")
    from ray_knowsim.llm.http.plain import use_plain

    transport_name = "plain" if use_plain(f"http://127.0.0.1:{port}/v1") else "aiohttp"
    figures: dict = {"loadavg_1m_start": round(os.getloadavg()[0], 2), "delay_s": args.delay, "in_flight": args.in_flight,
                     "transport": transport_name, **python_build()}
    try:
        with tempfile.TemporaryDirectory(prefix="rk-client-cpu-") as tmp:
            root = Path(tmp)
            run_shard_once(_config(port, 84, 1, args.in_flight), root / "warm")
            cfg = _config(port, args.sessions, args.turns, args.in_flight)
            runs = [run_shard_once(cfg, root / f"r{k}") for k in range(args.repeats)]
            best = min(runs, key=lambda r: r["cpu_s"] / max(1, r["requests"]))
            n_req = best["requests"]
            bodies = sample_bodies(port, best["sessions"])
            bodies = (bodies * math.ceil(n_req / len(bodies)))[:n_req]
            transport_only(port, bodies[: min(len(bodies), 200)], args.in_flight)  # warm
            t_cpu, t_wall = transport_only(port, bodies, args.in_flight)
            if args.profile:
                prof = cProfile.Profile(time.thread_time)  # CPU of the event loop's thread, not wall (GIL waits, load)
                run_shard_once(cfg, root / "profiled", prof)
                prof.dump_stats(args.profile)
                if args.top:
                    pstats.Stats(args.profile).sort_stats("tottime").print_stats(args.top)
    finally:
        server.terminate()
        server.wait(timeout=10)
    per = 1000 * best["cpu_s"] / max(1, n_req)
    transport = 1000 * t_cpu / max(1, n_req)
    figures.update({"sessions": best["sessions"], "turns": args.turns, "failed": best["failed"], "requests": n_req,
                    "client_cpu_s": round(best["cpu_s"], 3), "client_wall_s": round(best["wall_s"], 2),
                    "client_cpu_ms_per_request": round(per, 3),
                    "client_cpu_ms_per_request_runs": [round(1000 * r["cpu_s"] / max(1, r["requests"]), 3) for r in runs],
                    "transport_cpu_ms_per_request": round(transport, 3), "transport_wall_s": round(t_wall, 2),
                    "client_vs_transport_ratio": round(per / transport, 3) if transport else None,
                    "kernel": best["kernel"], "commits": best["commits"], "commit_wall_s": round(best["commit_s"], 3),
                    "fold_wall_s": best["fold_s"], "commit_cpu_s": round(best["commit_cpu_s"], 3),
                    "fold_cpu_s": best["fold_cpu_s"], "gc_collections": best["gc_collections"],
                    "gc_cpu_ms_per_request": round(1000 * best["gc_cpu_s"] / max(1, n_req), 3),
                    "commit_cpu_ms_per_request": round(1000 * best["commit_cpu_s"] / max(1, n_req), 3),
                    "fold_cpu_ms_per_request": round(1000 * best["fold_cpu_s"] / max(1, n_req), 3),
                    "loadavg_1m_end": round(os.getloadavg()[0], 2)})
    print(f"client: {best['sessions']} sessions x {args.turns} turns, {n_req} requests at {args.delay}s, {args.in_flight} in "
          f"flight: {best['cpu_s']:.2f} CPU-s, {per:.3f} ms per request (runs: {figures['client_cpu_ms_per_request_runs']}); "
          f"the transport ({transport_name}) alone {transport:.3f} ms per request: ratio {figures['client_vs_transport_ratio']}; of the client's: "
          f"garbage collection {figures['gc_cpu_ms_per_request']}, commits {figures['commit_cpu_ms_per_request']}, fold "
          f"{figures['fold_cpu_ms_per_request']} ms per request; "
          f"load {figures['loadavg_1m_start']} -> {figures['loadavg_1m_end']}", flush=True)
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
