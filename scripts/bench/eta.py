"""How close the run's ETA is to the time that was actually left, on the README's own-tutor recipe.

The recipe's run (configs/own_tutor.yaml: 42 conversations of 15 turns, the simulator's 300
requests a minute) against two ``ray-knowsim serve-offline`` stand-ins, as the README has a
newcomer try it. Every progress line (one each 10 s when the output is not a terminal) shows
``elapsed Ns eta Ms``; the sessions' end is the last commit marker's time, so the time actually
left at each line is measured in the same run. Prints each line's ETA beside it and ends with
one JSON line: ``eta_mid_run_ratio`` (the ETA shown nearest mid-run over the time left then; 1 is
exact) and the worst ratio over the middle 60 % of the run.

    python scripts/bench/eta.py                 # about 5 minutes on 2 cores
    python scripts/bench/eta.py --max-turns 8   # shorter

The stand-ins answer at once, so the pace is the simulator's rate limit: a hosted API's latency
tail is not in this figure (scripts/bench/latency_proxy.py can add one in front of them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"elapsed (\d+)s eta (\d+|\?)s?")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stand_in(port: int, name: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "ray_knowsim.cli.main", "serve-offline", "--port", str(port),
                             "--model-name", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"the stand-in on port {port} did not answer in 120 s")


def _run(out: Path, ports: tuple[int, int], max_turns: int) -> tuple[list[tuple[float, int, int | None]], float]:
    """(wall time, elapsed, eta) per progress line, and the wall time of the last commit."""
    argv = [sys.executable, "-m", "ray_knowsim.cli.main", "run", str(ROOT / "configs" / "own_tutor.yaml"), "-o", str(out),
            "--set", f"models.tutor.base_url=http://127.0.0.1:{ports[0]}/v1",
            "--set", f"models.simulator.base_url=http://127.0.0.1:{ports[1]}/v1", "--set", f"max_turns={max_turns}"]
    env = {**os.environ, "OPENROUTER_API_KEY": os.environ.get("OPENROUTER_API_KEY") or "stand-in"}
    lines = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        for text in proc.stdout:
            found = LINE.search(text)
            if found:
                eta = None if found.group(2) == "?" else int(found.group(2))
                lines.append((time.time(), int(found.group(1)), eta))
    if proc.returncode != 0:
        raise SystemExit(f"the run failed (exit {proc.returncode}); see {out}")
    return lines, max(p.stat().st_mtime for p in (out / "commits").glob("*.json"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-turns", type=int, default=15)
    args = ap.parse_args()
    ports = (_free_port(), _free_port())
    servers = [_stand_in(ports[0], "my-tutor"), _stand_in(ports[1], "google/gemini-3-flash-preview")]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            lines, end = _run(Path(tmp) / "run", ports, args.max_turns)
    finally:
        for s in servers:
            s.kill()
    start = lines[0][0] - lines[0][1]  # the progress clock's zero on the wall clock
    total = end - start
    shown = [(el, eta, end - wall) for wall, el, eta in lines if eta is not None and end - wall > 0]
    for el, eta, left in shown:
        print(f"elapsed {el:4d} s  eta {eta:4d} s  left {left:6.1f} s  ratio {eta / left:5.2f}")
    mid = min(shown, key=lambda r: abs(r[0] - total / 2))
    middle = [eta / left for el, eta, left in shown if 0.2 * total <= el <= 0.8 * total]
    worst = max(middle, key=lambda r: abs(r - 1.0)) if middle else float("nan")
    print(f"run {total:.0f} s; at mid-run ({mid[0]} s) the ETA said {mid[1]} s, {mid[2]:.0f} s were left")
    print(json.dumps({"run_s": round(total, 1), "eta_mid_run_ratio": round(mid[1] / mid[2], 3),
                      "eta_worst_middle_ratio": round(worst, 3), "lines": len(shown)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
