"""`ray-knowsim env serve --replicas 2`: the OpenEnv server on two Ray Serve replicas behind one
address, driven by OpenEnv's own client. Concurrent sessions spread over both replicas, every
episode stays on the replica that reset it, and an episode does not depend on which replica ran it."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # a local Ray, Serve's controller and proxy, 2 replicas

GenericEnvClient = None  # OpenEnv's own client, bound by _needs_serve


@pytest.fixture(scope="module", autouse=True)
def _needs_serve():
    # A fixture, not a module-level skip (see test_openenv_server)
    global GenericEnvClient
    GenericEnvClient = pytest.importorskip(
        "openenv.core.generic_client", reason="needs the training extra (openenv-core): scripts/_venv.sh installs it",
    ).GenericEnvClient
    pytest.importorskip("ray.serve", reason="needs the training extra (ray[serve]): scripts/_venv.sh installs it")


ITEM = {"task": "math", "item_id": "demo_math_01", "level": "novice"}
REPLY = {"message": "A fraction a/b names a parts of a whole cut into b equal parts; compare 1/2 and 2/4."}


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen([sys.executable, "-m", "ray_knowsim.cli.main", "env", "serve", "--replicas", "2", "--port",
                             "0", "--max-turns", "2", "--early-stop", "virtual", "--max-sessions", "8"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    try:
        for line in proc.stdout:  # Ray and Serve log to the same stream first
            seen.append(line)
            if match := re.search(r"serving the KnowSim training environment on http://127\.0\.0\.1:(\d+)", line):
                break
        else:
            pytest.fail(f"env serve --replicas did not start:\n{''.join(seen[-30:])}")
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        proc.send_signal(signal.SIGTERM)  # the CLI tears Serve and its local Ray down on SIGTERM
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            pytest.fail("env serve --replicas did not stop within 90 s of SIGTERM")


async def _run_episodes(url: str, seeds: list[int]) -> list[list]:
    async with contextlib.AsyncExitStack() as stack:
        clients, runs = [], []
        for seed in seeds:  # one session at a time: each new connection sees the ones already open
            client = await stack.enter_async_context(GenericEnvClient(base_url=url))
            clients.append(client)
            runs.append([await client.reset(seed=seed, **ITEM)])

        async def finish(client, results):
            while not results[-1].done:
                results.append(await client.step(REPLY))
            return results

        return await asyncio.gather(*(finish(c, r) for c, r in zip(clients, runs)))


def test_sessions_spread_over_replicas_and_each_episode_stays_on_its_own(server):
    runs = asyncio.run(_run_episodes(server, [1, 1, 2, 2]))
    servers = []
    for results in runs:
        held = {r.observation["server"] for r in results}
        assert len(held) == 1, f"an episode moved between replicas: {held}"  # reset and every step on one replica
        servers.append(held.pop())
        last = results[-1]
        assert last.done and last.observation["turn"] == 2
        assert sum(r.reward for r in results[1:]) == last.observation["rewards"]["episode"]["metrics"]["kg"]
    assert len(set(servers)) == 2, f"the sessions did not spread over the two replicas: {servers}"
    # the same seed and tutor turns give the same episode, whichever replica ran it
    strip = lambda rs: [(r.reward, r.done, {k: v for k, v in r.observation.items()
                                            if k not in ("episode_id", "episode_metadata", "server")},
                         r.observation["episode_metadata"]["states"]) for r in rs]
    assert strip(runs[0]) == strip(runs[1]) and strip(runs[2]) == strip(runs[3]) and strip(runs[0]) != strip(runs[2])
