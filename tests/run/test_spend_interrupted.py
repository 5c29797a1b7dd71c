"""Cost recorded = cost incurred, across an interrupt: a real `ray-knowsim run` against a counting
HTTP endpoint is interrupted mid-run (Ctrl-C, or kill -9 of the driver), then resumed with the
same command; the run's cost table (``all, all``), its manifest and the endpoint's own tally
agree on requests, prompt, completion and cached prompt tokens, and the spend of the sessions
cut off shows apart.

The one request count a kill can leave open is an answer the endpoint wrote and the dying
process never read: the journal recorded it as sent, so it is in ``unanswered_requests`` and
``answered <= recorded + unanswered`` holds; when nothing was in flight the counts are equal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from ray_knowsim.config import load_run_config
from ray_knowsim.run.fan_out import run
from tests.doubles.counting import counting_endpoint
from tests.doubles.run_config import small_config, write_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_local")]
ROOT = Path(__file__).resolve().parents[2]
KINDS = ("requests", "prompt_tokens", "completion_tokens", "cached_prompt_tokens")


def _config(tmp_path: Path, base_url: str, shard_cpus: float = 1.0) -> Path:
    ep = {"backend": "http", "base_url": base_url, "model": "counted", "offline_server": True, "max_in_flight_global": 64,
          "price": {"input": 1.0, "cached_input": 0.5, "output": 2.0}}
    data = small_config(models={"ep": ep}, engine={"shard_fn": "ray_knowsim.sim.shard:run_shard", "commit_every": 1,
                                                   "shard_cpus": shard_cpus})
    data["roles"] = {"user_sim": "ep", "extractor": "ep", "judge": "ep", "assistant": {"model": "ep"}}
    return write_config(tmp_path, data)


def _committed(out: Path) -> int:
    folder = out / "commits"
    if not folder.is_dir():
        return 0
    seen: set[str] = set()
    for p in folder.glob("*.json"):
        try:
            seen.update(json.loads(p.read_text())["sessions"])
        except (OSError, ValueError, KeyError):
            pass
    return len(seen)


def _interrupted_run(path: Path, out: Path, sig: int) -> None:
    """Start the run in its own session, wait until a few sessions are committed (others in
    flight), then send ``sig`` (SIGINT: to its process group, as a terminal's Ctrl-C; SIGKILL:
    to the driver only)."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "ray_knowsim.cli.main", "run", str(path), "-o", str(out), "--quiet"],
                            env=env, cwd=path.parent, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and _committed(out) < 2:
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before it could be interrupted: {proc.stderr.read().decode()[-2000:]}"
        assert _committed(out) < 24
        if sig == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
            assert proc.returncode == 130, "the run did not stop on Ctrl-C (was SIGINT ignored?)"
        else:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # what is left of its own Ray, ours only
        except ProcessLookupError:
            pass


def _check(out: Path, answered: dict[str, int], cut_off: bool) -> dict[str, int]:
    cost = pd.read_csv(out / "tables" / "cost.csv").set_index(["task", "condition"])
    whole = cost.loc[("all", "all")]
    recorded = {k: int(whole[k]) for k in KINDS}
    unanswered = int(whole["unanswered_requests"])
    assert recorded["requests"] <= answered["requests"] <= recorded["requests"] + unanswered, (recorded, answered, unanswered)
    if recorded["requests"] == answered["requests"]:
        assert recorded == answered, (recorded, answered)
    assert answered["cached_prompt_tokens"] > 0 and recorded["cached_prompt_tokens"] > 0  # the cached column is carried
    if cut_off:  # what the cut-off sessions spent, apart (after a kill -9 the orphaned workers may
        # still finish and commit the sessions they were running before they go: then none is cut off)
        # on a quiet machine the sessions in flight at the Ctrl-C may still commit before the
        # driver goes: then nothing is cut off, and the equality above is the whole check
        if ("all", "uncommitted") in cost.index:
            assert cost.loc[("all", "uncommitted"), "requests"] > 0
    conditions = cost[cost.index.get_level_values("task") != "all"]
    apart = cost[(cost.index.get_level_values("task") == "all") & (cost.index.get_level_values("condition") != "all")]
    for k in KINDS:  # the rows of the conditions and the rows apart add up to the whole
        assert int(conditions[k].sum() + apart[k].sum()) == recorded[k], k
    expected_usd = ((answered["prompt_tokens"] - answered["cached_prompt_tokens"]) * 1.0 + answered["cached_prompt_tokens"] * 0.5
                    + answered["completion_tokens"] * 2.0) / 1e6
    if recorded == answered:
        assert whole["cost_usd"] == pytest.approx(expected_usd)
    manifest = json.loads((out / "manifest.json").read_text())
    spend = manifest["spend"]["whole"]
    assert {"requests": spend["requests"], "prompt_tokens": spend["prompt_tokens"], "completion_tokens": spend["completion_tokens"],
            "cached_prompt_tokens": spend["cached_prompt_tokens"]} == recorded
    assert len(manifest["invocations"]) == 2 and set(manifest["spend"]["by_invocation"]) == {"0", "1"}
    assert manifest["spend"]["by_invocation"]["0"]["requests"] > 0  # the interrupted invocation's spend is kept
    return {**recorded, "unanswered": unanswered}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("shard_cpus", [1.0, 0.5], ids=["a-process-per-shard", "two-shards-per-process"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_interrupted_then_resumed_run_records_what_the_endpoint_answered(tmp_path, sig, shard_cpus):
    with counting_endpoint(delay_s=0.4) as ep:
        path = _config(tmp_path, ep.base_url, shard_cpus)
        out = tmp_path / "run"
        t0 = time.monotonic()
        _interrupted_run(path, out, sig)
        ep.quiet_for(2.0)
        before = ep.tally.snapshot()
        assert 0 < before["requests"]
        t1 = time.monotonic()
        resumed = run(load_run_config(path), output=out, quiet=True)
        print(f"interrupted run {t1 - t0:.0f}s, resume {time.monotonic() - t1:.0f}s")
        assert resumed.n_ok == 24 and not resumed.incomplete
        answered = ep.tally.snapshot()
    got = _check(out, answered, cut_off=sig == signal.SIGINT)
    # the judge's tokens: null on the simulation's own rows (it had not run), its real counts once
    # the scores are joined, never a claimed 0
    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.score.store import RunScores

    reader = RunReader.open(out)
    raw = reader.sessions.read(["session_id", "prompt_tokens_judge"]).to_pandas()
    assert raw["prompt_tokens_judge"].isna().all()
    joined = RunScores.load(out, reader).attach(reader.sessions.read(["session_id", "prompt_tokens_judge"])).to_pandas()
    assert (joined["prompt_tokens_judge"] > 0).all()
    print(f"{signal.Signals(sig).name}: endpoint answered {answered['requests']} (before the resume {before['requests']}), "
          f"recorded {got['requests']}, unanswered {got['unanswered']}; tokens answered {answered} recorded {got}")
