"""Benchmark: counterfactual re-scoring through the kernel vs the plain-Python rules, what a task
receives, a whole sweep end to end, and how a sweep scales over the nodes of a cluster.

Workload: a synthetic run directory in the results contract (tests/doubles/synthetic.py; conversations of
15 turns over 8-13-IU graphs, three conditions, three levels) and random rule settings drawn over
capacity ratio, softening, hinge, weights and termination window.

Measured in one run:
* re-scoring throughput, (setting, conversation) pairs per second, of the same function
  (``sweep.rescore.rescore``: replay, every metric, early stops, failure modes, the Arrow rows)
  with backend ``python`` (plain-Python rules, the reference's per-(conversation x setting)
  replay) and backend ``kernel`` (numba batch), each split over ``--cpus`` CPUs of a local Ray as
  tasks after a warm-up; the Python side runs a subset of the settings (it is ~100x slower), the
  rate is per pair; ``kernel_vs_python_ratio`` is the ratio of rates;
* what a task receives: the time a Ray worker takes to get one block of ``--block`` conversations
  from the object store as the packed arrays tasks now receive, against the same block as the
  conversation objects tasks used to receive (``ship_objects_vs_arrays_ratio``);
* the end-to-end sweep (``run_sweep``: load the run, validate and expand the settings, Ray tasks
  that re-score and commit their own pieces, aggregates, identity check), and the sensitivity
  report on top;
* scaling (``--scaling 1,2,4``): a loopback multi-node cluster on this machine (a head with no
  CPUs, worker nodes of one CPU each added one at a time, each with its own object store); for
  each worker count the same sweep (``--scaling-settings`` x the conversations) runs fresh, and
  its re-scoring throughput (pairs per second from the first task submitted to the last piece
  committed) is compared with one worker's, measured in the same run
  (``scaling_<k>_workers_ratio``; efficiency = ratio / k). On a machine with 2 cores the ratio
  cannot pass 2, whatever the number of nodes. ``scaling_ratio`` is the largest worker count's.
The last line is one JSON object with the figures. A ratio that was not measured is there as null:
``kernel_vs_python_ratio`` and ``ship_objects_vs_arrays_ratio`` without the kernel (numba),
``scaling_ratio`` with fewer than two worker counts in ``--scaling``.

Run: ``source scripts/_venv.sh && python scripts/bench/sweep.py`` (``--help`` for sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # loopback clusters (environment notes)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--settings", type=int, default=1000, help="settings of the end-to-end sweep")
    p.add_argument("--conversations", type=int, default=2000, help="conversations of every part")
    p.add_argument("--python-settings", type=int, default=4, help="settings re-scored by the Python rules (x all conversations)")
    p.add_argument("--kernel-settings", type=int, default=200, help="settings re-scored by the kernel in the ratio run")
    p.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray")
    p.add_argument("--block", type=int, default=1000, help="conversations of the block whose transfer is timed")
    p.add_argument("--scaling", default="1,2,4", help="worker counts of the loopback cluster ('' skips the scaling part)")
    p.add_argument("--scaling-settings", type=int, default=300, help="settings of each scaling sweep (x the conversations)")
    p.add_argument("--keep", help="write the run and the sweep here (default: a temporary folder)")
    return p.parse_args()


def space(n: int, seed: int = 1) -> dict:
    return {
        "random": {
            "n": n - 1,
            "seed": seed,
            "params": {
                "capacity_ratio": {"uniform": [0.35, 0.8]},
                "dropoff_softening": {"uniform": [0.7, 2.0]},
                "hinge": {"choice": [True, False]},
                "hinge_ratio": {"uniform": [0.05, 0.3]},
                "w_state.0": {"uniform": [1.2, 2.4]},
                "w_reasoning.1": {"uniform": [0.8, 2.0]},
                "termination.window": {"int": [2, 5]},
            },
        }
    }


def split(items: list, parts: int) -> list[list]:
    k = -(-len(items) // parts)
    return [items[i : i + k] for i in range(0, len(items), k)]


def rate(ray, prepared_ref, settings, n_conv: int, cpus: int) -> tuple[float, float]:
    """(pairs per second, seconds) re-scoring ``settings`` x the chunk, settings split over the CPUs."""
    from ray_knowsim.sweep.rescore import InitPlan, rescore

    task = ray.remote(num_cpus=1)(lambda prep, block: rescore(prep, block, InitPlan()).num_rows)
    ray.get([task.remote(prepared_ref, settings[:1]) for _ in range(2 * cpus)])  # warm-up: imports, numba cache
    t0 = time.perf_counter()
    rows = sum(ray.get([task.remote(prepared_ref, block) for block in split(settings, cpus)]))
    secs = time.perf_counter() - t0
    assert rows == len(settings) * n_conv
    return rows / secs, secs


def receive_seconds(ray, obj, repeats: int = 5) -> float:
    """Median seconds a Ray worker takes to get ``obj`` from the object store (the ref travels
    inside a list, so the task times its own ``ray.get``: what a task pays before it can work)."""
    import statistics

    @ray.remote(num_cpus=1)
    def receive(refs):
        t0 = time.perf_counter()
        ray.get(refs[0])
        return time.perf_counter() - t0

    times = []
    for _ in range(repeats):
        ref = ray.put(obj)  # a fresh object each time: no worker holds it already
        times.append(ray.get(receive.remote([ref])))
        del ref
    return statistics.median(times)


def interrupted_cli_sweep(cfg, address: str, env: dict, root: Path, after_pieces: int = 2) -> int:
    """Start ``ray-knowsim sweep`` as a user would (a driver process joining the cluster through
    RAY_ADDRESS), send it SIGINT once ``after_pieces`` pieces are committed; returns the pieces
    committed when it had exited."""
    import signal
    import subprocess

    import yaml

    cfg_file = root / "resume.yaml"
    # key order kept: a random space draws its parameters in the order the config lists them
    cfg_file.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True), sort_keys=False), encoding="utf-8")
    markers = Path(cfg.output) / "committed"
    cmd = [sys.executable, "-m", "ray_knowsim.cli.main", "sweep", str(cfg_file), "--no-report"]
    with open(root / "resume_driver.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env | {"RAY_ADDRESS": address}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while proc.poll() is None and len(list(markers.glob("*.json"))) < after_pieces:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return len(list(markers.glob("*.json")))


def wait_for_cpus(ray, cpus: int, timeout_s: float = 90) -> None:
    """Until this driver's Ray counts at least ``cpus`` CPUs (a node the cluster counts alive can
    reach the driver's view a moment later)."""
    deadline = time.monotonic() + timeout_s
    while int(ray.cluster_resources().get("CPU", 0)) < cpus:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the driver's Ray still counts fewer than {cpus} CPUs after {timeout_s:.0f} s")
        time.sleep(0.5)


def scaling(args, run_dir: Path, root: Path) -> dict:
    """The same sweep on 1, 2, 4 ... single-CPU worker nodes of a loopback cluster; and a sweep
    interrupted on the smallest cluster, resumed on the largest."""
    import pandas as pd
    import ray

    from tests.doubles.raycluster import LocalCluster, cluster_env, ray_command
    from ray_knowsim.sweep.commits import read_commits
    from ray_knowsim.sweep.config import parse_sweep_config
    from ray_knowsim.sweep.runner import read_rows, run_sweep

    counts = sorted({int(k) for k in args.scaling.split(",") if k.strip()})
    figures: dict = {"scaling_workers": counts, "scaling_settings": args.scaling_settings}
    cfg = parse_sweep_config({"name": "scale", "source": {"run_dir": str(run_dir)}, "space": space(args.scaling_settings, seed=3),
                              "output": str(root / "scale"), "report": {"plots": False}})  # fmt: skip
    warm = cfg.model_copy(update={"output": str(root / "scale_warm"),
                                  "execution": cfg.execution.model_copy(update={"settings_per_task": 1})})  # fmt: skip
    resume = cfg.model_copy(update={"output": str(root / "scale_resume")})
    shutil.rmtree(resume.output, ignore_errors=True)
    rates: dict[int, float] = {}
    bin_dir = Path(sys.executable).parent
    ray_bin = ray_command(bin_dir)
    if ray_bin is None:
        raise SystemExit("scaling: the `ray` command is not installed")
    store = ("--object-store-memory", str(256 * 2**20))  # each node its own object store
    cluster = LocalCluster(ray_bin, cluster_env(bin_dir, multi_node=True))
    try:
        cluster.start_head(num_cpus=0, extra=store)
        ray.init(address=cluster.gcs, logging_level="WARNING")
        try:
            for k in counts:
                while len(cluster.workers) < k:
                    t0 = time.perf_counter()
                    cluster.add_worker(num_cpus=1, extra=store)
                    wait_for_cpus(ray, len(cluster.workers))
                    print(f"  worker node {len(cluster.workers)} up in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
                # warm-up: one-setting pieces, several per CPU, so every node's worker has imported
                # the package and loaded the kernel before the measured sweep
                run_sweep(warm.model_copy(update={"space": warm.space.model_validate(space(4 * k + 1, seed=4))}), fresh=True,
                          report=False, progress=lambda m: None)  # fmt: skip
                result = run_sweep(cfg, fresh=True, report=False, progress=lambda m: None)
                st = result.stats
                rates[k] = result.pairs_run / st.wall_seconds
                figures[f"scaling_{k}_workers_pairs_per_s"] = round(rates[k], 1)
                figures[f"scaling_{k}_workers_pieces"] = st.pieces
                figures[f"scaling_{k}_workers_nodes_used"] = len(st.nodes)
                figures[f"scaling_{k}_workers_task_busy_share"] = round(st.task_seconds / (st.wall_seconds * k), 3)
                figures[f"scaling_{k}_workers_write_seconds_per_piece"] = round(st.write_seconds / max(st.pieces, 1), 4)
                print(f"scaling: {k} worker(s): {rates[k]:,.0f} pairs/s over {st.pieces} pieces on {len(st.nodes)} node(s), "
                      f"{st.wall_seconds:.1f} s", file=sys.stderr)  # fmt: skip
                if result.identity.get("mismatching_conversations"):
                    raise SystemExit("scaling sweep: the default setting does not reproduce the run")
                if k == counts[0] and len(counts) > 1:
                    done = interrupted_cli_sweep(resume, cluster.gcs, cluster.env, root)
                    figures["resume_pieces_before"] = done
                    print(f"resume: a `ray-knowsim sweep` driver on {k} worker(s) interrupted (SIGINT) with {done} pieces committed",
                          file=sys.stderr)  # fmt: skip
            if len(counts) > 1:
                before = read_commits(Path(resume.output))
                again = run_sweep(resume, report=False, progress=lambda m: None)  # on the largest cluster
                same_rows = read_rows(again.out_dir).equals(read_rows(result.out_dir))
                same_agg = pd.read_parquet(again.out_dir / "aggregates.parquet").equals(pd.read_parquet(result.out_dir / "aggregates.parquet"))
                kept = {m.piece.name: m.token for m in before.markers}
                untouched = all(m.token == kept[m.piece.name] for m in read_commits(again.out_dir).markers if m.piece.name in kept)
                first_layout = {m.piece.n_settings for m in before.markers}
                figures.update(resume_pairs_skipped=again.pairs_skipped, resume_pairs_run=again.pairs_run,
                               resume_covers_all=again.pairs_skipped + again.pairs_run == again.plan.n_pairs,
                               resume_committed_untouched=untouched, resume_rows_identical=same_rows,
                               resume_aggregates_identical=same_agg, resume_piece_settings_before=sorted(first_layout),
                               resume_piece_settings_after=again.layout["settings_per_piece"])  # fmt: skip
                figures["resume_after_interrupt"] = again.pairs_run > 0  # False: the driver finished before the SIGINT (a small sweep)
                print(f"resume on {counts[-1]} worker(s): {again.pairs_skipped} pairs kept, {again.pairs_run} run; "
                      f"rows identical {same_rows}, aggregates identical {same_agg}"
                      + ("" if again.pairs_run else " (nothing was left: the sweep is too small to interrupt)"), file=sys.stderr)  # fmt: skip
        finally:
            ray.shutdown()
    finally:
        cluster.close()
    base = counts[0]
    for k in counts[1:]:
        ratio = rates[k] / rates[base]
        figures[f"scaling_{k}_workers_ratio"] = round(ratio, 2)
        figures[f"scaling_{k}_workers_efficiency"] = round(ratio * base / k, 2)
    figures["scaling_ratio"] = figures[f"scaling_{counts[-1]}_workers_ratio"] if len(counts) > 1 else None
    figures["cores"] = os.cpu_count()
    return figures


def main() -> int:
    args = parse_args()
    import ray

    # The workload (conversations to re-score) is made by the synthetic-run writer of the tests:
    # random signals pushed through the real rules. What is measured is the real re-scoring code.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.doubles.synthetic import write_synthetic_run
    from ray_knowsim.sweep.config import parse_sweep_config
    from ray_knowsim.sweep.report import write_report
    from ray_knowsim.sweep.rescore import kernel_available, prepare
    from ray_knowsim.sweep.runner import run_sweep
    from ray_knowsim.sweep.source import load_source
    from ray_knowsim.sweep.space import expand

    has_kernel = kernel_available()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    run_dir = root / "run"
    t0 = time.perf_counter()
    if not (run_dir / "sessions").exists():
        write_synthetic_run(run_dir, n_sessions=args.conversations, max_turns=15, seed=0, with_judge=False, message_chars=(40, 80))
    print(f"synthetic run of {args.conversations} conversations: {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    base = {"name": "bench", "source": {"run_dir": str(run_dir)}}
    figures: dict = {"kernel_available": has_kernel, "cpus": args.cpus,
                     "kernel_vs_python_ratio": None, "ship_objects_vs_arrays_ratio": None}  # null unless measured
    ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, logging_level="WARNING", object_store_memory=512 * 2**20)
    try:
        cfg = parse_sweep_config(base | {"space": space(args.kernel_settings), "output": str(root / "unused")})
        convs = load_source(cfg).conversations
        settings = expand(cfg.space, cfg.base)
        py_settings = settings[: args.python_settings]
        py_prep = prepare(convs, "python")
        py_prep.entries()  # SignalEntry lists built once, outside the timing (as a long Python sweep would amortise them)
        py_rate, py_secs = rate(ray, ray.put(py_prep), py_settings, len(convs), args.cpus)
        figures.update(python_pairs_per_s=round(py_rate, 1), python_pairs=len(py_settings) * len(convs), python_seconds=round(py_secs, 2))
        print(f"python rules: {py_rate:,.0f} pairs/s ({len(py_settings)} settings x {len(convs)} conversations)", file=sys.stderr)
        if has_kernel:
            k_rate, k_secs = rate(ray, ray.put(prepare(convs, "kernel")), settings, len(convs), args.cpus)
            figures.update(kernel_pairs_per_s=round(k_rate, 1), kernel_pairs=len(settings) * len(convs), kernel_seconds=round(k_secs, 2))
            figures["kernel_vs_python_ratio"] = round(k_rate / py_rate, 1)
            print(f"kernel: {k_rate:,.0f} pairs/s ({len(settings)} settings x {len(convs)} conversations)", file=sys.stderr)

            block = convs[: args.block]
            as_objects = receive_seconds(ray, block)  # what tasks used to receive
            as_arrays = receive_seconds(ray, prepare(block, "kernel", resample=False))  # what they receive now
            figures.update(ship_block=len(block), ship_objects_s=round(as_objects, 4), ship_arrays_s=round(as_arrays, 4),
                           ship_objects_vs_arrays_ratio=round(as_objects / as_arrays, 1))  # fmt: skip
            print(f"a task receives {len(block)} conversations in {as_arrays * 1e3:.1f} ms as packed arrays, "
                  f"{as_objects * 1e3:.0f} ms as conversation objects", file=sys.stderr)  # fmt: skip

        e2e = parse_sweep_config(base | {"space": space(args.settings, seed=2), "output": str(root / "sweep")})
        t0 = time.perf_counter()
        result = run_sweep(e2e, fresh=True, report=False, progress=lambda m: print(m, file=sys.stderr))
        e2e_secs = time.perf_counter() - t0
    finally:
        ray.shutdown()
    pairs = result.plan.n_pairs
    t0 = time.perf_counter()
    files = write_report(result.out_dir, e2e.report)
    report_secs = time.perf_counter() - t0
    figures.update(
        e2e_backend=result.plan.backend,
        e2e_settings=len(result.plan.settings),
        e2e_conversations=len(result.plan.source.conversations),
        e2e_pairs=pairs,
        e2e_seconds=round(e2e_secs, 2),
        e2e_pairs_per_s=round(pairs / e2e_secs, 1),
        e2e_pieces=result.pieces_run,
        e2e_pieces_seconds=round(result.stats.wall_seconds, 2),
        e2e_task_seconds=round(result.rescore_seconds, 2),
        e2e_task_write_seconds=round(result.stats.write_seconds, 2),
        e2e_identity_mismatches=result.identity.get("mismatching_conversations"),
        rows_bytes=sum(f.stat().st_size for f in (result.out_dir / "rows").glob("*.parquet")),
        report_seconds=round(report_secs, 2),
        report_files=len(files),
    )
    figures["scaling_ratio"] = None  # null unless two worker counts or more were measured
    if args.scaling.strip():
        figures.update(scaling(args, run_dir, root))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
