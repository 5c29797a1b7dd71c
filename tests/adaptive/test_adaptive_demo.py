"""The shipped ``configs/adaptive_demo.yaml`` run as a user runs it (issue 51): from the repo root,
offline, with the CLI. It must decide before its pool is used up -- fewer sessions than the fixed
design -- and say so on the terminal, in ``decisions.json`` and in the report. docs/adaptive.md
("Try it") quotes this run; it runs in the fast suite (about 15 s on 2 busy cores)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ray_knowsim.io.decisions import read_decisions

REPO = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("ray-knowsim"))
CONFIG = "configs/adaptive_demo.yaml"


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "OPENROUTER_API_KEY")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return subprocess.run([CLI, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.ray  # the run starts its own local Ray; about 15 s on 2 busy cores, so not marked slow
def test_the_shipped_adaptive_demo_decides_before_its_pool_is_used_up(tmp_path):
    run_dir = tmp_path / "adaptive_demo"
    done = _cli("run", CONFIG, "-o", str(run_dir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    rec = read_decisions(run_dir)
    pool_rounds = 30 // rec.spec["round"]["items"]  # 30 practice items, rounds of 5
    made = [d for d in rec.decisions if d.decided]
    assert made and all(d.after_round < pool_rounds for d in made)
    assert rec.status == "decided" and len(rec.rounds) < pool_rounds
    assert rec.sessions_fixed == 60 and rec.sessions_run < rec.sessions_fixed

    said = f"stopped early: decided after {rec.sessions_run} of 60 planned sessions"
    assert said in done.stdout, done.stdout[-3000:]
    for d in made:
        assert f"math/novice {d.metric}: {d.winner} (after round {d.after_round})" in done.stdout
    # as a fixed run's result ends: the offline double's caveat, then where to look next
    from ray_knowsim.report.banner import BANNER_HEADING

    assert BANNER_HEADING.upper() in done.stdout and "OFFLINE model" in done.stdout, done.stdout[-3000:]
    tail = "\n".join(done.stdout.rstrip().splitlines()[-2:])  # a long run dir folds the line in two
    assert "next: ray-knowsim view " in tail and "ray-knowsim report " in tail, done.stdout[-600:]

    report = _cli("report", str(run_dir), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-3000:]
    text = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert said in text and f"{rec.sessions_run} of the fixed design's 60 sessions" in text
