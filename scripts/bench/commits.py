"""Benchmark: what streamed commits cost against one commit per shard.

A shard task commits its finished sessions in small steps (``engine.commit_every`` sessions, or
``commit_every_s`` seconds) and folds them into one commit at its end (io/commits.py). Measured
here, in one run, on the same rows (a shard of the demo's real simulation loop, offline models):

* baseline: ONE commit of the whole shard (what a shard did before streamed commits);
* streamed: ceil(n / every) small commits written as the worker writes them (Arrow IPC steps,
  io/commits.STEP_FILES), then the fold;
* per small commit: its wall time, and its CPU (this thread's: the rest of the wall is fsync) as
  an Arrow IPC step against the same step as uncompressed Parquet (what steps were written as
  before), measured alternately in the same run: ``step_arrow_vs_parquet_cpu_ratio``;
* the reader's open (markers read, index built) over many commits.

Each variant is repeated (``--repeat``) in fresh folders; medians are reported. The last line is
one JSON object; ``streamed_vs_single_commit_ratio`` = streamed / baseline wall time.

Run: ``source scripts/_venv.sh && python scripts/bench/commits.py`` (``--help`` for sizes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path


def shard_rows(sessions: int, turns: int):
    """(order, sessions table, turns table) of one shard of the demo config through the real loop."""
    from ray_knowsim.plan.build import make_context
    from ray_knowsim.config import load_run_config
    from ray_knowsim.backends.model_set import build_models
    from ray_knowsim.plan.sessions import Plan, load_inputs
    from ray_knowsim.run.worker import load_shard_fn, with_initial_states
    from ray_knowsim.io.commits import SESSION_SCHEMA, TURN_SCHEMA, sort_tables
    from ray_knowsim.io.parquet import rows_table
    from ray_knowsim.llm.accounting import Accounting

    root = Path(__file__).resolve().parents[2]
    cfg = load_run_config(root / "configs" / "demo.yaml", overrides=[f"engine.shard_size={sessions}", f"max_turns={turns}"])
    inputs = load_inputs(cfg)
    plan = Plan(cfg, inputs)
    ctx = make_context(cfg, "bench", cfg.config_hash())
    shard = with_initial_states(plan.shard(0), ctx)
    fn = load_shard_fn(cfg.engine.shard_fn, cfg.engine.shard_fn_options)
    models = build_models(cfg, inputs.graphs, None).role_models(Accounting())

    async def collect():
        return [r async for r in fn(shard, models, ctx)]

    results = asyncio.run(collect())
    order = [s.session_id for s in shard.sessions]
    s, t = rows_table([r.session for r in results], SESSION_SCHEMA), rows_table([x for r in results for x in r.turns], TURN_SCHEMA)
    return order, *sort_tables(s, t, order)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=32, help="sessions in the shard (default 32, the default shard_size)")
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--every", type=int, default=8, help="sessions per small commit (default 8, engine.commit_every)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--open-commits", type=int, default=500, help="commits in the folder whose reader open is timed")
    args = ap.parse_args()

    import pyarrow.compute as pc

    from ray_knowsim.io.commits import STEP_FILES, fold_commits, write_commit
    from ray_knowsim.io.rundir import RunReader

    order, sessions, turns = shard_rows(args.sessions, args.turns)
    ids = sessions.column("session_id")

    def part(table, chunk):
        return table.filter(pc.is_in(table.column("session_id"), value_set=ids.take(list(chunk))))

    chunks = [range(k, min(k + args.every, len(order))) for k in range(0, len(order), args.every)]
    single, streamed, small = [], [], []
    step_cpu: dict[str, list[float]] = {"parquet": [], "arrow": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            write_commit(Path(d), shard_id="shard-000000", config_hash="h", sessions=sessions, turns=turns)
            single.append(time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            made = []
            for chunk in chunks:
                t1 = time.perf_counter()
                made.append(write_commit(Path(d), shard_id="shard-000000", config_hash="h",
                                         sessions=part(sessions, chunk), turns=part(turns, chunk), file_format=STEP_FILES))
                small.append(time.perf_counter() - t1)
            fold_commits(Path(d), made, order)
            streamed.append(time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as d:
            pieces = [(part(sessions, chunk), part(turns, chunk)) for chunk in chunks]
            for fmt in ("parquet", "arrow") if len(single) % 2 else ("arrow", "parquet"):  # alternated
                for s_part, t_part in pieces:
                    c1 = time.thread_time()
                    write_commit(Path(d), shard_id="shard-000000", config_hash="h", sessions=s_part, turns=t_part,
                                 file_format=fmt, compression="none")
                    step_cpu[fmt].append(time.thread_time() - c1)
    with tempfile.TemporaryDirectory() as d:
        one = part(sessions, range(1)), part(turns, range(1))
        for k in range(args.open_commits):
            write_commit(Path(d), shard_id=f"shard-{k:06d}", config_hash="h", sessions=one[0], turns=one[1])
        opens = []
        for _ in range(3):
            t0 = time.perf_counter()
            RunReader.open(d, config_hash="h")
            opens.append(time.perf_counter() - t0)
    base, stream = statistics.median(single), statistics.median(streamed)
    cpu = {fmt: statistics.median(v) for fmt, v in step_cpu.items()}
    print(f"shard of {len(order)} sessions x {args.turns} turns ({sessions.nbytes + turns.nbytes:,} bytes in Arrow)")
    print(f"one commit per shard: {base * 1e3:.1f} ms; {len(chunks)} commits of {args.every} + fold: {stream * 1e3:.1f} ms")
    print(f"one small commit: median {statistics.median(small) * 1e3:.1f} ms; its CPU as Arrow IPC {cpu['arrow'] * 1e3:.2f} ms, "
          f"as Parquet {cpu['parquet'] * 1e3:.2f} ms")
    print(f"reader open over {args.open_commits} commits: {statistics.median(opens) * 1e3:.0f} ms")
    print(json.dumps({"sessions": len(order), "turns": args.turns, "every": args.every, "single_commit_ms": round(base * 1e3, 2),
                      "streamed_ms": round(stream * 1e3, 2), "small_commit_ms": round(statistics.median(small) * 1e3, 2),
                      "reader_open_ms_per_commit": round(statistics.median(opens) * 1e3 / args.open_commits, 3),
                      "step_cpu_ms_arrow": round(cpu["arrow"] * 1e3, 3), "step_cpu_ms_parquet": round(cpu["parquet"] * 1e3, 3),
                      "step_arrow_vs_parquet_cpu_ratio": round(cpu["arrow"] / cpu["parquet"], 3),
                      "streamed_vs_single_commit_ratio": round(stream / base, 2)}))


if __name__ == "__main__":
    main()
