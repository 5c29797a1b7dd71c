"""The vLLM actor backend: pool/dispatch and batching logic with fakes (fast, no vLLM), then the
real thing on CPU with SmolLM2-135M (marker ``llm_cpu``; skipped outside .venv-llm)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from types import SimpleNamespace

import pytest

try:
    from llm_cpu_fixtures import (  # noqa: F401  (pytest finds fixtures by name)
        SERVED_MODEL_NAME, llm_ray, post_json, smollm2_dir, vllm_cpu_config, vllm_cpu_pool,
        vllm_server,
    )
except ImportError:  # the tests tree became a package
    from tests.llm.llm_cpu_fixtures import (  # noqa: F401
        SERVED_MODEL_NAME, llm_ray, post_json, smollm2_dir, vllm_cpu_config, vllm_cpu_pool,
        vllm_server,
    )

from ray_knowsim.model.chat import ChatRequest
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.llm.vllm_backend import VLLMActorModel, VLLMEngineActor, VLLMModelConfig

# --------------------------------------------------------------------------- config


def test_config_defaults_and_engine_args():
    cpu = VLLMModelConfig(model="/models/smol/", engine_kwargs={"swap_space": 0})
    assert cpu.name == "vllm:smol"
    assert cpu.tp == 1  # 0 GPUs still means one (CPU) worker
    args = cpu.engine_args()
    assert args["model"] == "/models/smol/" and args["tensor_parallel_size"] == 1
    assert args["enable_prefix_caching"] is True and args["seed"] == 0
    assert args["swap_space"] == 0
    assert "gpu_memory_utilization" not in args and "max_model_len" not in args

    gpu = VLLMModelConfig(model="org/big", num_gpus=4, max_model_len=8192,
                          gpu_memory_utilization=0.8, served_name="big")
    assert gpu.name == "big" and gpu.tp == 4
    assert gpu.engine_args()["gpu_memory_utilization"] == 0.8
    assert gpu.engine_args()["max_model_len"] == 8192
    assert VLLMModelConfig(model="m", num_gpus=4, tensor_parallel_size=2).tp == 2
    with pytest.raises(ValueError):
        VLLMModelConfig(model="m", unknown_field=1)


def test_pool_names_are_stable_and_distinguish_engines():
    a = VLLMModelConfig(model="/m/a", replicas=1)
    assert a.actor_name(0) == VLLMModelConfig(model="/m/a", replicas=3).actor_name(0)
    assert a.actor_name(0) != a.actor_name(1)
    assert a.actor_name(0) != VLLMModelConfig(model="/m/b").actor_name(0)
    assert a.actor_name(0) != VLLMModelConfig(model="/m/a", seed=1).actor_name(0)


# --------------------------------------------------------------------------- dispatch (fake actors)


class _Method:
    def __init__(self, fn):
        self._fn = fn

    def remote(self, *args):
        async def run():
            return self._fn(*args)

        return run()


class _FakeActor:
    """Mimics a Ray actor handle: ``actor.method.remote(...)`` returns an awaitable."""

    def __init__(self, tag: str, load: int = 0, fail: bool = False):
        self.tag, self._load, self.fail, self.batches = tag, load, fail, []
        self.load = _Method(lambda: self._load)
        self.generate = _Method(self._generate)

    def _generate(self, reqs):
        if self.fail:
            raise RuntimeError("actor died")
        self.batches.append(reqs)
        return [{"text": f"{self.tag}:{r['messages'][-1]['content']}", "prompt_tokens": 3,
                 "completion_tokens": 2, "finish_reason": "stop", "latency_s": 0.1,
                 "error": None} for r in reqs]


def _req(i: int, **kw) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": str(i)},), **kw)


def test_actor_model_splits_batch_over_least_loaded_replicas_in_order():
    busy, idle = _FakeActor("busy", load=5), _FakeActor("idle", load=0)
    model = VLLMActorModel(VLLMModelConfig(model="/m/x", replicas=2), actors=[busy, idle],
                           min_chunk=2)
    assert isinstance(model, ChatModel)
    out = asyncio.run(model.complete([_req(i) for i in range(5)]))
    assert [r.text.split(":")[1] for r in out] == ["0", "1", "2", "3", "4"]  # order kept
    # the idle replica gets the first chunk, the busy one the rest
    assert [r.text.split(":")[0] for r in out] == ["idle"] * 2 + ["busy"] * 3
    assert all(r.error is None and r.usage.total == 5 for r in out)
    # small batches are not split
    out = asyncio.run(model.complete([_req(0)]))
    assert len(out) == 1 and out[0].text == "idle:0"
    assert asyncio.run(model.complete([])) == []


def test_actor_failure_becomes_per_request_errors():
    dead, ok = _FakeActor("dead", load=0, fail=True), _FakeActor("ok", load=1)
    model = VLLMActorModel(VLLMModelConfig(model="/m/x", replicas=2), actors=[dead, ok],
                           min_chunk=1)
    out = asyncio.run(model.complete([_req(i) for i in range(4)]))
    assert [r.error is not None for r in out] == [True, True, False, False]
    assert "actor died" in out[0].error and out[0].text == ""
    assert out[2].text == "ok:2"


def test_request_fields_reach_the_engine():
    actor = _FakeActor("a")
    model = VLLMActorModel(VLLMModelConfig(model="/m/x"), actors=[actor])
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    asyncio.run(model.complete([_req(1, temperature=0.7, max_tokens=9, seed=3,
                                     json_schema=schema)]))
    (sent,) = actor.batches[0]
    assert sent == {"messages": [{"role": "user", "content": "1"}], "temperature": 0.7,
                    "max_tokens": 9, "seed": 3, "json_schema": schema}


# --------------------------------------------------------------------------- the actor (fake engine)


class _FakeEngine:
    """Stands in for vllm.LLM: records each chat() batch; can be held or made to reject."""

    def __init__(self):
        self.calls: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()

    def chat(self, messages, sampling_params, use_tqdm, add_generation_prompt):
        assert sampling_params == [4] * len(messages)  # made by the actor's _make_params
        contents = [m[-1]["content"] for m in messages]
        self.calls.append(contents)
        self.gate.wait(10)
        if "BAD" in contents:
            raise ValueError("prompt too long")
        return [SimpleNamespace(prompt_token_ids=[1] * len(c),
                                outputs=[SimpleNamespace(text=c.upper(), token_ids=[7, 7],
                                                         finish_reason="stop")])
                for c in contents]


def _reqs(*contents):
    return [{"messages": [{"role": "user", "content": c}], "temperature": 0.0, "max_tokens": 4,
             "seed": None, "json_schema": None} for c in contents]


def _fake_actor(engine, **cfg):
    return VLLMEngineActor(VLLMModelConfig(model="/m/x", **cfg).model_dump(), _engine=engine,
                           _make_params=lambda req: req["max_tokens"])


def _wait_until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def test_engine_actor_merges_batches_queued_while_busy():
    engine = _FakeEngine()
    actor = _fake_actor(engine)
    engine.gate.clear()  # hold the first engine call until the others are queued
    results = {}

    def call(key, contents):
        results[key] = actor.generate(_reqs(*contents))

    first = threading.Thread(target=call, args=("a", ["a1"]))
    first.start()
    _wait_until(lambda: engine.calls)
    others = [threading.Thread(target=call, args=("b", ["b1", "b2"])),
              threading.Thread(target=call, args=("c", ["c1"]))]
    for t in others:
        t.start()
    _wait_until(lambda: actor.load() == 4)
    engine.gate.set()
    for t in [first, *others]:
        t.join(10)
    assert engine.calls[0] == ["a1"]
    assert len(engine.calls) == 2 and sorted(engine.calls[1]) == ["b1", "b2", "c1"]
    assert [r["text"] for r in results["b"]] == ["B1", "B2"]
    assert results["c"][0]["text"] == "C1" and results["c"][0]["completion_tokens"] == 2
    assert actor.load() == 0 and actor.info()["engine_calls"] == 2


def test_engine_actor_isolates_a_rejected_request():
    engine = _FakeEngine()
    out = _fake_actor(engine).generate(_reqs("ok1", "BAD", "ok2"))
    assert [o["error"] is None for o in out] == [True, False, True]
    assert "prompt too long" in out[1]["error"] and out[1]["text"] == ""
    assert [out[0]["text"], out[2]["text"]] == ["OK1", "OK2"]
    assert engine.calls == [["ok1", "BAD", "ok2"], ["ok1"], ["BAD"], ["ok2"]]


def test_engine_actor_caps_merged_batch_size():
    engine = _FakeEngine()
    actor = _fake_actor(engine, max_batch_requests=2)
    engine.gate.clear()
    threads = [threading.Thread(target=actor.generate, args=(_reqs(c),)) for c in "xyzw"]
    threads[0].start()
    _wait_until(lambda: engine.calls)
    for t in threads[1:]:
        t.start()
    _wait_until(lambda: actor.load() == 4)
    engine.gate.set()
    for t in threads:
        t.join(10)
    assert sorted(len(c) for c in engine.calls) == [1, 1, 2]
    assert actor.load() == 0


# --------------------------------------------------------------------------- the pool on real Ray


class _EchoEngineActor(VLLMEngineActor):
    """The real actor class with the fake engine, so the pool can be tested without vLLM."""

    def __init__(self, cfg):
        super().__init__(cfg, _engine=_FakeEngine(), _make_params=lambda req: req["max_tokens"])


def test_named_pool_is_shared_and_dispatches_through_ray(llm_ray, monkeypatch):
    import sys

    import ray
    import ray.cloudpickle

    from ray_knowsim.llm import vllm_backend
    from ray_knowsim.llm.vllm_backend import get_or_create_vllm_pool, kill_vllm_pool

    # workers may not import this test module: ship its classes by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    monkeypatch.setattr(vllm_backend, "VLLMEngineActor", _EchoEngineActor)
    cfg = VLLMModelConfig(model="/fake/echo", replicas=2, num_cpus=0)
    try:
        first = get_or_create_vllm_pool(cfg)
        again = get_or_create_vllm_pool(cfg)  # e.g. from a shard task: same named actors
        assert [a._actor_id for a in first] == [a._actor_id for a in again]
        assert len({a._actor_id for a in first}) == 2
        model = VLLMActorModel(cfg, actors=again, min_chunk=2)
        out = asyncio.run(model.complete([_req(i, max_tokens=4) for i in range(6)]))
        assert [r.text for r in out] == [str(i) for i in range(6)]  # the echo engine's upper()
        assert all(r.error is None and r.usage.completion_tokens == 2 for r in out)
        served = [ray.get(a.info.remote())["served"] for a in first]
        assert sorted(served) == [3, 3]  # split over both replicas
    finally:
        assert kill_vllm_pool(cfg) == 2
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


# --------------------------------------------------------------------------- real vLLM on CPU

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 40},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}
QUESTIONS = ["What is the capital of France?", "Name a primary colour.",
             "What is 2 + 2?", "What is the capital of France?"]


def _check_answer(text: str) -> dict:
    data = json.loads(text)
    assert set(data) == {"answer", "confidence"}
    assert isinstance(data["answer"], str) and len(data["answer"]) <= 40
    assert isinstance(data["confidence"], int) and 0 <= data["confidence"] <= 9
    return data


@pytest.mark.llm_cpu
@pytest.mark.slow
def test_vllm_actor_batch_with_json_schema(vllm_cpu_config, vllm_cpu_pool):
    model = VLLMActorModel(vllm_cpu_config, actors=vllm_cpu_pool)
    assert model.name == SERVED_MODEL_NAME
    system = {"role": "system", "content": "Answer in JSON with fields answer and confidence."}
    reqs = [ChatRequest(messages=(system, {"role": "user", "content": q}), max_tokens=64,
                        json_schema=ANSWER_SCHEMA, schema_name="answer", seed=0)
            for q in QUESTIONS]
    t = time.perf_counter()
    out = asyncio.run(model.complete(reqs))
    wall = time.perf_counter() - t
    assert len(out) == 4
    for r in out:
        assert r.error is None, r.error
        _check_answer(r.text)
        assert r.finish_reason == "stop"
        assert r.usage.prompt_tokens > 10 and 0 < r.usage.completion_tokens <= 64
    assert out[0].text == out[3].text  # greedy decoding is deterministic
    toks = sum(r.usage.completion_tokens for r in out)
    print(f"\n[llm_cpu] actor batch of 4: {wall:.2f} s, {toks} output tokens, {toks / wall:.0f} tok/s")


@pytest.mark.llm_cpu
@pytest.mark.slow
def test_vllm_actor_rejects_only_the_overlong_request(vllm_cpu_config, vllm_cpu_pool):
    model = VLLMActorModel(vllm_cpu_config, actors=vllm_cpu_pool)
    too_long = "word " * (vllm_cpu_config.max_model_len + 100)
    reqs = [ChatRequest(messages=({"role": "user", "content": too_long},), max_tokens=8),
            ChatRequest(messages=({"role": "user", "content": "Say hi."},), max_tokens=8)]
    bad, good = asyncio.run(model.complete(reqs))
    assert bad.error is not None and "length" in bad.error and bad.text == ""
    assert good.error is None and good.text and good.usage.completion_tokens > 0


@pytest.mark.llm_cpu
@pytest.mark.slow
def test_vllm_openai_server_json_schema(vllm_server):
    body = {
        "model": SERVED_MODEL_NAME, "temperature": 0, "max_tokens": 64, "seed": 0,
        "messages": [{"role": "user", "content": "What is the capital of France? Answer in JSON."}],
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA}},
    }
    t = time.perf_counter()
    data = post_json(f"{vllm_server}/chat/completions", body)
    wall = time.perf_counter() - t
    _check_answer(data["choices"][0]["message"]["content"])
    assert data["usage"]["completion_tokens"] > 0
    print(f"\n[llm_cpu] server chat: {wall:.2f} s, {data['usage']['completion_tokens']} tokens")
