"""Bad input gets a clear error and loses nothing; an episode whose endpoint dies ends unscored
(reward None, with its reason); one episode's failure never touches another's."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from ray_knowsim.llm.http.client import OpenAICompatibleModel
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.llm.retry import BackoffConfig
from ray_knowsim.llm.offline.server import serve_model_in_thread
from ray_knowsim.schema.chat import ChatResponse
from ray_knowsim.training import (
    EnvironmentConfig, EpisodeBusy, EpisodeDone, EpisodeExpired, InvalidAction, InvalidReset, TrainingEnvironment,
    UnknownEpisode,
)  # fmt: skip
from ray_knowsim.training.build import build_parts

ITEM = {"task": "math", "item_id": "demo_math_01", "level": "novice"}
REPLY = "A fraction a/b names a parts of a whole cut into b equal parts; let us compare 1/2 and 2/4."


def environment(user_sim=None, extractor=None, **fields) -> TrainingEnvironment:
    config = EnvironmentConfig(**fields)
    ctx, items, graphs, sim, ext = build_parts(config)
    return TrainingEnvironment(config, ctx, items, graphs, user_sim or sim, extractor or ext)


def test_bad_requests_get_clear_errors_and_the_episode_goes_on():
    async def go():
        env = environment(max_message_chars=200, max_turns=3)
        obs = await env.reset(**ITEM, seed=3)
        eid = obs.episode_id
        with pytest.raises(InvalidAction, match="empty"):
            await env.step(eid, "   ")
        with pytest.raises(InvalidAction, match="at most 200"):
            await env.step(eid, "x" * 201)
        with pytest.raises(InvalidAction, match="malformed TutorAction.*text"):
            await env.step(eid, {"text": "hi"})
        with pytest.raises(InvalidAction, match="message"):
            await env.step(eid, {"message": 3})
        with pytest.raises(UnknownEpisode, match="nope"):
            await env.step("nope", REPLY)
        with pytest.raises(InvalidReset, match="unknown item"):
            await env.reset(task="math", item_id="missing")
        with pytest.raises(InvalidReset, match="simulator"):
            await env.reset(**ITEM, simulator="oracle")
        with pytest.raises(InvalidReset, match="level"):
            await env.reset(task="math", item_id="demo_math_01", level="expert")
        with pytest.raises(InvalidReset, match="already used"):
            await env.reset(**ITEM, episode_id=eid)
        # two steps at once on one episode: the second is refused, the first goes through
        first, second = await asyncio.gather(env.step(eid, REPLY), env.step(eid, REPLY), return_exceptions=True)
        assert isinstance(second, EpisodeBusy) and first.turn == 1 and not first.done
        # nothing was lost: the refused inputs left no trace in the conversation
        assert [speaker for speaker, _ in env.episode(eid).transcript] == ["user", "assistant", "user"]
        while not (obs := await env.step(eid, REPLY)).done:
            pass
        assert obs.turn == 3 and obs.metadata.stop_reason == "max_turns" and obs.reward is not None
        with pytest.raises(EpisodeDone):
            await env.step(eid, REPLY)
        await env.close(eid)
        with pytest.raises(EpisodeDone, match="closed"):
            await env.step(eid, REPLY)

    asyncio.run(go())


def test_an_idle_episode_expires():
    async def go():
        env = environment(episode_ttl_s=0.05)
        obs = await env.reset(**ITEM)
        await asyncio.sleep(0.2)
        with pytest.raises(EpisodeExpired, match="expired"):
            await env.step(obs.episode_id, REPLY)
        assert env.open_episodes == 0 and env.kernel.open_slots == 0

    asyncio.run(go())


class FailsFor:
    """The offline model, except that it fails every request of the sessions named ``doomed``
    from their ``after``-th extractor call on (an endpoint that dies for them)."""

    name = "flaky"

    def __init__(self, doomed: str, after: int) -> None:
        self.inner, self.doomed, self.after, self.calls = OfflineModel(), doomed, after, 0

    async def generate(self, request):
        if self.doomed in request.request_id and request.role == "extractor":
            self.calls += 1
            if self.calls > self.after:
                return ChatResponse(text="", error="http_503", detail="HTTP 503: the server went away")
        return await self.inner.generate(request)


def test_a_failing_episode_ends_unscored_and_leaves_the_others_alone():
    async def episode(env, eid):
        obs = [await env.reset(**ITEM, seed=5, episode_id=eid)]
        while not obs[-1].done:
            obs.append(await env.step(eid, REPLY))
        return obs

    async def go():
        flaky = FailsFor("doomed", after=1)
        env = environment(user_sim=flaky, extractor=flaky, max_turns=4, early_stop="virtual")
        doomed, healthy = await asyncio.gather(episode(env, "doomed"), episode(env, "healthy"))
        alone = await episode(environment(max_turns=4, early_stop="virtual"), "healthy")
        return doomed, healthy, alone

    doomed, healthy, alone = asyncio.run(go())
    last = doomed[-1]
    assert last.done and last.reward is None and last.rewards.episode is None
    assert last.metadata.error == "extractor_http_503" and "went away" in last.metadata.error_detail
    assert len(doomed) == 3  # reset, one scored turn, the failed one
    strip = lambda obs: [o.model_dump(exclude={"metadata": {"models"}}) for o in obs]
    assert strip(healthy) == strip(alone) and healthy[-1].reward is not None


def test_an_endpoint_that_dies_mid_episode_ends_it_with_reward_none():
    async def go(server):
        model = OpenAICompatibleModel(HTTPModelConfig(
            base_url=server.base_url, model="offline", offline_server=True, max_attempts=2, timeout_s=5,
            connect_timeout_s=2, backoff=BackoffConfig(initial_s=0.01, max_s=0.02)))  # fmt: skip
        env = environment(user_sim=model, extractor=model, max_turns=4)
        obs = await env.reset(**ITEM, seed=1)
        obs = await env.step(obs.episode_id, REPLY)
        assert not obs.done and obs.reward is not None
        return env, obs.episode_id

    with serve_model_in_thread(OfflineModel()) as server:
        loop = asyncio.new_event_loop()
        env, eid = loop.run_until_complete(go(server))
    try:  # the server is gone now
        last = loop.run_until_complete(env.step(eid, REPLY))
    finally:
        loop.close()
    assert last.done and last.reward is None
    assert last.metadata.error.startswith("extractor_") and last.metadata.stop_reason == "error"


@pytest.mark.parametrize("min_turns", [1, 3])
def test_the_methods_early_stop_ends_an_episode_but_not_before_min_turns(min_turns):
    # a mastery share any advanced learner already has: the rules' stop fires after turn 1
    lenient = ["rules.overrides={termination: {mastery_fraction: 0.05}}"]

    async def go():
        env = environment(overrides=lenient, min_turns=min_turns, max_turns=6)
        obs = await env.reset(task="math", item_id="demo_math_01", level="advanced", seed=2)
        while not obs.done:
            obs = await env.step(obs.episode_id, REPLY)
        return obs

    last = asyncio.run(go())
    assert last.turn == min_turns and last.metadata.stop_reason == "mastery"
    assert last.rewards.episode.metrics["early_stop_turn"] == 1 and last.reward is not None
