"""Peak memory of `ray-knowsim report` on a 10,000-conversation run stays under 1 GB.

The run's turns table holds ~430 MB of message text (15 turns of 1.5-3.5 kB replies); reading
it whole takes ~1.2 GB, so the limit only holds if the report streams.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.doubles.peak_memory import CHILD_MAIN, peak_bytes
from tests.doubles.synthetic import write_synthetic_run

LIMIT_BYTES = 1 << 30


@pytest.mark.slow  # 10,000 conversations written and reported: ~20 s CPU
def test_report_on_10k_conversations_stays_under_1gb(tmp_path):
    t0 = time.perf_counter()
    run = write_synthetic_run(
        tmp_path / "run", n_sessions=10_000, max_turns=15, message_chars=(1500, 3500), max_templates=36, validate=False
    )
    assert run.n_turn_rows == 150_000
    t1 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD_MAIN, "report", str(run.run_dir), "--out", str(tmp_path / "rep"), "--sample", "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    out, err = proc.stdout.read(), proc.stderr.read()
    # wait4 gives this child's own CPU time; its ru_maxrss would count the test process's size
    # (kept across exec), so the peak is the child's own VmHWM (tests/doubles/peak_memory.py)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    t2 = time.perf_counter()
    assert proc.returncode == 0, err.decode()
    page = Path([l for l in out.decode().strip().splitlines() if not l.startswith("PEAK_RSS_KB")][-1])
    assert page.is_file() and page.read_text().count('class="conv"') == 6
    peak = peak_bytes(out)
    cpu = usage.ru_utime + usage.ru_stime
    print(f"\n10k-run report: peak RSS {peak / 2**20:.0f} MiB; write {t1 - t0:.1f} s, report {t2 - t1:.1f} s wall / {cpu:.1f} s CPU")
    assert peak < LIMIT_BYTES, f"peak RSS {peak / 2**20:.0f} MiB >= 1 GiB"
