"""Two runs at once on one cluster, against the same HTTP endpoint with an in-flight cap: both
finish, and the server never sees more requests in flight than the cap, across both runs and
every request they send (the checks' speed probes included: on 2026-12-07 one run's probe alone
put 8 requests in flight at a cap of 4). Once as two `ray job submit` jobs, once as two drivers
joining with `ray-knowsim run --address`; both with four shards per worker process
(``shard_cpus: 0.25``).

The endpoint is the offline model behind our OpenAI-compatible server (`serve-offline`'s app, in
this process), answering each request after a delay and counting what is in flight. The runs are
two drivers on one local head; the second is longer, so
it runs on after the first ends: the limiter they share must outlive the first run (one limiter
actor over the whole test, never ended and re-made under the second run), and end once the last
run let go (the grace period is shortened to seconds here).

No assertion rests on the two runs happening to overlap in time (under load one may finish before
the other starts). The server makes the overlap certain: it holds the short run's first request
until the long run's first request has arrived (no wait if that came first), and holds that one
until the short run has ended (gates hold session requests only; every request is counted).
So both runs had a request in flight at once, through the one cap, and the long run was still
running (holding the limiter) when the short one let go. Each request says which run sent it
(an ``extra_body`` field: answer-neutral for the offline model, outside the limiter's key)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ray_knowsim.io.commits import read_markers
from tests.doubles.raycluster import LocalCluster
from tests.doubles.run_config import small_config, write_config

pytestmark = [pytest.mark.slow, pytest.mark.ray_cluster, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
CAP = 3  # max_in_flight_global of the endpoint; each run alone would send up to 16 per process
DELAY_S = 0.1
GATE_S = 600.0  # the longest a gate holds a request (a run that never comes fails the test, not hangs it)
RUN_FIELD = "knowsim_test_run"  # the body field naming the run that sent a request


def counting_server():
    """The offline model's app, with a middleware counting requests in flight (and their peak),
    per run and together, and the two gates described in the module docstring."""
    import asyncio
    import threading

    from aiohttp import web

    from ray_knowsim.llm.http.wire import OFFLINE_FACTS_FIELD
    from ray_knowsim.llm.offline import OfflineModel
    from ray_knowsim.llm.offline.server import build_app

    state = {"in_flight": 0, "peak": 0, "requests": 0, "both_in_flight": 0, "probes": 0,
             "runs": {"short": 0, "long": 0}, "seen": set(), "held": []}
    long_arrived = threading.Event()  # gate 1: the short run's first request waits for it
    short_ended = threading.Event()  # gate 2: the long run's first request waits for it (set by the test)

    async def wait_for(event: threading.Event) -> None:
        deadline = time.monotonic() + GATE_S
        while not event.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    @web.middleware
    async def count(request, handler):
        if request.path != "/v1/chat/completions":
            return await handler(request)
        body = await request.json()  # aiohttp keeps the body for the handler
        session_request = OFFLINE_FACTS_FIELD in body  # else the checks' probe: counted, never held
        run = body.get(RUN_FIELD, "?")
        first = session_request and run not in state["seen"]
        if session_request:
            state["seen"].add(run)
        else:
            state["probes"] += 1
        state["in_flight"] += 1
        state["runs"][run] += 1
        state["requests"] += 1
        state["peak"] = max(state["peak"], state["in_flight"])
        state[f"peak_{run}"] = max(state.get(f"peak_{run}", 0), state["runs"][run])  # one run alone, to tell where a breach is
        if all(state["runs"].values()):
            state["both_in_flight"] += 1
        try:
            if first and run == "short":
                state["held"].append("short")
                await wait_for(long_arrived)
            elif first and run == "long":
                state["held"].append("long")
                long_arrived.set()
                await wait_for(short_ended)
            return await handler(request)
        finally:
            state["in_flight"] -= 1
            state["runs"][run] -= 1

    app = build_app(OfflineModel(name="shared"), delay_s=DELAY_S)
    app.middlewares.append(count)
    return app, state, short_ended


def limiter_actors(cluster: LocalCluster, name: str) -> list[dict]:
    rows = cluster.api("/api/v0/actors?detail=1&limit=1000")
    return [r for r in rows if "Limiter" in str(r.get("class_name", "")) and r.get("name") == name]


def commit_window(run_dir: Path) -> tuple[float, float]:
    times = [m.committed_at for m in read_markers(run_dir)]
    return min(times), max(times)


class Jobs:
    """The two runs as `ray job submit` jobs."""

    def __init__(self, head: LocalCluster) -> None:
        self.head, self.ids = head, {}

    def start(self, name: str, command: list[str]) -> None:
        job = f"{name}-{uuid.uuid4().hex[:8]}"
        proc = self.head.submit(command, cwd=ROOT, working_dir=ROOT, no_wait=True, extra=("--submission-id", job))
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        self.ids[name] = job

    def wait(self, name: str) -> tuple[bool, str]:
        status = self.head.wait_job(self.ids[name], timeout_s=700)
        return status == "SUCCEEDED", f"{status}\n{self.head.job_logs(self.ids[name])}"


class Drivers:
    """The two runs as drivers joining the head: `ray-knowsim run --address`, one second apart."""

    def __init__(self, head: LocalCluster) -> None:
        self.head, self.procs = head, {}

    def start(self, name: str, command: list[str]) -> None:
        if self.procs:
            time.sleep(1.0)
        self.procs[name] = subprocess.Popen([*command, "--address", self.head.gcs], cwd=ROOT, env=self.head.env,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait(self, name: str) -> tuple[bool, str]:
        out, _ = self.procs[name].communicate(timeout=700)
        return self.procs[name].returncode == 0, out


@pytest.mark.parametrize("how", [Jobs, Drivers], ids=["ray_job_submit", "run_with_address"])
def test_two_runs_share_one_endpoint_budget(shared_head, tmp_path, how):
    from ray_knowsim.llm.http.config import HTTPModelConfig
    from ray_knowsim.llm.offline.server import serve_app_in_thread

    app, state, short_ended = counting_server()
    runs = how(shared_head)
    with serve_app_in_thread(app) as server:
        endpoint = {"backend": "http", "base_url": server.base_url, "model": "shared", "offline_server": True,
                    "max_in_flight": 16, "max_in_flight_global": CAP, "timeout_s": GATE_S + 60}
        roles = {"user_sim": "ep", "extractor": "ep", "judge": "ep", "assistant": {"model": "ep"}}
        sessions = {}
        for name, trials in (("short", 1), ("long", 2)):
            data = small_config(name=name, models={"ep": {**endpoint, "extra_body": {RUN_FIELD: name}}}, trials=trials, max_turns=2,
                                engine={"shard_fn": "ray_knowsim.sim.shard:run_shard", "shard_cpus": 0.25})
            data["roles"] = roles
            path = write_config(tmp_path / name, data)
            runs.start(name, [sys.executable if how is Drivers else "python", "-m", "ray_knowsim", "run", str(path),
                              "-o", str(tmp_path / name / "out"), "--quiet"])
            sessions[name] = 24 * trials
        finished = {"short": runs.wait("short")}
        short_ended.set()  # gate 2: the long run's held request goes on now
        finished["long"] = runs.wait("long")
    for name, n in sessions.items():
        ok, log = finished[name]
        assert ok, f"{name}: {log[-3000:]}"
        assert f"complete (all {n} planned sessions committed, none failed)" in log, log[-3000:]
    short, long = commit_window(tmp_path / "short" / "out"), commit_window(tmp_path / "long" / "out")
    print(f"two runs on one endpoint ({how.__name__}): {state['requests']} requests ({state['probes']} the checks' probes), "
          f"peak in flight {state['peak']} (cap {CAP}), {state['both_in_flight']} requests sent while the other run had "
          f"one in flight; commits short {short[1] - short[0]:.1f} s, long {long[1] - long[0]:.1f} s (informational)")
    # both gates held a request, in either order (the long run's driver may send first: then the
    # short run's first request passes gate 1 at once, while gate 2 still holds the long one in
    # flight until the short run has ended): the runs overlapped
    assert sorted(state["held"]) == ["long", "short"], state["held"]
    assert state["both_in_flight"] >= 1, state
    assert long[1] > short[1]  # the long run's held request kept it going after the short run ended
    assert state["requests"] > 200 and state["probes"] >= 2  # each run's speed probe went to the endpoint too
    # the cap held across both runs and all their requests, and bound (each run alone sends more than it at once)
    assert state["peak"] == CAP, state

    # one limiter actor all along: not ended under the long run when the short one let go
    name = HTTPModelConfig(base_url=server.base_url, model="shared").limiter_name
    deadline = time.monotonic() + float(shared_head.env["RAY_KNOWSIM_LEASE_GRACE_S"]) + 30
    while time.monotonic() < deadline:
        actors = limiter_actors(shared_head, name)
        if actors and all(a.get("state") == "DEAD" for a in actors):
            break
        time.sleep(1)
    assert len(actors) == 1, json.dumps(actors, indent=1, default=str)[:3000]
    assert actors[0]["state"] == "DEAD"  # and it ended once the last run let go
