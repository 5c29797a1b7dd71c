"""Test doubles for the vLLM engine actor: an engine with the actor's ``Engine`` shape, an actor
class that runs it (so Ray pools can be tested without vLLM), and handle-like fake actors."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from ray_knowsim.backends.vllm.actor import EngineDead, VLLMEngineActor

#: this module, for ``ray.cloudpickle.register_pickle_by_value``: Ray workers cannot import tests/,
#: so a test ships these classes to them by value
THIS_MODULE = sys.modules[__name__]


class FakeEngine:
    """One token per word (+3 for the template); answers the last message upper-cased.
    ``TEMPLATE_BAD`` breaks the template, ``DIE`` kills the engine; ``hold`` parks requests."""

    def __init__(self, max_model_len: int = 64, default_sampling: dict | None = None):
        self.max_model_len = max_model_len
        self.default_sampling = dict(default_sampling or {})
        self.params: list[dict] = []
        self.in_flight = 0
        self.peak = 0
        self.hold: asyncio.Event | None = None
        self.closed = False

    def render(self, messages, chat_template_kwargs):
        text = " ".join(m["content"] for m in messages)
        if "TEMPLATE_BAD" in text:
            raise ValueError("template: roles must alternate")
        return list(range(len(text.split()) + 3))

    async def generate(self, prompt_ids, params, request_id):
        self.params.append(dict(params, request_id=request_id))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.hold is not None:
                await self.hold.wait()
            await asyncio.sleep(0)
            if params.get("seed") == -1:
                raise EngineDead("EngineDeadError: engine core died")
            yield {"text": f"ok{len(prompt_ids)}", "completion_tokens": 2, "finish_reason": "stop"}
        finally:
            self.in_flight -= 1

    def shutdown(self):
        self.closed = True


class EchoEngine(FakeEngine):
    """Answers with the request id, and reports the prompt tokens its prefix cache served the way
    vLLM does (``num_cached_tokens``): whole blocks shared with an earlier prompt, never the last token."""

    BLOCK = 16

    def __init__(self, max_model_len: int = 64, default_sampling: dict | None = None):
        super().__init__(max_model_len, default_sampling)
        self.seen: list[list[int]] = []
        self.cached: list[int] = []  # reported per request, in order

    def render(self, messages, chat_template_kwargs):
        self._last = messages[-1]["content"]
        return super().render(messages, chat_template_kwargs)

    def prefix_hit(self, prompt_ids) -> int:
        def shared(a, b) -> int:
            n = 0
            for x, y in zip(a, b):
                if x != y:
                    break
                n += 1
            return n

        best = max((shared(p, prompt_ids) for p in self.seen), default=0)
        return min(best, len(prompt_ids) - 1) // self.BLOCK * self.BLOCK

    async def generate(self, prompt_ids, params, request_id):
        cached = self.prefix_hit(prompt_ids)
        self.seen.append(list(prompt_ids))
        self.cached.append(cached)
        async for out in super().generate(prompt_ids, params, request_id):
            yield {**out, "text": request_id.split("~")[0], "cached_tokens": cached}


#: an environment variable of a model entry's ``env``: the fake actor writes what its engine would be
#: started with (``AsyncEngineArgs(**engine_args())``) and the environment it set, as JSON, to this file
RECORD_ENV = "KNOWSIM_FAKE_ENGINE_RECORD"


class FakeEngineActor(VLLMEngineActor):
    """The real actor class over :class:`EchoEngine` (answers with the request id)."""

    def __init__(self, cfg):
        super().__init__(cfg, _engine=EchoEngine(max_model_len=4096))
        record = os.environ.get(RECORD_ENV)
        if record:
            received = {"engine_args": self.cfg.engine_args(), "env": {k: os.environ.get(k) for k in self.cfg.env}}
            Path(record).write_text(json.dumps(received, sort_keys=True, default=str), encoding="utf-8")

    async def pid(self) -> int:
        import os

        return os.getpid()


class _Method:
    def __init__(self, fn):
        self._fn = fn

    def remote(self, *args):
        return self._fn(*args)


class HandleLike:
    """Mimics a Ray actor handle around a local actor: ``h.method.remote(...)`` is awaitable."""

    def __init__(self, actor: VLLMEngineActor, tag: str = ""):
        self.actor, self.tag = actor, tag
        self.generate = _Method(self._generate)
        self.info = _Method(self._info)
        self.fail_generate = 0  # raise a Ray actor error on the next n generate calls
        self.fail_info = 0
        self.restarting_info = 0  # answer the next n probes "restarting" (ActorUnavailableError)
        self.calls = 0

    async def _generate(self, req):
        self.calls += 1
        if self.fail_generate:
            self.fail_generate -= 1
            import ray.exceptions

            raise ray.exceptions.RayActorError()
        out = await self.actor.generate(req)
        return {**out, "text": f"{self.tag}:{out['text']}"}

    async def _info(self):
        if self.restarting_info:
            self.restarting_info -= 1
            import ray.exceptions

            raise ray.exceptions.ActorUnavailableError("The actor is restarting.", None)
        if self.fail_info:
            self.fail_info -= 1
            import ray.exceptions

            raise ray.exceptions.RayActorError()
        return await self.actor.info()


def local_actor(engine: FakeEngine | None = None, **cfg: Any) -> VLLMEngineActor:
    from ray_knowsim.backends.vllm.config import SECRETS_CONTEXT, VLLMModelConfig

    actor = VLLMEngineActor(VLLMModelConfig(model="/m/x", **cfg).model_dump(context=SECRETS_CONTEXT), _engine=engine or FakeEngine())
    actor.exits = []  # type: ignore[attr-defined]
    actor._exit = actor.exits.append  # type: ignore[attr-defined]
    return actor
