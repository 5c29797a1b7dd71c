"""The learner simulator and the extractor on a pool of vLLM engine actors: through the training
environment's own path (a ``backend: vllm`` model in the run config, built by the engine's
builder, stepped by the environment), every request of one episode goes to one actor (its prefix
stays in that engine's cache) and the episodes spread over the actors.

The actors are Ray actors standing in for :class:`VLLMEngineActor` (no vLLM here): each answers
as the offline model would and records the request ids it served and its process id. The only
test-side change to the request path is that the offline double's facts ride along in the actor's
payload (a real engine needs none), so episodes run for several scored turns; routing
(:meth:`VLLMActorModel.replica_for`), the pool's start and its shutdown are the product's.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import defaultdict

import pytest

from ray_knowsim.training import EnvironmentConfig, TrainingEnvironment

pytestmark = pytest.mark.ray

REPLICAS = 3
EPISODES = 12
TURNS = 3
RESETS = [dict(task=task, item_id=item, level=level, seed=k)
          for k, (task, item, level) in enumerate(
              [(t, i, lv) for t, i in (("math", "demo_math_01"), ("math", "demo_math_02"), ("expertqa", "demo_open_01"))
               for lv in ("novice", "intermediate", "advanced", "novice")])]
REPLIES = ["Start from what you know, one step at a time.", "Here is the key idea with a small example.",
           "Now connect it to the next piece and check it yourself."]


class RecordingEngineActor:
    """Stands in for one vLLM engine actor: the actor's methods (``info``, ``generate``,
    ``shutdown``), answers from the offline model, and a record of what it served."""

    def __init__(self, cfg: dict) -> None:
        from ray_knowsim.plan.sessions import load_inputs
        from ray_knowsim.llm.offline import OfflineModel
        from ray_knowsim.training.build import load_config

        self.model = OfflineModel(name="offline")
        self.model.register_graphs(dict(load_inputs(load_config(EnvironmentConfig())).graphs))
        self.served: list[str] = []

    async def info(self) -> dict:
        return {"name": "stand-in", "pid": os.getpid(), "pending": 0}

    async def generate(self, req: dict) -> dict:
        from ray_knowsim.schema.chat import ChatRequest

        self.served.append(req["request_id"])
        facts = req.get("offline_facts")
        if facts is None:  # a caller without the test's payload change (a Serve replica): a plain learner line
            return {"text": "I am not sure I follow; could you explain it again?", "error": None, "prompt_tokens": 10,
                    "completion_tokens": 10, "finish_reason": "stop", "latency_s": 0.0}
        resp = await self.model.generate(ChatRequest(
            messages=tuple(req["messages"]), role=facts.get("role", "assistant"), temperature=req["temperature"],
            max_tokens=req["max_tokens"], seed=req["seed"], json_schema=req["json_schema"],
            request_id=req["request_id"], offline_facts=facts))
        return {"text": resp.text, "error": resp.error, "prompt_tokens": resp.usage.prompt_tokens,
                "completion_tokens": resp.usage.completion_tokens, "finish_reason": "stop", "latency_s": 0.0}

    async def record(self) -> tuple[int, list[str]]:
        return os.getpid(), list(self.served)

    async def shutdown(self) -> dict:
        return {"released": True}


def _overrides() -> list[str]:
    import json

    entry = {"backend": "vllm", "model": "/stand-in/simulator", "replicas": REPLICAS, "num_cpus": 0, "num_gpus": 0}
    return [f"models.sim={json.dumps(entry)}", "roles.user_sim=sim", "roles.extractor=sim", "roles.judge=null"]


async def _episodes(env: TrainingEnvironment) -> dict[str, dict]:
    async def one(k: int, reset: dict) -> tuple[str, dict]:
        obs = await env.reset(**reset, episode_id=f"aff{k:02d}")
        graph = env.graphs[f"{reset['task']}/{reset['item_id']}"]
        lessons = [f"{n.concept}: {n.description}" for n in graph.nodes]  # teaches, so the gains are not all 0
        rewards = []
        while not obs.done:
            obs = await env.step(obs.episode_id, " ".join([REPLIES[obs.turn % len(REPLIES)], *lessons[2 * obs.turn:2 * obs.turn + 2]]))
            rewards.append(obs.reward)
        return obs.episode_id, {"session": obs.metadata.session_id, "rewards": rewards,
                                "kg": obs.rewards.episode.metrics["kg"] if obs.rewards.episode else None}

    return dict(await asyncio.gather(*(one(k, r) for k, r in enumerate(RESETS))))


def test_every_request_of_an_episode_goes_to_one_engine_actor_and_episodes_spread(ray_local):
    import ray
    import ray.cloudpickle

    from ray_knowsim.backends.vllm import pool as pool_mod

    assert len(RESETS) == EPISODES
    plain = pool_mod.request_dict
    mp = pytest.MonkeyPatch()
    mp.setattr(pool_mod.VLLMPool, "actor_class", RecordingEngineActor)
    # the offline double's facts travel with the request (only so the stand-in can answer as it)
    mp.setattr(pool_mod, "request_dict", lambda req: {**plain(req), "offline_facts": dict(req.offline_facts or {})})
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        async def run() -> tuple[dict, list, list]:
            env = TrainingEnvironment.from_config(EnvironmentConfig(overrides=_overrides(), max_turns=TURNS,
                                                                    early_stop="virtual"))
            actors = list(env.pools["sim"].actors)
            assert len(actors) == REPLICAS
            try:
                episodes = await _episodes(env)
                records = [await a.record.remote() for a in actors]
            finally:
                await env.aclose()
            return episodes, records, actors

        episodes, records, actors = asyncio.run(run())
        # the environment's close stopped its pool: the actors are gone
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actors[0].record.remote(), timeout=60)
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        mp.undo()

    assert len({pid for pid, _ in records}) == REPLICAS  # three actor processes
    served_by: dict[str, set[int]] = defaultdict(set)  # session -> actors that served its requests
    roles: dict[str, set[str]] = defaultdict(set)
    for index, (_, ids) in enumerate(records):
        for rid in ids:
            session, _, rest = rid.partition("#")
            served_by[session].add(index)
            roles[session].add(rest.partition(":")[2])
    sessions = {e["session"]: eid for eid, e in episodes.items()}
    assert set(served_by) == set(sessions)  # every request belongs to one of the episodes
    for session, eid in sessions.items():
        assert eid in session  # the episode's session (the affinity key) holds its episode id
        assert len(served_by[session]) == 1, f"episode {eid} was served by actors {served_by[session]}"
        assert {"user_sim", "extractor"} <= roles[session]  # both of its models' requests
        assert len(episodes[eid]["rewards"]) == TURNS and None not in episodes[eid]["rewards"]
    per_actor = [sum(1 for s in served_by.values() if s == {i}) for i in range(REPLICAS)]
    assert all(n > 0 for n in per_actor), f"episodes per actor: {per_actor}"  # spread, not all on one

    # through the pool, the episodes are the ones the in-process offline model gives
    async def offline() -> dict:
        env = TrainingEnvironment.from_config(EnvironmentConfig(max_turns=TURNS, early_stop="virtual"))
        try:
            return await _episodes(env)
        finally:
            await env.aclose()

    alone = asyncio.run(offline())
    assert {k: (v["rewards"], v["kg"]) for k, v in episodes.items()} == \
        {k: (v["rewards"], v["kg"]) for k, v in alone.items()}
    assert any(v["kg"] > 0 for v in alone.values())


@pytest.mark.slow  # Ray Serve and two replicas start: ~60-100 s on 2 shared cores
def test_serve_replicas_share_one_engine_pool_and_keep_each_episode_on_one_engine(ray_local):
    """``env serve --replicas 2``'s path (``shared_engine_pools`` + ``replicas_app``, as the CLI
    calls them): the two replicas use ONE pool of engine actors (3, not 2 x 3), and every request
    of an episode, from whichever replica holds it, reaches one engine actor. The replicas get no
    offline facts, so the stand-in answers the learner with a plain line and the extraction fails:
    each episode ends unscored after its first step, which is enough to check where its requests went."""
    import ray
    import ray.cloudpickle

    serve = pytest.importorskip("ray.serve")
    generic = pytest.importorskip("openenv.core.generic_client", reason="needs the training extra (openenv-core)")
    from ray_knowsim.cli.env import replicas_app
    from ray_knowsim.backends.model_set import shutdown_pools
    from ray_knowsim.backends.vllm import pool as pool_mod
    from ray_knowsim.training.adapters.serve import APP_NAME
    from ray_knowsim.training.build import shared_engine_pools
    from tests.doubles.ports import pick_ports

    mp = pytest.MonkeyPatch()
    mp.setattr(pool_mod.VLLMPool, "actor_class", RecordingEngineActor)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    config = EnvironmentConfig(overrides=_overrides(), max_turns=TURNS, early_stop="virtual")
    pools: dict = {}
    try:
        pools = shared_engine_pools(config)
        assert list(pools) == ["sim"] and len(pools["sim"].actors) == REPLICAS
        (port,) = pick_ports(1)
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(replicas_app(config, replicas=2, max_sessions=16, pools=pools), name=APP_NAME, route_prefix="/")

        async def episode(k: int, reset: dict) -> tuple[str, set]:
            async with generic.GenericEnvClient(base_url=f"http://127.0.0.1:{port}", message_timeout_s=300) as client:
                r = await client.reset(**reset, episode_id=f"srv{k:02d}")
                servers = {r.observation["server"]}
                while not r.done:
                    r = await client.step({"message": REPLIES[0]})
                    servers.add(r.observation["server"])
                return r.observation["episode_metadata"]["session_id"], servers

        async def drive() -> list:
            return await asyncio.gather(*(episode(k, r) for k, r in enumerate(RESETS)))

        results = asyncio.run(drive())
        records = ray.get([a.record.remote() for a in pools["sim"].actors], timeout=120)
        engines = [a for a in ray.util.list_named_actors(all_namespaces=True) if "vllm-" in str(a)]
    finally:
        try:
            serve.delete(APP_NAME)
            serve.shutdown()
        finally:
            shutdown_pools(pools)
            ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
            mp.undo()

    assert len(engines) == REPLICAS, engines  # one pool for both replicas
    replicas = set().union(*(servers for _, servers in results))
    assert len(replicas) == 2, replicas  # both Serve replicas held episodes
    served_by: dict[str, set[int]] = defaultdict(set)
    for index, (_, ids) in enumerate(records):
        for rid in ids:
            served_by[rid.partition("#")[0]].add(index)
    for session, servers in results:
        assert len(servers) == 1
        assert len(served_by[session]) == 1, f"{session}: served by engine actors {served_by[session]}"
    assert len({next(iter(s)) for s in served_by.values()}) > 1  # episodes spread over the engines
