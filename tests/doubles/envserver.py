"""Start and stop ``ray-knowsim env serve`` in a process group of its own, for the tests and the
training benchmark (scripts/bench/training_env.py): the server prints its URL once it serves,
and a reader thread keeps draining its output after that, so a chatty server never blocks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Mapping, Sequence

SERVING = re.compile(r"serving .* on (http://[0-9.]+:\d+)")


class EnvServerStartError(RuntimeError):
    """The server exited or did not serve in time; the message ends with its output."""


def start_env_serve(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike | None = None,
                    timeout_s: float = 600.0) -> tuple[subprocess.Popen, str, list[str]]:
    """``ray-knowsim env serve ARGS``: (the process, the URL it serves on, its output lines so far)."""
    cmd = [sys.executable, "-m", "ray_knowsim.cli.main", "env", "serve", *args]
    proc = subprocess.Popen(cmd, env=None if env is None else dict(env), cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    found: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            m = SERVING.search(line)
            if m and not found:
                found.append(m.group(1))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while not found and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    if not found:
        stop_env_serve(proc)
        raise EnvServerStartError(f"`env serve {' '.join(args)}` did not start:\n{''.join(lines)[-4000:]}")
    return proc, found[0], lines


def stop_env_serve(proc: subprocess.Popen) -> None:
    """SIGTERM (the server deletes its Serve application and leaves or stops its Ray), then
    SIGKILL to its own process group only: whatever it left behind."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(timeout=30)


__all__ = ["EnvServerStartError", "start_env_serve", "stop_env_serve"]
