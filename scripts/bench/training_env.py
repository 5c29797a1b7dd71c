"""Benchmark: the training environment's own overhead per step, against the model time it waits for.

``--episodes`` (default 256) episodes at once, each ``--turns`` tutor turns (the "virtual" early
stop: every episode runs them all), in one :class:`ray_knowsim.training.TrainingEnvironment`. The
learner simulator and the extractor are one HTTP endpoint: ``ray-knowsim serve-offline`` behind
``scripts/bench/latency_proxy.py``, each answer held for a log-normal delay (``--median-s`` 0.4,
``--log-sd`` 1.0, seeded by the request body). The policy answers at once (a fixed text per turn),
so a step's wall time is the environment plus the models.

Per step (``step()`` called -> observation back) the model time is what the proxy held the
step's requests (the extractor's reading of this turn, then the learner's next message; from the
request ids it records), so the environment's own time is the step's wall time minus that: the
HTTP client, the limiter, parsing, the batched kernel step, the rules, the bookkeeping, and the
event loop's queueing under ``--episodes`` concurrent episodes.

Reported: ``steps_per_s``; ``env_overhead_ratio`` = mean environment time per step / mean step
wall time (goal <= 0.05; on a saturated or shared CPU it counts queueing behind other episodes'
work); ``env_cpu_vs_latency_ratio`` = this process's CPU per step / the latency a step waits for
(the overhead share while the process is not saturated; ``episodes_one_process_serves`` is where
it saturates); ``steps_per_s_vs_ideal_ratio`` = steps/s against the bound the served
delays allow (every episode's chain of requests back to back, no overhead at all); the kernel's
episodes per call. The last line is one JSON object.

``--servers 1,2``: the same episodes also go through ``ray-knowsim env serve`` over OpenEnv's
WebSocket API (OpenEnv's own ``GenericEnvClient``, one session per episode, all at once): ``1`` is
the single-process server, ``N > 1`` ``--replicas N`` on Ray Serve (a local Ray of the server's
own). The in-process run above is the baseline, measured in the same run against the same
proxy (same request bodies, so the same delays). Per server: ``serve<N>_env_overhead_ratio``
(the step's wall time seen by the client minus the model time, over the wall time: the wire,
the Serve proxy, the server's environment and this client's own decoding),
``serve<N>_steps_per_s_vs_inprocess_ratio``, ``serve<N>_server_cpu_vs_latency_ratio`` (the CPU of
every process of the server: the replicas, Serve's proxy and controller, Ray's own, per step,
against the latency a step waits for), and how the episodes spread over the replicas (each
episode's observations must all come from one replica: checked, and counted in
``serve<N>_episodes_split``).

Run: ``source scripts/_venv.sh && python scripts/bench/training_env.py [--servers 1,2]`` (``--quick``: 32 episodes x 2 turns).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine import _start  # noqa: E402  (the server starter the engine benchmark uses)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.doubles.envserver import start_env_serve, stop_env_serve  # noqa: E402

ITEMS = [("math", "demo_math_01"), ("math", "demo_math_02"), ("math", "demo_math_03"), ("math", "demo_math_04"),
         ("expertqa", "demo_open_01"), ("expertqa", "demo_open_02")]
LEVELS = ("novice", "intermediate", "advanced")
REPLIES = ["Let us start from what you already know and build one step at a time.",
           "Here is the key idea, with a small example you can check yourself.",
           "Good. Now connect that to the next piece: why does it hold in general?",
           "Try it: apply the idea to a new case and tell me where you get stuck."]


def model_overrides(base_url: str, in_flight: int) -> list[str]:
    """The run-config overrides that put the learner and the extractor on the (delayed) endpoint."""
    model = {"backend": "http", "base_url": base_url, "model": "offline", "timeout_s": 300, "structured_output": "json_object",
             "offline_server": True, "send_knowsim_headers": True, "max_in_flight": in_flight}
    return [f"models.ep={json.dumps(model)}", "roles.user_sim=ep", "roles.extractor=ep", "roles.judge=null",
            "engine.llm_cache=false"]


class TimedModel:
    """The environment's model as it is, timing each ``generate`` as the environment awaits it
    (limiter, HTTP, the proxy and its queue, the answer's arrival on this loop): with it, a step's
    wall time splits into what its requests took as this process saw them and everything else."""

    def __init__(self, inner, log: list) -> None:
        self.inner, self.log = inner, log

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def generate(self, request):
        t0 = time.time()
        try:
            return await self.inner.generate(request)
        finally:
            self.log.append((request.request_id, t0, time.time()))


def timed(env, log: list) -> None:
    """Wrap the environment's learner and extractor models (one wrapper when they are one model)."""
    same = env.user_sim is env.extractor
    env.user_sim = TimedModel(env.user_sim, log)
    env.extractor = env.user_sim if same else TimedModel(env.extractor, log)


def environment(base_url: str, turns: int, in_flight: int):
    from ray_knowsim.training import EnvironmentConfig, TrainingEnvironment

    return TrainingEnvironment.from_config(EnvironmentConfig(overrides=model_overrides(base_url, in_flight), max_turns=turns,
                                                             early_stop="virtual", max_episodes=100_000))


async def drive(env, episodes: int, tag: str) -> tuple[list[dict], float]:
    """Run every episode at once; returns each step's record and the wall time of all."""
    records: list[dict] = []

    async def one(k: int) -> None:
        task, item = ITEMS[k % len(ITEMS)]
        eid = f"{tag}{k:05d}"
        obs = await env.reset(task=task, item_id=item, level=LEVELS[k % len(LEVELS)], seed=k, episode_id=eid)
        session = obs.metadata.session_id
        while not obs.done:
            t0 = time.time()
            obs = await env.step(eid, REPLIES[obs.turn % len(REPLIES)])
            records.append({"session": session, "turn": obs.turn, "start": t0, "end": time.time(), "done": obs.done,
                            "scored": obs.reward is not None})

    t0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(k) for k in range(episodes)))
    drive.cpu_s = time.process_time() - cpu0  # this process's CPU (every thread): the environment's own work
    return records, time.perf_counter() - t0


async def drive_server(url: str, episodes: int, tag: str) -> tuple[list[dict], float, dict[str, set[str]]]:
    """Every episode at once through an ``env serve`` server, one OpenEnv WebSocket session each:
    each step's record, the wall time of all, and the server processes each episode's observations came from."""
    from openenv.core.generic_client import GenericEnvClient

    records: list[dict] = []
    servers: dict[str, set[str]] = {}

    async def one(k: int) -> None:
        task, item = ITEMS[k % len(ITEMS)]
        eid = f"{tag}{k:05d}"
        async with GenericEnvClient(base_url=url, connect_timeout_s=300, message_timeout_s=900) as client:
            r = await client.reset(seed=k, episode_id=eid, task=task, item_id=item, level=LEVELS[k % len(LEVELS)])
            session = r.observation["episode_metadata"]["session_id"]
            seen = servers[eid] = {r.observation["server"]}
            while not r.done:
                t0 = time.time()
                r = await client.step({"message": REPLIES[r.observation["turn"] % len(REPLIES)]})
                records.append({"session": session, "turn": r.observation["turn"], "start": t0, "end": time.time(),
                                "done": r.done, "scored": r.reward is not None})
                seen.add(r.observation["server"])

    t0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(k) for k in range(episodes)))
    drive_server.cpu_s = time.process_time() - cpu0  # this client's CPU (WebSocket, JSON decoding)
    return records, time.perf_counter() - t0, servers


def process_cpu(root_pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of a process and every descendant: a server's whole tree
    (with Serve: its local Ray's GCS, raylet, the proxy, the controller and the replicas)."""
    import psutil

    out: dict[int, float] = {}
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for proc in procs:
        try:
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return out


def runqueue_wait(pids) -> dict[tuple[int, str], float]:
    """Seconds each thread of ``pids`` spent runnable but waiting for a CPU (Linux
    ``/proc/<pid>/task/<tid>/schedstat``, second field): the part of an overhead that is the
    machine's contention, not the environment's own work. Empty where the kernel does not say."""
    out: dict[tuple[int, str], float] = {}
    for pid in pids:
        for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
            try:
                out[(pid, stat.parent.name)] = int(stat.read_text().split()[1]) / 1e9
            except (OSError, ValueError, IndexError):
                pass
    return out


def waited(before: dict, after: dict) -> float:
    return sum(v - before.get(k, 0.0) for k, v in after.items())


def start_env_server(replicas: int, overrides: list[str], turns: int, sessions: int) -> tuple[subprocess.Popen, str]:
    """``ray-knowsim env serve`` on a free port in its own session; returns it and its URL once it serves."""
    args = ["--port", "0", "--max-turns", str(turns), "--early-stop", "virtual", "--max-sessions", str(sessions),
            "--replicas", str(replicas)]
    for o in overrides:
        args += ["--set", o]
    proc, url, _ = start_env_serve(args, timeout_s=600)  # Ray + Serve + replicas on a loaded 2-core machine
    return proc, url


def summarize(records: list[dict], served: list[dict], wall: float, cpu_s: float, episodes: int, turns: int) -> dict:
    """Per-step wall, model and environment time of one run (``served``: the proxy's records of its requests)."""
    sessions = {r["session"] for r in records}
    delay_of: dict[tuple[str, int, str], float] = {}  # the latency the proxy drew (no upstream time)
    held: dict[tuple[str, int, str], float] = {}  # (session, turn, role) -> seconds the proxy held it (all its calls)
    chain: dict[str, float] = {}  # session -> its requests' delays back to back
    n_requests = 0
    for d in served:
        session, _, rest = d["request_id"].partition("#")
        if session not in sessions:
            continue  # another run's (the warm-up's, another server's)
        n_requests += 1
        turn, _, role = rest.partition(":")
        key = (session, int(turn or 0), role)
        held[key] = held.get(key, 0.0) + (d["end"] - d["start"])
        delay_of[key] = delay_of.get(key, 0.0) + float(d["delay_s"])
        chain[session] = chain.get(session, 0.0) + float(d["delay_s"])
    walls, models, latencies = [], [], []
    for r in records:
        keys = [(r["session"], r["turn"], "extractor")] + ([] if r["done"] else [(r["session"], r["turn"] + 1, "user_sim")])
        walls.append(r["end"] - r["start"])
        models.append(sum(held.get(k, 0.0) for k in keys))
        latencies.append(sum(delay_of.get(k, 0.0) for k in keys))
    overheads = [w - m for w, m in zip(walls, models)]
    steps = len(records)
    ideal_wall = max(chain.values()) if chain else float("nan")  # the slowest episode alone, with no overhead
    return {
        "episodes": episodes,
        "turns": turns,
        "steps": steps,
        "scored_steps": sum(r["scored"] for r in records),
        "requests": n_requests,
        "wall_s": round(wall, 3),
        "steps_per_s": round(steps / wall, 2),
        "step_wall_mean_s": round(statistics.fmean(walls), 4),
        "step_model_mean_s": round(statistics.fmean(models), 4),
        "env_overhead_mean_s": round(statistics.fmean(overheads), 4),
        "env_overhead_p50_s": round(statistics.median(overheads), 4),
        "env_overhead_p99_s": round(sorted(overheads)[int(0.99 * (steps - 1))], 4),
        "env_cpu_s": round(cpu_s, 2),
        "env_cpu_per_step_s": round(cpu_s / steps, 5),
        # how many steps/s one process's CPU could serve, and the episodes it keeps busy at this latency
        "cpu_bound_steps_per_s": round(steps / cpu_s, 1),
        "episodes_one_process_serves": round(statistics.fmean(latencies) / (cpu_s / steps), 1),
        "step_latency_mean_s": round(statistics.fmean(latencies), 4),
        "steps_per_s_vs_ideal_ratio": round((steps / wall) / (steps / ideal_wall), 3),
        # the environment's own CPU per step against the latency a step waits for: its overhead
        # share when the process is not saturated (measured CPU, not wall time on a shared machine)
        "env_cpu_vs_latency_ratio": round((cpu_s / steps) / statistics.fmean(latencies), 4),
        "env_overhead_ratio": round(statistics.fmean(overheads) / statistics.fmean(walls), 4),
    }


def run_server(replicas: int, args: argparse.Namespace, proxy_url: str, proxy_port: int) -> tuple[dict, list, float, dict]:
    """One ``env serve`` configuration: warm it, drive the episodes, return (records, ...) for summarize."""
    overrides = model_overrides(proxy_url, args.in_flight)
    proc, url = start_env_server(replicas, overrides, args.turns, max(args.episodes, 8))
    try:
        asyncio.run(drive_server(url, min(8, args.episodes), f"warm{replicas}-"))  # imports, the kernel, connections
        before = process_cpu(proc.pid)
        wait0, client0 = runqueue_wait(before), runqueue_wait([os.getpid()])
        records, wall, servers = asyncio.run(drive_server(url, args.episodes, f"s{replicas}-"))
        after = process_cpu(proc.pid)
        wait_s, client_wait_s = waited(wait0, runqueue_wait(after)), waited(client0, runqueue_wait([os.getpid()]))
    finally:
        stop_env_serve(proc)
    server_cpu = sum(v - before.get(pid, 0.0) for pid, v in after.items())
    replica_pids = {int(s.rsplit(":", 1)[1]) for seen in servers.values() for s in seen}
    replica_cpu = sum(after.get(pid, 0.0) - before.get(pid, 0.0) for pid in replica_pids)
    spread: dict[str, int] = {}
    for seen in servers.values():
        if len(seen) == 1:
            spread[next(iter(seen))] = spread.get(next(iter(seen)), 0) + 1
    extra = {"replicas": replicas, "server_processes": len(after), "server_cpu_s": round(server_cpu, 2),
             "replica_cpu_s": round(replica_cpu, 2), "client_cpu_s": round(drive_server.cpu_s, 2),
             "episodes_per_replica": sorted(spread.values(), reverse=True),
             "server_runqueue_wait_s": round(wait_s, 2), "client_runqueue_wait_s": round(client_wait_s, 2),
             "episodes_split": sum(1 for seen in servers.values() if len(seen) > 1)}
    return records, wall, server_cpu, extra


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=256)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--median-s", type=float, default=0.4)
    p.add_argument("--log-sd", type=float, default=1.0)
    p.add_argument("--latency-seed", type=int, default=0)
    p.add_argument("--in-flight", type=int, default=1024, help="the HTTP client's per-process cap (must not bind)")
    p.add_argument("--servers", default="", help="also through `env serve` with these replica counts, e.g. 1,2")
    p.add_argument("--quick", action="store_true", help="32 episodes x 2 turns")
    args = p.parse_args()
    if args.quick:
        args.episodes, args.turns = 32, 2
    server_counts = [int(x) for x in args.servers.split(",") if x.strip()]
    load0 = os.getloadavg()

    server, port = _start([sys.executable, "-m", "ray_knowsim.cli.main", "serve-offline", "--host", "127.0.0.1",
                           "--port", "0", "--model-name", "offline"], "serve-offline")
    proxy = None
    runs: dict[int, tuple] = {}
    try:
        proxy, proxy_port = _start([sys.executable, str(Path(__file__).with_name("latency_proxy.py")), "--upstream",
                                    f"http://127.0.0.1:{port}", "--port", "0", "--median-s", str(args.median_s),
                                    "--log-sd", str(args.log_sd), "--seed", str(args.latency_seed)], "latency proxy")
        proxy_url = f"http://127.0.0.1:{proxy_port}/v1"

        async def both():
            env = environment(proxy_url, args.turns, args.in_flight)
            await drive(env, min(8, args.episodes), "warm")  # imports, the kernel's load, connections: as the servers'
            env.kernel.stats = type(env.kernel.stats)()
            wait0 = runqueue_wait([os.getpid()])
            timed(env, both.awaited)
            records, wall = await drive(env, args.episodes, "ep")
            both.wait_s = waited(wait0, runqueue_wait([os.getpid()]))
            await env.aclose()
            return records, wall, env.kernel.stats.to_dict(), drive.cpu_s

        both.awaited = []  # (request id, sent, answered) as the environment awaited each request
        records, wall, kernel, cpu_s = asyncio.run(both())
        for n in server_counts:
            runs[n] = run_server(n, args, proxy_url, proxy_port)
        with urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/delays", timeout=60) as resp:
            served = json.loads(resp.read())
    finally:
        for proc in (proxy, server):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=10)

    out = summarize(records, served, wall, cpu_s, args.episodes, args.turns)
    delays = sorted(float(d["delay_s"]) for d in served)
    awaited: dict[tuple[str, int, str], float] = {}
    for rid, t0, t1 in both.awaited:
        session, _, rest = rid.partition("#")
        turn, _, role = rest.partition(":")
        key = (session, int(turn or 0), role)
        awaited[key] = awaited.get(key, 0.0) + (t1 - t0)
    seen = []
    for r in records:
        keys = [(r["session"], r["turn"], "extractor")] + ([] if r["done"] else [(r["session"], r["turn"] + 1, "user_sim")])
        seen.append(sum(awaited.get(k, 0.0) for k in keys))
    # the split of a step's wall time: its requests as this process awaited them vs the rest (the
    # environment's own: its CPU, its wait for a CPU, the kernel batch); and how much longer the
    # requests took here than the proxy held them (the transport and the proxy process's own queue)
    out["step_model_awaited_mean_s"] = round(statistics.fmean(seen), 4)
    out["env_own_mean_s"] = round(out["step_wall_mean_s"] - out["step_model_awaited_mean_s"], 4)
    out["transport_mean_s"] = round(out["step_model_awaited_mean_s"] - out["step_model_mean_s"], 4)
    out["env_own_ratio"] = round(out["env_own_mean_s"] / out["step_wall_mean_s"], 4)
    out["env_runqueue_wait_s"] = round(both.wait_s, 2)  # this process's threads, ready but without a CPU
    out["env_runqueue_wait_share_of_wall"] = round(both.wait_s / out["wall_s"], 3)
    out.update({"delay_median_s": round(delays[len(delays) // 2], 3), "delay_p99_s": round(delays[int(0.99 * (len(delays) - 1))], 3),
                "kernel": kernel, "kernel_episodes_per_call": round(kernel["sessions"] / max(1, kernel["calls"]), 2)})
    print(f"in process: {out['steps']} steps of {args.episodes} episodes in {out['wall_s']:.1f} s: {out['steps_per_s']} steps/s; per step "
          f"{out['step_wall_mean_s']} s wall, {out['step_model_mean_s']} s model, {out['env_overhead_mean_s']} s environment "
          f"({100 * out['env_overhead_ratio']:.1f} %, goal <= 5 %); CPU {1000 * out['env_cpu_per_step_s']:.1f} ms per step "
          f"= {100 * out['env_cpu_vs_latency_ratio']:.1f} % of the {out['step_latency_mean_s']} s latency it waits for; "
          f"its threads waited {out['env_runqueue_wait_s']} s for a CPU ({100 * out['env_runqueue_wait_share_of_wall']:.0f} % of the wall time); "
          f"of the step, the requests as the environment awaited them {out['step_model_awaited_mean_s']} s (transport and "
          f"proxy queue {out['transport_mean_s']} s), the environment's own {out['env_own_mean_s']} s "
          f"({100 * out['env_own_ratio']:.1f} %)")
    for n, (recs, w, server_cpu, extra) in runs.items():
        s = summarize(recs, served, w, server_cpu, args.episodes, args.turns)
        s.update(extra)
        s["steps_per_s_vs_inprocess_ratio"] = round(s["steps_per_s"] / out["steps_per_s"], 3)
        s["server_cpu_vs_latency_ratio"] = s.pop("env_cpu_vs_latency_ratio")  # the whole server tree's CPU
        s["client_cpu_vs_latency_ratio"] = round((extra["client_cpu_s"] / s["steps"]) / s["step_latency_mean_s"], 4)
        for k in ("env_cpu_s", "env_cpu_per_step_s", "cpu_bound_steps_per_s", "episodes_one_process_serves"):
            s.pop(k)
        print(f"env serve --replicas {n}: {s['steps']} steps in {s['wall_s']:.1f} s: {s['steps_per_s']} steps/s "
              f"({s['steps_per_s_vs_inprocess_ratio']}x in process); per step {s['step_wall_mean_s']} s wall, "
              f"{s['step_model_mean_s']} s model, {s['env_overhead_mean_s']} s overhead ({100 * s['env_overhead_ratio']:.1f} %); "
              f"server CPU {s['server_cpu_s']} s ({100 * s['server_cpu_vs_latency_ratio']:.1f} % of the latency; replicas "
              f"{s['replica_cpu_s']} s; its threads waited {s['server_runqueue_wait_s']} s for a CPU), client CPU {s['client_cpu_s']} s (waited {s['client_runqueue_wait_s']} s); episodes per replica {s['episodes_per_replica']}, "
              f"split {s['episodes_split']}")
        out.update({f"serve{n}_{k}": v for k, v in s.items() if k not in ("episodes", "turns")})
    out["load_average_start"] = [round(x, 2) for x in load0]
    out["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
