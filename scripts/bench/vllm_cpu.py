"""Benchmark: the vLLM engine actor (backends/vllm/) on CPU with SmolLM2-135M, each figure against a
baseline measured in this run.

(a) continuous batching: generated tokens/s with 8 concurrent shards vs 1 shard (``--repeats``
    interleaved runs of each, the best of each compared). A shard is a Ray
    task that runs ``--turns`` lockstep turns over ``--sessions`` sessions (one request per
    session per turn, the turn waits for all of them), through the ChatModel the real shards use.
    ``continuous_batching_ratio`` = tok/s(8 shards) / tok/s(1 shard) (goal >= 2.5 on 2 cores).
    Defaults (2 sessions x 3 turns, 3 repeats): a one-shard baseline of 4 sessions already fills
    most of 2 cores (~70-90 of the ~180-200 tok/s they give), so the ratio would measure the
    machine, not the batching across shards.
(b) isolation: one call with 64 requests of which one is longer than max_model_len vs the same
    63 requests alone: ``isolation_ratio`` = wall(with) / wall(without) (goal <= 1.5) and
    ``isolation_failed`` (must be exactly 1, named ``vllm_prompt_too_long``).
(c) a dead engine actor: a small multi-turn run (4 shards x 4 sessions x 3 turns, each turn's
    prompt carries the session's previous answers) undisturbed, then again with the replica
    killed mid-run (``ray.kill``; Ray restarts it, callers wait and re-send their seeded
    requests). ``kill_rows_equal``: the rows (session, turn, text) of both runs are identical;
    ``kill_restart_s``: how long the run stalled.

Greedy decoding (temperature 0) throughout: the CPU build's seeded sampling is fragile (it can kill
the engine core: shared/notes/environment.md); a dead engine shows up as ``vllm_engine_dead``
errors and a restart, and is counted in ``engine_dead_errors``.

Run in the LLM env with this checkout first on the path:
    PYTHONPATH=$PWD .venv-llm/bin/python scripts/bench/vllm_cpu.py    (--quick: fewer requests)
The machine's load average is printed with the figures (other processes skew CPU timings).
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
TOPICS = ["the moon", "a river", "bread", "winter", "a library", "bees", "trains", "the sea", "a garden", "clocks",
          "mountains", "rain", "a violin", "maps", "salt", "owls"]


def model_dir() -> str:
    d = Path(os.environ.get("RAY_KNOWSIM_SMOLLM2_DIR") or Path.home() / ".cache/ray_knowsim/smollm2-135m-instruct")
    if not (d / ".ray_knowsim_complete").is_file():
        raise SystemExit(f"SmolLM2 not found at {d}: run scripts/setup_llm_cpu.sh")
    return str(d)


def chat(sid: str, turn: int, text: str, max_tokens: int):
    from ray_knowsim.schema.chat import ChatRequest

    return ChatRequest(messages=({"role": "user", "content": text},), temperature=0.0, max_tokens=max_tokens,
                       seed=None, request_id=f"{sid}#{turn}:assistant")


def run_shard(model, shard: int, sessions: int, turns: int, max_tokens: int, tag: str) -> list[tuple]:
    """One lockstep shard: each turn sends every session's request and waits for all."""
    from ray_knowsim.llm.protocol import generate_all

    history: dict[str, list[str]] = {}
    rows = []
    for turn in range(turns):
        reqs = []
        for s in range(sessions):
            sid = f"{tag}/shard{shard}/s{s}"
            topic = TOPICS[(shard * sessions + s) % len(TOPICS)]
            prev = " ".join(history.get(sid, []))[-400:]
            text = f"Tell me one short fact about {topic}." + (f" You said before: {prev} Now another one." if prev else "")
            reqs.append(chat(sid, turn, text, max_tokens))
        outs = asyncio.run(generate_all(model, reqs))
        for r, o in zip(reqs, outs):
            sid = r.request_id.split("#")[0]
            history.setdefault(sid, []).append(o.text)
            rows.append((sid, turn, o.text, o.usage.completion_tokens, o.error))
    return rows


def fan_out(model, shards: int, sessions: int, turns: int, max_tokens: int, tag: str) -> tuple[list[tuple], float]:
    import ray

    task = ray.remote(num_cpus=0)(run_shard)
    t = time.perf_counter()
    parts = ray.get([task.remote(model, k, sessions, turns, max_tokens, tag) for k in range(shards)])
    return [r for p in parts for r in p], time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sessions", type=int, default=2, help="sessions per shard in (a)")
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--skip-kill", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="OMP_NUM_THREADS of the engine (vLLM otherwise drops its engine core to 1 thread; with the "
                         "'uni' executor the model runs there)")
    ap.add_argument("--repeats", type=int, default=3, help="(a) and (b) run this many times, interleaved; best of each")
    args = ap.parse_args()
    import ray

    from ray_knowsim.backends.vllm.config import VLLMModelConfig
    from ray_knowsim.backends.vllm.pool import VLLMPool
    from ray_knowsim.llm.protocol import generate_all

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", num_cpus=2, object_store_memory=256 * 2**20, include_dashboard=False,
             logging_level="WARNING", log_to_driver=False)
    cfg = VLLMModelConfig(model=model_dir(), served_name="smollm2", num_cpus=1, dtype="bfloat16", max_model_len=1024,
                          enforce_eager=True, seed=0, env={**CPU_ENV, "OMP_NUM_THREADS": str(args.threads)}, engine_kwargs={"distributed_executor_backend": "uni"},
                          max_restarts=2, restart_wait_s=900)
    figures: dict = {"load_avg_start": os.getloadavg()[0], "cpus": os.cpu_count(), "engine_threads": args.threads}
    pool = VLLMPool(cfg)
    t = time.perf_counter()
    pool.start()
    info = pool.wait_ready(900)
    figures["engine_start_s"] = round(time.perf_counter() - t, 1)
    print(f"engine ready in {figures['engine_start_s']} s (load avg {os.getloadavg()[0]:.1f}): {info}", flush=True)
    try:
        model = pool.model()
        turns = 1 if args.quick else args.turns
        fan_out(model, 1, 2, 1, 8, "warm")  # warm-up (first-call compilation, allocator)
        # (a) interleaved repeats, best (shortest) of each: other processes on a shared machine
        # slow one measurement or the other at random
        runs1, runs8 = [], []
        for rep in range(args.repeats):
            runs1.append(fan_out(model, 1, args.sessions, turns, args.max_tokens, f"a1r{rep}"))
            runs8.append(fan_out(model, 8, args.sessions, turns, args.max_tokens, f"a8r{rep}"))
        rate = lambda rw: sum(r[3] for r in rw[0]) / rw[1]  # noqa: E731
        best1, best8 = max(runs1, key=rate), max(runs8, key=rate)
        err_a = sum(1 for rw in runs1 + runs8 for r in rw[0] if r[4])
        figures.update(one_shard_tok_s=round(rate(best1), 1), eight_shards_tok_s=round(rate(best8), 1),
                       one_shard_tok_s_all=[round(rate(x), 1) for x in runs1], eight_shards_tok_s_all=[round(rate(x), 1) for x in runs8],
                       one_shard_tokens=sum(r[3] for r in best1[0]), eight_shards_tokens=sum(r[3] for r in best8[0]),
                       errors_a=err_a, continuous_batching_ratio=round(rate(best8) / rate(best1), 2))
        print(f"(a) 1 shard: {figures['one_shard_tok_s_all']} tok/s; 8 shards: {figures['eight_shards_tok_s_all']} tok/s "
              f"-> ratio of the best {figures['continuous_batching_ratio']} (errors {err_a})", flush=True)
        # (b)
        n = 16 if args.quick else 64
        good = [chat(f"b/s{i}", 0, f"Tell me one short fact about {TOPICS[i % len(TOPICS)]}.", 24) for i in range(n - 1)]
        bad = chat("b/long", 0, "word " * 1500, 24)
        walls_without, walls_with, failed = [], [], []
        for rep in range(args.repeats):
            t = time.perf_counter()
            outs_without = asyncio.run(generate_all(model, good))
            walls_without.append(time.perf_counter() - t)
            t = time.perf_counter()
            outs_with = asyncio.run(generate_all(model, good[: n // 2] + [bad] + good[n // 2:]))
            walls_with.append(time.perf_counter() - t)
            failed = [o.error for o in outs_with if o.error]
        w_without, w_with = min(walls_without), min(walls_with)
        figures.update(isolation_batch=n, isolation_without_s=[round(w, 2) for w in walls_without],
                       isolation_with_s=[round(w, 2) for w in walls_with],
                       isolation_ratio=round(w_with / w_without, 2), isolation_failed=len(failed),
                       isolation_error=(failed[0] or "")[:80] if failed else None,
                       isolation_others_failed_without=sum(1 for o in outs_without if o.error))
        print(f"(b) {n - 1} requests: {figures['isolation_without_s']} s; with one overlong: {figures['isolation_with_s']} s "
              f"-> ratio of the best {figures['isolation_ratio']}; failed {len(failed)}: {failed[:1]}", flush=True)
        # (c)
        if not args.skip_kill:
            shards, sessions, kturns = (2, 2, 2) if args.quick else (4, 4, 3)
            base, wb = fan_out(model, shards, sessions, kturns, 32, "c")
            import ray as _ray

            task = _ray.remote(num_cpus=0)(run_shard)
            victim = pool.actors[0]
            pid = _ray.get(victim.info.remote())["pid"]
            t = time.perf_counter()
            refs = [task.remote(model, k, sessions, kturns, 32, "c") for k in range(shards)]
            time.sleep(max(1.0, wb / 3))  # mid-run
            _ray.kill(victim, no_restart=False)
            killed_at = time.perf_counter() - t
            disturbed = [r for p in _ray.get(refs) for r in p]
            wd = time.perf_counter() - t
            new_pid = None
            for _ in range(600):  # a restarting actor answers "unavailable" at once; poll
                try:
                    new_pid = _ray.get(victim.info.remote())["pid"]
                    break
                except _ray.exceptions.RayActorError:
                    time.sleep(1)
            strip = lambda rows: sorted((r[0], r[1], r[2], r[4]) for r in rows)  # noqa: E731
            equal = strip(base) == strip(disturbed)
            diff = sum(1 for a, b in zip(strip(base), strip(disturbed)) if a != b)
            figures.update(kill_rows=len(base), kill_rows_equal=equal, kill_rows_differing=diff,
                           kill_errors=sum(1 for r in disturbed if r[4]), kill_undisturbed_s=round(wb, 1),
                           kill_killed_at_s=round(killed_at, 1), kill_run_s=round(wd, 1), kill_restart_s=round(wd - wb, 1),
                           kill_restarted=new_pid != pid)
            print(f"(c) undisturbed {wb:.1f} s; killed at {killed_at:.1f} s, run done in {wd:.1f} s; restarted "
                  f"{new_pid != pid}; rows equal {equal} ({diff} of {len(base)} differ; errors {figures['kill_errors']})", flush=True)
        final = ray.get([a.info.remote() for a in pool.actors])
        figures["engine_dead_errors"] = sum(i["failed"].get("vllm_engine_dead", 0) for i in final)
    finally:
        rep = pool.shutdown()
        figures["shutdown"] = [r.get("released") for r in rep]
        figures["load_avg_end"] = os.getloadavg()[0]
        ray.shutdown()
    goals = {"continuous_batching_ratio": figures.get("continuous_batching_ratio", 0) >= 2.5,
             "isolation_ratio": figures.get("isolation_ratio", 9) <= 1.5 and figures.get("isolation_failed") == 1,
             "kill_rows_equal": figures.get("kill_rows_equal") is True}
    figures["goals_met"] = goals
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
