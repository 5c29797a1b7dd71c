"""Validation streams the run's Parquet: a 10,000-session run stays far below 1 GB peak RSS."""

from __future__ import annotations

import subprocess
import sys
import time

import pyarrow.dataset as ds

from tests.doubles.peak_memory import CHILD_MAIN, peak_bytes

LIMIT = 1 << 30


def test_validate_peak_memory_on_10k_sessions(synth, synthetic, tmp_path):
    human, _, _ = synthetic
    run = tmp_path / "run"
    plan = synth.make_plan(5, {"structured": 0.7}, 0.25, {"structured": synth.METRICS})
    n = synth.write_sim(run, plan, trials=92, turns=1, rows_per_file=2500)  # 108 cells x 93 = 10,044
    assert n >= 10_000
    assert ds.dataset(run / "sessions").count_rows() == n

    started = time.perf_counter()
    # the child's own high-water mark (VmHWM) is at least any RSS a poll from here could see
    proc = subprocess.run(
        [sys.executable, "-c", CHILD_MAIN, "validate", "--human", str(human), "--sim", str(run), "--out", str(tmp_path / "v")],
        capture_output=True, text=True,
    )
    out, err = proc.stdout, proc.stderr
    elapsed = time.perf_counter() - started
    assert proc.returncode == 0, err
    peak = peak_bytes(out)
    print(f"validate on {n} sessions: peak RSS {peak / 2**20:.0f} MiB in {elapsed:.1f} s")
    assert peak < LIMIT
    assert "Concept coverage Jaccard: 0.667" in out  # the turns were read too (1 turn: IUs 2,3 vs 1,2,3)
