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

Run: ``source scripts/_venv.sh && python scripts/bench/training_env.py`` (``--quick``: 32 episodes x 2 turns).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine import _start  # noqa: E402  (the server starter the engine benchmark uses)

ITEMS = [("math", "demo_math_01"), ("math", "demo_math_02"), ("math", "demo_math_03"), ("math", "demo_math_04"),
         ("expertqa", "demo_open_01"), ("expertqa", "demo_open_02")]
LEVELS = ("novice", "intermediate", "advanced")
REPLIES = ["Let us start from what you already know and build one step at a time.",
           "Here is the key idea, with a small example you can check yourself.",
           "Good. Now connect that to the next piece: why does it hold in general?",
           "Try it: apply the idea to a new case and tell me where you get stuck."]


def environment(base_url: str, turns: int, in_flight: int):
    from ray_knowsim.training import EnvironmentConfig, TrainingEnvironment

    model = {"backend": "http", "base_url": base_url, "model": "offline", "timeout_s": 300, "structured_output": "json_object",
             "offline_server": True, "send_knowsim_headers": True, "max_in_flight": in_flight}
    overrides = [f"models.ep={json.dumps(model)}", "roles.user_sim=ep", "roles.extractor=ep", "roles.judge=null",
                 "engine.llm_cache=false"]
    return TrainingEnvironment.from_config(EnvironmentConfig(overrides=overrides, max_turns=turns, early_stop="virtual",
                                                             max_episodes=100_000))


async def drive(env, episodes: int, turns: int, tag: str) -> tuple[list[dict], float]:
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=256)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--median-s", type=float, default=0.4)
    p.add_argument("--log-sd", type=float, default=1.0)
    p.add_argument("--latency-seed", type=int, default=0)
    p.add_argument("--in-flight", type=int, default=1024, help="the HTTP client's per-process cap (must not bind)")
    p.add_argument("--quick", action="store_true", help="32 episodes x 2 turns")
    args = p.parse_args()
    if args.quick:
        args.episodes, args.turns = 32, 2

    server, port = _start([sys.executable, "-m", "ray_knowsim.cli.main", "serve-offline", "--host", "127.0.0.1",
                           "--port", "0", "--model-name", "offline"], "serve-offline")
    proxy = None
    try:
        proxy, proxy_port = _start([sys.executable, str(Path(__file__).with_name("latency_proxy.py")), "--upstream",
                                    f"http://127.0.0.1:{port}", "--port", "0", "--median-s", str(args.median_s),
                                    "--log-sd", str(args.log_sd), "--seed", str(args.latency_seed)], "latency proxy")

        async def both():
            warm = environment(f"http://127.0.0.1:{port}/v1", 1, args.in_flight)  # imports, the kernel's load, connections
            await drive(warm, 8, 1, "warm")
            await warm.aclose()
            env = environment(f"http://127.0.0.1:{proxy_port}/v1", args.turns, args.in_flight)
            records, wall = await drive(env, args.episodes, args.turns, "ep")
            await env.aclose()
            return records, wall, env.kernel.stats.to_dict(), drive.cpu_s

        records, wall, kernel, cpu_s = asyncio.run(both())
        with urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/delays", timeout=60) as resp:
            served = json.loads(resp.read())
    finally:
        for proc in (proxy, server):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=10)

    delay_of: dict[tuple[str, int, str], float] = {}  # the latency the proxy drew (no upstream time)
    held: dict[tuple[str, int, str], float] = {}  # (session, turn, role) -> seconds the proxy held it (all its calls)
    chain: dict[str, float] = {}  # session -> its requests' delays back to back
    for d in served:
        session, _, rest = d["request_id"].partition("#")
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
    delays = sorted(float(d["delay_s"]) for d in served)
    out = {
        "episodes": args.episodes,
        "turns": args.turns,
        "steps": steps,
        "scored_steps": sum(r["scored"] for r in records),
        "requests": len(served),
        "wall_s": round(wall, 3),
        "steps_per_s": round(steps / wall, 2),
        "step_wall_mean_s": round(statistics.fmean(walls), 4),
        "step_model_mean_s": round(statistics.fmean(models), 4),
        "env_overhead_mean_s": round(statistics.fmean(overheads), 4),
        "env_overhead_p50_s": round(statistics.median(overheads), 4),
        "env_overhead_p99_s": round(sorted(overheads)[int(0.99 * (steps - 1))], 4),
        "delay_median_s": round(delays[len(delays) // 2], 3),
        "delay_p99_s": round(delays[int(0.99 * (len(delays) - 1))], 3),
        "env_cpu_s": round(cpu_s, 2),
        "env_cpu_per_step_s": round(cpu_s / steps, 5),
        # how many steps/s one process's CPU could serve, and the episodes it keeps busy at this latency
        "cpu_bound_steps_per_s": round(steps / cpu_s, 1),
        "episodes_one_process_serves": round(statistics.fmean(latencies) / (cpu_s / steps), 1),
        "step_latency_mean_s": round(statistics.fmean(latencies), 4),
        "kernel": kernel,
        "kernel_episodes_per_call": round(kernel["sessions"] / max(1, kernel["calls"]), 2),
        "steps_per_s_vs_ideal_ratio": round((steps / wall) / (steps / ideal_wall), 3),
        # the environment's own CPU per step against the latency a step waits for: its overhead
        # share when the process is not saturated (measured CPU, not wall time on a shared machine)
        "env_cpu_vs_latency_ratio": round((cpu_s / steps) / statistics.fmean(latencies), 4),
        "env_overhead_ratio": round(statistics.fmean(overheads) / statistics.fmean(walls), 4),
    }
    print(f"{steps} steps of {args.episodes} episodes in {wall:.1f} s: {out['steps_per_s']} steps/s; per step "
          f"{out['step_wall_mean_s']} s wall, {out['step_model_mean_s']} s model, {out['env_overhead_mean_s']} s environment "
          f"({100 * out['env_overhead_ratio']:.1f} %, goal <= 5 %); CPU {1000 * out['env_cpu_per_step_s']:.1f} ms per step "
          f"= {100 * out['env_cpu_vs_latency_ratio']:.1f} % of the {out['step_latency_mean_s']} s latency it waits for")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
