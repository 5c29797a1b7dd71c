"""The suite's end names and ends what its tests left running (tests/doubles/leftovers.py), and
leaves alone what another pytest on the machine runs."""

from __future__ import annotations

import subprocess
import sys
import time

from pathlib import Path

from tests.doubles.leftovers import end, leftovers, session_start_ticks

ROOT = Path(__file__).resolve().parents[2]


def test_a_process_left_by_the_suite_is_found_and_one_of_another_suite_is_not(tmp_path):
    since = session_start_ticks()
    place = str(tmp_path)
    orphan = subprocess.Popen(["bash", "-c", f"exec -a '{place}/stray-node' sleep 60"], start_new_session=True)
    # a process under another pytest: a parent whose command line says pytest, with a child naming the place
    other = subprocess.Popen([sys.executable, "-c", f"import subprocess, time; p = subprocess.Popen(['bash', '-c', \"exec -a '{place}/other-suite' sleep 60\"]); time.sleep(60)", "pytest"],
                             start_new_session=True)
    # and one under a pytest-xdist worker (a sibling of this session's, or of a suite this one runs)
    worker = subprocess.Popen([sys.executable, "-c", f"import subprocess, time; p = subprocess.Popen(['bash', '-c', \"exec -a '{place}/worker-child' sleep 60\"]); time.sleep(60)",
                               "exec(eval(sys.stdin.readline()))"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        found: list = []
        while time.monotonic() < deadline:
            found = leftovers(since, [place])
            if any("stray-node" in cmd for _, cmd in found) and all(name in " ".join(
                    open(f"/proc/{pid}/cmdline").read() for pid in _children(parent.pid))
                    for parent, name in ((other, "other-suite"), (worker, "worker-child"))):
                break
            time.sleep(0.1)
        assert [pid for pid, _ in found] == [orphan.pid], found
        end(found)
        assert orphan.wait(timeout=5) is not None
    finally:
        for proc in (orphan, other, worker):
            proc.kill()
        for name in ("other-suite", "worker-child"):
            subprocess.run(["pkill", "-f", f"{place}/{name}"], check=False)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


PARALLEL_SUITE = {
    "conftest.py": "from tests.conftest import pytest_sessionstart, pytest_terminal_summary  # noqa: F401\n",
    # one file ends at once; the other's test still has a child running then, and checks it lived
    "test_quick.py": "import time\n\ndef test_quick():\n    time.sleep(2)  # the other file's child has started by then\n",
    "test_long.py": (
        "import subprocess, sys, time\n\n"
        "def test_a_child_outlives_the_other_workers_end(tmp_path):\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(8)', str(tmp_path)])\n"
        "    time.sleep(6)  # the other worker's session has ended by now\n"
        "    assert child.poll() is None, 'another worker ended this test process child'\n"
        "    child.kill()\n"),
}


def test_a_worker_that_finishes_first_leaves_the_other_workers_processes_alone(tmp_path):
    """Under pytest-xdist each worker is a session: the first to end once took its siblings, and
    their Ray processes, for its own leftovers (their command lines name this checkout) and ended
    them, which crashed the suite's longest test mid-way. Only the controller looks, at the end."""
    for name, text in PARALLEL_SUITE.items():
        (tmp_path / name).write_text(text)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
                           "-c", "/dev/null", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout, done.stdout
