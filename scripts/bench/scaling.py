"""Benchmark: how the client's throughput and its cost per core scale from one worker node to
several, on a multi-node Ray cluster on this machine (loopback), against a 0 s, a 0.2 s and a
log-normal endpoint.

The bench starts its OWN cluster, the way users start one (``ray start --head --block`` with
``--num-cpus 0``: the head schedules no shard; then worker nodes of ``--node-cpus`` CPUs joined one
at a time with ``ray start --block --address``), in its own temp folder, on ports it picks, each
node in its own process group; it stops exactly those groups at the end (never ``ray stop``).
The endpoints are ``ray-knowsim serve-offline`` answering at once, the same after ``--delay`` s,
and ``scripts/bench/latency_proxy.py`` holding each answer of the first one for a log-normal
delay (``--median-s``, ``--log-sd``; seeded by a hash of the request body, so every run meets the
same delays).

For each cluster size of ``--nodes`` (default 1, 2, 4; nodes are added between sizes) and each
endpoint: ``--sessions-per-node`` sessions per worker node (weak scaling: every node gets the same
work) of ``--turns`` turns (3 requests per turn: learner, assistant, extractor), in
``--shards-per-node`` shards per node (each ``node_cpus / shards_per_node`` Ray CPUs, so Ray places
them evenly), with ``--in-flight-per-node`` requests in flight per node (per-shard caps). Before
each size, a one-turn warm-up run starts a worker on every node (process start, imports, the
kernel's load: a cost per worker, not per request).

Reported per size and endpoint: wall, sessions per hour (the cluster's throughput), the client's
CPU (driver + shard workers, sampled over the bench's process tree; the endpoint's processes
excluded; Ray's daemons beside it), ms per request, **sessions per client core-hour**, cores busy,
and the load average. The baseline measured in the same run is the smallest size (one node):
``scaling_<N>_nodes_<endpoint>_throughput_ratio`` (throughput at N nodes over one node; N would be
perfect scaling) and ``scaling_<N>_nodes_<endpoint>_per_core_ratio`` (sessions per client
core-hour at N nodes over one node; 1.0: adding nodes costs nothing per session). The machine's
real cores bound what loopback nodes can show: four one-CPU nodes on two cores are
over-subscribed, which the load average and ``machine_cpus`` in the JSON say.

Run: ``source scripts/_venv.sh && python scripts/bench/scaling.py`` (``--quick``: a smoke run).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from engine import ClientCpu, _start, base_config, client_cpu_figures, kernel_figures, per_run_split, python_build  # noqa: E402

CONDITIONS, LEVELS, DEMO_ITEMS = 4, 3, 7
PER_TRIAL = CONDITIONS * LEVELS * DEMO_ITEMS  # sessions one trial of the demo design plans


def endpoints(args) -> list[str]:
    return [e for e in args.endpoints.split(",") if e]


def start_endpoints(args) -> tuple[dict[str, int], list]:
    """The three endpoints (each its own process, started on port 0): name -> port, processes."""
    procs, ports = [], {}
    serve = [sys.executable, "-m", "ray_knowsim.cli.main", "serve-offline", "--host", "127.0.0.1", "--port", "0",
             "--model-name", "offline"]
    instant, port = _start(serve, "serve-offline")
    procs.append(instant)
    ports["0s"] = port
    if "0.2s" in endpoints(args):
        delayed, ports["0.2s"] = _start([*serve, "--delay-s", str(args.delay)], "serve-offline (delayed)")
        procs.append(delayed)
    if "lognormal" in endpoints(args):
        proxy, ports["lognormal"] = _start([sys.executable, str(ROOT / "scripts" / "bench" / "latency_proxy.py"),
                                            "--upstream", f"http://127.0.0.1:{port}", "--port", "0", "--dist", "lognormal",
                                            "--median-s", str(args.median_s), "--log-sd", str(args.log_sd), "--seed", "0"],
                                           "latency proxy")
        procs.append(proxy)
    return ports, procs


def config(args, name: str, nodes: int, turns: int, trials_per_node: int, port: int):
    from ray_knowsim.config import parse_run_config

    shards = nodes * args.shards_per_node
    sessions = trials_per_node * nodes * PER_TRIAL
    data = base_config(trials_per_node * nodes, CONDITIONS, turns, math.ceil(sessions / shards),
                       shard_cpus=args.node_cpus / args.shards_per_node, llm_cache=False)
    data["name"] = name
    data["models"] = {"ep": {"backend": "http", "base_url": f"http://127.0.0.1:{port}/v1", "model": "offline",
                             "timeout_s": 300, "structured_output": "json_object", "offline_server": True,
                             "max_in_flight": max(1, args.in_flight_per_node // args.shards_per_node)}}
    data["roles"] = {"user_sim": "ep", "extractor": "ep", "judge": None, "assistant": {"model": "ep"}}
    return parse_run_config(data)


def measure(args, workdir: Path, nodes: int, endpoint: str, port: int, exclude: tuple[int, ...]) -> dict:
    from ray_knowsim.run.fan_out import run

    trials = max(1, round(args.sessions_per_node / PER_TRIAL))
    cfg = config(args, f"scaling-{nodes}-{endpoint}", nodes, args.turns, trials, port)
    n = trials * nodes * PER_TRIAL
    load0 = os.getloadavg()[0]
    with ClientCpu(exclude=exclude) as client:
        t0 = time.perf_counter()
        out = run(cfg, output=workdir / f"n{nodes}-{endpoint}", quiet=True, tables=False)
        wall = time.perf_counter() - t0
    name = f"n{nodes}_{endpoint.replace('.', '')}"
    res = {f"{name}_sessions": n, f"{name}_failed": out.n_failed, f"{name}_wall_s": round(wall, 2),
           f"{name}_sessions_per_hour": round(n / wall * 3600), f"{name}_loadavg_1m": round(load0, 2),
           f"{name}_loadavg_1m_end": round(os.getloadavg()[0], 2)}
    res.update(client_cpu_figures(name, client.seconds(), out.llm, wall, n))
    res.update(per_run_split(name, client.workers_by_title(), client.seconds()["driver"], out.llm))
    kernel = kernel_figures(workdir / f"n{nodes}-{endpoint}", f"{name}_")
    res.update({k: v for k, v in kernel.items() if k.endswith("_sessions_per_flush_mean")})
    print(f"{nodes} node(s), {endpoint} endpoint: {n} sessions x {args.turns} turns in {wall:.1f}s "
          f"({res[f'{name}_sessions_per_hour']} sessions/hour; {out.n_failed} failed); client "
          f"{res[f'{name}_client_cpu_ms_per_request']} ms/request (driver + shard tasks "
          f"{res[f'{name}_shard_cpu_ms_per_request']}; per-run workers {res[f'{name}_per_run_workers_cpu_s']} CPU-s), "
          f"{res[f'{name}_sessions_per_client_core_hour']} "
          f"sessions per client core-hour, {res[f'{name}_client_cores_busy']} cores busy; load {load0:.2f}", flush=True)
    return res


def ratios(figures: dict, sizes: list[int], names: list[str]) -> dict:
    out = {}
    base = sizes[0]
    for endpoint in names:
        e = endpoint.replace(".", "")
        b_thr = figures.get(f"n{base}_{e}_sessions_per_hour")
        b_core = figures.get(f"n{base}_{e}_sessions_per_client_core_hour")
        for n in sizes[1:]:
            thr, core = figures.get(f"n{n}_{e}_sessions_per_hour"), figures.get(f"n{n}_{e}_sessions_per_client_core_hour")
            if b_thr and thr:
                out[f"scaling_{n}_nodes_{e}_throughput_ratio"] = round(thr / b_thr, 3)
            if b_core and core:
                out[f"scaling_{n}_nodes_{e}_per_core_ratio"] = round(core / b_core, 3)
            b_shard, shard = figures.get(f"n{base}_{e}_shard_cpu_ms_per_request"), figures.get(f"n{n}_{e}_shard_cpu_ms_per_request")
            if b_shard and shard:  # CPU per request of the driver and the shard tasks, N nodes over one (1.0: flat)
                out[f"scaling_{n}_nodes_{e}_shard_cpu_per_request_ratio"] = round(shard / b_shard, 3)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="1,2,4", help="cluster sizes (worker nodes), ascending; the first is the baseline")
    p.add_argument("--node-cpus", type=int, default=1, help="CPUs each worker node declares")
    p.add_argument("--endpoints", default="0s,0.2s,lognormal", help="comma list of 0s, 0.2s, lognormal")
    p.add_argument("--sessions-per-node", type=int, default=168, help="rounded to whole trials of 84 sessions")
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--shards-per-node", type=int, default=1)
    p.add_argument("--in-flight-per-node", type=int, default=50)
    p.add_argument("--delay", type=float, default=0.2, help="the constant endpoint's delay")
    p.add_argument("--median-s", type=float, default=0.4)
    p.add_argument("--log-sd", type=float, default=1.0)
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test, not a measurement)")
    args = p.parse_args()
    if args.quick:
        args.nodes, args.sessions_per_node, args.turns, args.endpoints = "1,2", 84, 2, "0s,0.2s"
    sizes = sorted({int(x) for x in args.nodes.split(",") if x})
    # the driver joins a loopback cluster of several nodes: token auth off, multi-node allowed (the
    # cluster's own processes get the same from tests/doubles/raycluster.cluster_env)
    os.environ.update(RAY_AUTH_MODE="disabled", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1", RAY_USAGE_STATS_ENABLED="0")
    os.environ.pop("RAY_ADDRESS", None)
    from tests.doubles.raycluster import ClusterStartError, LocalCluster, cluster_env, ray_command

    import ray

    bin_dir = Path(sys.executable).parent
    ray_bin = ray_command(bin_dir)
    if ray_bin is None:
        print("scaling: the `ray` command is not installed next to this Python", file=sys.stderr)
        return 2
    figures: dict = {**python_build(), "machine_cpus": os.cpu_count(), "node_cpus": args.node_cpus, "turns": args.turns,
                     "shards_per_node": args.shards_per_node, "in_flight_per_node": args.in_flight_per_node,
                     "loadavg_1m_start": round(os.getloadavg()[0], 2), "nodes": sizes}
    cluster = LocalCluster(ray_bin, cluster_env(bin_dir, multi_node=True))
    ports, procs = start_endpoints(args)
    names = endpoints(args)
    try:
        with tempfile.TemporaryDirectory(prefix="rk-scaling-") as tmp:
            workdir = Path(tmp)
            t0 = time.perf_counter()
            cluster.start_head(num_cpus=0)
            figures["head_start_s"] = round(time.perf_counter() - t0, 1)
            ray.init(address=cluster.gcs, logging_level="ERROR", log_to_driver=False)
            from ray.data import DataContext

            DataContext.get_current().enable_progress_bars = False
            exclude = tuple(proc.pid for proc in procs)
            for n in sizes:
                while len(cluster.workers) < n:
                    t0 = time.perf_counter()
                    for attempt in range(1, 4):  # a loaded machine's GCS can time a joining node out
                        try:
                            cluster.add_worker(num_cpus=args.node_cpus)
                            break
                        except ClusterStartError as exc:
                            if attempt == 3:
                                raise
                            print(f"worker node {len(cluster.workers) + 1} did not join (try {attempt}): "
                                  f"{str(exc).splitlines()[-1][:200]}; trying again", flush=True)
                    print(f"worker node {len(cluster.workers)} joined in {time.perf_counter() - t0:.1f}s", flush=True)
                from ray_knowsim.run.fan_out import run

                # a worker on every node before measuring (all shards at once: one per CPU slot)
                run(config(args, f"scaling-warm-{n}", n, 1, 1, ports["0s"]), output=workdir / f"warm{n}", quiet=True,
                    tables=False)
                for endpoint in names:
                    figures.update(measure(args, workdir, n, endpoint, ports[endpoint], exclude))
            ray.shutdown()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.close()  # SIGINT then SIGKILL to each node's own process group, the temp folder removed
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
    figures.update(ratios(figures, sizes, names))
    figures["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    for key in sorted(k for k in figures if k.endswith("_ratio")):
        print(f"{key}: {figures[key]}", flush=True)
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
