"""Processes the tests started that outlive them: found at the end of the session, named in its
summary, and ended, so that a later test (or the next CI step) never meets a stray Ray node or
server holding ports and cores.

A process counts as the suite's when it started after the session did and its command line names a
place only the suite's processes use: this checkout, the session's pytest temp folder, or a
loopback cluster's temp folder (``/tmp/rkc...``, tests/doubles/raycluster.py). Processes of other
checkouts on the same machine are left alone."""

from __future__ import annotations

import os
import signal
from pathlib import Path

CLUSTER_TEMP_PREFIX = "/tmp/rkc"


def _boot_ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22: start time in clock ticks since boot


def session_start_ticks() -> int:
    """This process's start time, in the units :func:`leftovers` compares."""
    return _start_ticks(os.getpid()) or 0


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


#: how a pytest-xdist worker (execnet's bootstrap) names itself: a pytest session of its own
_XDIST_WORKER = "exec(eval(sys.stdin.readline()))"


def _is_pytest(pid: int) -> bool:
    """A pytest process: ``pytest``/``python -m pytest``, or a pytest-xdist worker."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return any(os.path.basename(a) in ("pytest", "py.test") for a in argv) or any(
        a == "-m" and b == "pytest" for a, b in zip(argv, argv[1:])) or any(_XDIST_WORKER in a for a in argv)


def _ancestors(pid: int) -> list[int]:
    chain = []
    while pid > 1 and len(chain) < 64:
        pid = _parent(pid)
        chain.append(pid)
    return chain


def _another_suites(pid: int, me: int) -> bool:
    """Whether ``pid`` belongs to another pytest session: walking up from it, a pytest process
    (or a pytest-xdist worker) comes before this one. The pytests above this one do not make a
    process this session's: under pytest-xdist the controller is every worker's parent, and a
    worker's Ray is its own, not its sibling's. An orphan (reparented to init) reaches neither."""
    for a in (pid, *_ancestors(pid)):
        if a == me:
            return False
        if _is_pytest(a):
            return True
    return False


def leftovers(since_ticks: int, places: list[str]) -> list[tuple[int, str]]:
    """(pid, command line) of live processes started after ``since_ticks`` whose command line
    names one of ``places``: this process, its ancestors and the processes of another pytest run
    on the machine excepted."""
    mine = {os.getpid(), *_ancestors(os.getpid())}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        started = _start_ticks(int(entry.name))
        if started is None or started < since_ticks:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmd and state != "Z" and any(place in cmd for place in places) and not _another_suites(int(entry.name), os.getpid()):
            found.append((int(entry.name), cmd))
    return found


def end(processes: list[tuple[int, str]]) -> None:
    for pid, _ in processes:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


__all__ = ["CLUSTER_TEMP_PREFIX", "end", "leftovers", "session_start_ticks"]
