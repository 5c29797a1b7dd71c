"""The suite's end names and ends what its tests left running (tests/doubles/leftovers.py), and
leaves alone what another pytest on the machine runs."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.doubles.leftovers import end, leftovers, session_start_ticks


def test_a_process_left_by_the_suite_is_found_and_one_of_another_suite_is_not(tmp_path):
    since = session_start_ticks()
    place = str(tmp_path)
    orphan = subprocess.Popen(["bash", "-c", f"exec -a '{place}/stray-node' sleep 60"], start_new_session=True)
    # a process under another pytest: a parent whose command line says pytest, with a child naming the place
    other = subprocess.Popen([sys.executable, "-c", f"import subprocess, time; p = subprocess.Popen(['bash', '-c', \"exec -a '{place}/other-suite' sleep 60\"]); time.sleep(60)", "pytest"],
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        found: list = []
        while time.monotonic() < deadline:
            found = leftovers(since, [place])
            if any("stray-node" in cmd for _, cmd in found) and "other-suite" in " ".join(
                    open(f"/proc/{pid}/cmdline").read() for pid in _children(other.pid)):
                break
            time.sleep(0.1)
        assert [pid for pid, _ in found] == [orphan.pid], found
        end(found)
        assert orphan.wait(timeout=5) is not None
    finally:
        for proc in (orphan, other):
            proc.kill()
        subprocess.run(["pkill", "-f", f"{place}/other-suite"], check=False)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]
