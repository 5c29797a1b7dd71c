"""The vLLM engine actor and the ChatModel over its replicas, with a fake engine (no vLLM): one
generate per request, named per-request failures, `vllm serve` sampling parity, session-affine
routing, restarts and retries, dead replicas dropped; then a pool on a real local Ray."""

from __future__ import annotations

import asyncio
import time

import pytest

from ray_knowsim.backends.vllm.actor import OPENAI_DEFAULTS, sampling_fields
from ray_knowsim.backends.vllm.config import REDACTED, VLLMModelConfig
from ray_knowsim.backends.vllm.pool import VLLMActorModel, VLLMPool, pick_replica, session_key
from ray_knowsim.llm.protocol import ChatModel, generate_all
from ray_knowsim.schema.chat import ChatRequest

from tests.doubles.vllm_fakes import THIS_MODULE, EchoEngine, FakeEngine, FakeEngineActor, HandleLike, local_actor


def _req(content: str, rid: str = "s/0#1:assistant", **kw) -> dict:
    return {"messages": [{"role": "user", "content": content}], "temperature": kw.get("temperature", 0.0),
            "max_tokens": kw.get("max_tokens", 8), "seed": kw.get("seed", 1), "json_schema": None, "request_id": rid}


# --------------------------------------------------------------------------- config


def test_config_gpus_tp_and_engine_args():
    cpu = VLLMModelConfig(model="/models/smol/", engine_kwargs={"swap_space": 0})
    assert cpu.name == "vllm:smol" and cpu.tp == 1 and not cpu.fractional
    args = cpu.engine_args()
    assert args["enable_prefix_caching"] is True and args["generation_config"] == "auto"
    assert args["structured_outputs_config"] == {"backend": "auto", "disable_any_whitespace": False}  # a plain server's
    assert "gpu_memory_utilization" not in args and args["swap_space"] == 0
    half = VLLMModelConfig(model="m", num_gpus=0.5)
    assert half.fractional and half.engine_args()["gpu_memory_utilization"] == 0.5
    tp = VLLMModelConfig(model="m", num_gpus=4)
    assert tp.tp == 4 and tp.engine_args()["distributed_executor_backend"] == "ray"
    for bad in (dict(num_gpus=1.5), dict(num_gpus=0.5, tensor_parallel_size=2), dict(num_gpus=4, tensor_parallel_size=2),
                dict(num_gpus=1, multi_node=True), dict(max_batch_requests=4)):
        with pytest.raises(ValueError):
            VLLMModelConfig(model="m", **bad)
    flags = VLLMModelConfig(model="/m", max_model_len=2048).serve_flags()
    assert "--generation-config" in flags and '{"enable_thinking":false}' in flags
    assert '{"backend":"auto","disable_any_whitespace":false}' in flags
    compact = VLLMModelConfig(model="/m", json_whitespace="compact")
    assert compact.engine_args()["structured_outputs_config"] == {"backend": "xgrammar", "disable_any_whitespace": True}
    assert '{"backend":"xgrammar","disable_any_whitespace":true}' in compact.serve_flags()


def test_http_and_vllm_entries_send_the_same_request_for_the_same_seed():
    """The two request builders: what decides the tokens (messages, temperature, max_tokens, seed,
    the schema, the grammar's whitespace) is the same for an `http` entry against a plain vLLM
    server and for a `vllm` entry, so the same seeds truncate (or not) alike on both."""
    from ray_knowsim.backends.vllm.actor import sampling_fields
    from ray_knowsim.backends.vllm.config import VLLM_SERVE_STRUCTURED
    from ray_knowsim.backends.vllm.pool import request_dict
    from ray_knowsim.llm.http.client import OpenAICompatibleModel
    from ray_knowsim.llm.http.config import HTTPModelConfig
    from ray_knowsim.schema.chat import ChatRequest

    schema = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
    req = ChatRequest(messages=({"role": "system", "content": "s"}, {"role": "user", "content": "u"}), role="extractor",
                      temperature=0.7, max_tokens=4096, seed=1588003922, json_schema=schema, schema_name="SignalReport")
    body = OpenAICompatibleModel(HTTPModelConfig(base_url="http://127.0.0.1:1/v1", model="smol")).build_payload(req)
    generation_defaults = {"top_p": 0.9, "repetition_penalty": 1.1}  # a model's generation_config.json: both apply it
    sent = sampling_fields(request_dict(req), generation_defaults, n_prompt=1000, max_model_len=8192)
    assert body["messages"] == request_dict(req)["messages"]
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (sent["temperature"], sent["max_tokens"], sent["seed"])
    assert body["response_format"]["json_schema"]["schema"] == sent["json_schema"] == schema
    assert (sent["top_p"], sent["repetition_penalty"]) == (0.9, 1.1)  # what vllm serve takes from the same file
    assert set(body) <= {"model", "messages", "temperature", "max_tokens", "seed", "response_format"}  # nothing else shapes it
    # the grammar: a vllm entry decodes as a server started without --structured-outputs-config
    assert VLLMModelConfig(model="/m").engine_args()["structured_outputs_config"] == VLLM_SERVE_STRUCTURED
    # a cap above what the context leaves is cut to it, as vllm serve's get_max_tokens does
    assert sampling_fields(request_dict(req), {}, n_prompt=5000, max_model_len=8192)["max_tokens"] == 3192


def test_secret_values_are_redacted_everywhere_but_the_actor_payload():
    from ray_knowsim.backends.vllm.config import SECRETS_CONTEXT

    cfg = VLLMModelConfig(model="m", env={"HF_TOKEN": "hf_s3cret", "VLLM_CPU_KVCACHE_SPACE": "1"},
                          engine_kwargs={"hf_token": "hf_s3cret2", "swap_space": 1})
    public = cfg.model_dump(mode="json")
    assert public["env"] == {"HF_TOKEN": REDACTED, "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert public["engine_kwargs"] == {"hf_token": REDACTED, "swap_space": 1}
    assert "s3cret" not in cfg.model_dump_json() and "s3cret" not in repr(cfg.model_dump())
    private = cfg.model_dump(context=SECRETS_CONTEXT)
    assert private["env"]["HF_TOKEN"] == "hf_s3cret" and private["engine_kwargs"]["hf_token"] == "hf_s3cret2"
    assert cfg.secret_names() == ["HF_TOKEN", "engine_kwargs.hf_token"]
    assert VLLMModelConfig.model_validate(private).engine_args()["hf_token"] == "hf_s3cret2"


def test_settings_named_like_tokens_are_settings_and_reach_the_engine_as_stated():
    from ray_knowsim.config.model_entries import VLLMModelEntry
    from ray_knowsim.backends.vllm.config import is_secret_name

    for secret in ("hf_token", "api_key", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "apiKey", "password"):
        assert is_secret_name(secret), secret
    for setting in ("max_num_batched_tokens", "tokenizer", "tokenizer_mode", "skip_tokenizer_init", "HF_HOME",
                    "VLLM_CPU_KVCACHE_SPACE", "max_model_len"):
        assert not is_secret_name(setting), setting
    entry = VLLMModelEntry(backend="vllm", model="/m", env={"HF_HOME": "/data/hf", "HF_TOKEN": "hf_s3cret"},
                           engine_kwargs={"max_num_batched_tokens": 8192, "tokenizer": "/m/tok", "hf_token": "hf_s3cret2"})
    public = entry.model_dump(mode="json")
    assert public["env"] == {"HF_HOME": "/data/hf", "HF_TOKEN": REDACTED}
    assert public["engine_kwargs"] == {"max_num_batched_tokens": 8192, "tokenizer": "/m/tok", "hf_token": REDACTED}
    engine = entry.vllm_config()  # what the pool starts: every value as the entry states it
    assert engine.env == {"HF_HOME": "/data/hf", "HF_TOKEN": "hf_s3cret"}
    args = engine.engine_args()
    assert (args["max_num_batched_tokens"], args["tokenizer"], args["hf_token"]) == (8192, "/m/tok", "hf_s3cret2")


# --------------------------------------------------------------------------- the actor


def test_parity_with_vllm_serve_sampling_defaults():
    defaults = {"top_p": 0.9, "top_k": 50, "repetition_penalty": 1.1, "temperature": 0.6, "max_tokens": 512}
    f = sampling_fields(_req("x", temperature=0.0, max_tokens=100), defaults, n_prompt=10, max_model_len=64)
    # the request's temperature wins; the generation config fills what the request leaves open
    assert f["temperature"] == 0.0 and f["top_p"] == 0.9 and f["top_k"] == 50 and f["repetition_penalty"] == 1.1
    assert f["min_p"] == OPENAI_DEFAULTS["min_p"] and f["presence_penalty"] == 0.0
    assert f["max_tokens"] == 54  # capped at what the context window leaves, like the server
    g = sampling_fields({**_req("x"), "max_tokens": None}, defaults, n_prompt=10, max_model_len=4096)
    assert g["max_tokens"] == 512  # the generation config's max_new_tokens
    assert sampling_fields(_req("x"), {}, 1, 64)["top_p"] == 1.0


def test_requests_run_concurrently_one_generate_each():
    engine = FakeEngine()
    actor = local_actor(engine)

    async def go():
        engine.hold = asyncio.Event()
        tasks = [asyncio.ensure_future(actor.generate(_req(f"q {i}", rid=f"s{i}#0:a"))) for i in range(6)]
        while engine.in_flight < 6:
            await asyncio.sleep(0.01)
        assert await actor.load() == 6
        engine.hold.set()
        return await asyncio.gather(*tasks)

    outs = asyncio.run(go())
    assert engine.peak == 6  # all in the engine at once: nothing serialised, nothing merged by us
    assert [o["error"] for o in outs] == [None] * 6 and outs[0]["prompt_tokens"] == 5
    assert len({p["request_id"] for p in engine.params}) == 6


def test_overlong_prompt_and_template_error_fail_alone_with_named_errors():
    engine = FakeEngine(max_model_len=64)
    actor = local_actor(engine)
    reqs = [_req("fine"), _req("word " * 70), _req("TEMPLATE_BAD please"), _req("also fine")]

    async def go():
        return await asyncio.wait_for(asyncio.gather(*(actor.generate(r) for r in reqs)), 5)

    outs = asyncio.run(go())
    assert [o["error"] is None for o in outs] == [True, False, False, True]
    assert outs[1]["error"].startswith("vllm_prompt_too_long: 73 prompt tokens, max_model_len 64")
    assert outs[2]["error"].startswith("vllm_chat_template_error: ValueError")
    assert len(engine.params) == 2  # the two bad ones never reached the engine
    info = asyncio.run(actor.info())
    assert info["served"] == 2 and info["failed"] == {"vllm_prompt_too_long": 1, "vllm_chat_template_error": 1}


def test_dead_engine_is_named_and_the_actor_exits_for_a_restart():
    actor = local_actor()

    async def go():
        out = await actor.generate(_req("x", seed=-1))
        later = await actor.generate(_req("y"))
        await asyncio.sleep(0.6)
        return out, later

    out, later = asyncio.run(go())
    assert out["error"].startswith("vllm_engine_dead") and later["error"].startswith("vllm_engine_dead")
    assert actor.exits == [1]
    with pytest.raises(RuntimeError):
        asyncio.run(actor.info())


def test_shutdown_stops_the_engine():
    engine = FakeEngine()
    actor = local_actor(engine)
    assert asyncio.run(actor.shutdown())["released"] is True and engine.closed
    assert asyncio.run(actor.generate(_req("x")))["error"].startswith("vllm_engine_dead")


# --------------------------------------------------------------------------- routing and retries


def _model(handles, **cfg) -> VLLMActorModel:
    return VLLMActorModel(VLLMModelConfig(model="/m/x", replicas=len(handles), restart_wait_s=5, **cfg), handles)


def _chat(sid: str, turn: int = 0) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": "hi"},), request_id=f"{sid}#{turn}:assistant", seed=1)


def test_cached_prompt_tokens_the_engine_reports_reach_usage():
    from ray_knowsim.backends.vllm.pool import to_response
    from ray_knowsim.schema.chat import Usage

    assert to_response({"text": "x", "prompt_tokens": 50, "completion_tokens": 3, "cached_tokens": 32}).usage == Usage(50, 3, 32)
    assert to_response({"text": "x", "prompt_tokens": 50, "completion_tokens": 3}).usage == Usage(50, 3, 0)
    engine = EchoEngine(max_model_len=4096)
    model = VLLMActorModel(VLLMModelConfig(model="/m/x"), [HandleLike(local_actor(engine))])
    long = ChatRequest(messages=({"role": "user", "content": " ".join(["word"] * 40)},), request_id="s#1:assistant", seed=1)
    first, second = (asyncio.run(model.generate(long)) for _ in range(2))
    assert engine.cached == [0, 32]  # the second prompt (43 tokens) finds two whole blocks cached
    assert (first.usage.prompt_tokens, first.usage.cached_prompt_tokens) == (43, 0)
    assert (second.usage.prompt_tokens, second.usage.cached_prompt_tokens) == (43, 32)


def test_session_affine_routing_and_minimal_moves():
    assert session_key("math/1/novice/a/0#3:extractor") == "math/1/novice/a/0"
    keys = [f"s{i}" for i in range(400)]
    full = {k: pick_replica(k, [0, 1, 2, 3]) for k in keys}
    assert {k: pick_replica(k, [0, 1, 2, 3]) for k in keys} == full
    counts = [list(full.values()).count(i) for i in range(4)]
    assert min(counts) > 60  # spread over the replicas
    without_2 = {k: pick_replica(k, [0, 1, 3]) for k in keys}
    assert all(without_2[k] == full[k] for k in keys if full[k] != 2)  # only replica 2's sessions move

    handles = [HandleLike(local_actor(), tag=str(i)) for i in range(3)]
    model = _model(handles)
    assert isinstance(model, ChatModel)
    reqs = [_chat(f"sess{i}", turn) for turn in range(3) for i in range(12)]
    outs = asyncio.run(generate_all(model, reqs))
    by_session: dict[str, set] = {}
    for r, o in zip(reqs, outs):
        assert o.error is None
        by_session.setdefault(session_key(r.request_id), set()).add(o.text.split(":")[0])
    assert all(len(v) == 1 for v in by_session.values())  # every turn of a session on one replica
    assert len({next(iter(v)) for v in by_session.values()}) > 1


def test_a_restarted_replica_gets_the_request_again():
    h = HandleLike(local_actor(), tag="0")
    h.fail_generate = 1  # the actor died under the request; Ray restarts it
    h.restarting_info = 4  # ...which takes a while: probes meanwhile say "restarting", not "dead"
    model = _model([h])
    out = asyncio.run(model.generate(_chat("a")))
    assert out.error is None and out.text.startswith("0:") and h.calls == 2 and model.retried == 1


def test_a_replica_that_stays_dead_is_dropped_and_its_sessions_move():
    handles = [HandleLike(local_actor(), tag=str(i)) for i in range(2)]
    model = _model(handles)
    sid = next(f"s{i}" for i in range(100) if pick_replica(f"s{i}", [0, 1]) == 0)
    handles[0].fail_generate = 99
    handles[0].fail_info = 99
    out = asyncio.run(model.generate(_chat(sid)))
    assert out.error is None and out.text.startswith("1:")
    assert model.live == [1]
    handles[1].fail_generate, handles[1].fail_info = 99, 99
    out = asyncio.run(model.generate(_chat(sid, 1)))
    assert out.error.startswith("vllm_no_replica") or out.error.startswith("vllm_replica_died")


def test_engine_death_is_retried_after_restart_and_then_reported():
    actor = local_actor()
    h = HandleLike(actor, tag="0")
    model = _model([h], request_retries=1)
    bad = ChatRequest(messages=({"role": "user", "content": "x"},), request_id="k#0:a", seed=-1)

    async def go():
        task = asyncio.ensure_future(model.generate(bad))
        await asyncio.sleep(0.2)
        actor._dead = None  # the "restarted" actor answers its probe again
        return await task

    out = asyncio.run(go())
    assert out.error.startswith("vllm_engine_dead") and model.retried == 1  # retried once, then named


# --------------------------------------------------------------------------- a pool on real Ray


@pytest.mark.slow
def _restarted_pid(actor, timeout_s: float) -> int:
    """The actor's pid once its restart has finished: a call while Ray is still restarting it
    raises ActorUnavailableError ("temporarily unavailable") and is asked again."""
    import ray

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get(actor.pid.remote(), timeout=max(1.0, deadline - time.monotonic()))
        except ray.exceptions.ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_pool_on_ray_routes_restarts_and_shuts_down(ray_local):
    import ray
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(THIS_MODULE)
    cfg = VLLMModelConfig(model="/fake/echo", replicas=2, num_cpus=0, max_restarts=1, restart_wait_s=60)
    pool = VLLMPool(cfg)
    pool.actor_class = FakeEngineActor
    try:
        pool.start()
        assert len(pool.wait_ready(60)) == 2
        model = pool.model()
        reqs = [_chat(f"s{i}") for i in range(8)]
        first = asyncio.run(generate_all(model, reqs))
        assert [o.text for o in first] == [r.request_id for r in reqs]
        victim = pool.actors[0]
        pid = ray.get(victim.pid.remote())
        ray.kill(victim, no_restart=False)  # dies; Ray restarts it (max_restarts=1)
        again = asyncio.run(generate_all(model, reqs))
        assert [o.text for o in again] == [o.text for o in first] and all(o.error is None for o in again)
        assert _restarted_pid(victim, timeout_s=60) != pid
        names = [pool.actor_name(i) for i in range(2)]
    finally:
        reports = pool.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(THIS_MODULE)
    assert [r["released"] for r in reports] == [True, True]
    for n in names:
        with pytest.raises(ValueError):
            ray.get_actor(n, namespace="ray_knowsim")


def test_two_runs_with_the_same_model_own_their_engines(ray_local):
    """Two runs (two drivers' pools) of one model config on one cluster: each gets its own
    replicas, and the first run's shutdown leaves the second's answering."""
    import ray
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(THIS_MODULE)
    cfg = VLLMModelConfig(model="/fake/echo", replicas=1, num_cpus=0)
    first, second = VLLMPool(cfg), VLLMPool(cfg)
    first.actor_class = second.actor_class = FakeEngineActor
    try:
        first.start()
        second.start()
        first.wait_ready(60)
        second.wait_ready(60)
        assert first.actor_name(0) != second.actor_name(0)
        pids = {ray.get(first.actors[0].pid.remote()), ray.get(second.actors[0].pid.remote())}
        assert len(pids) == 2  # two engines, not one found by name
        assert [r["released"] for r in first.shutdown()] == [True]  # the first run ends
        out = asyncio.run(generate_all(second.model(), [_chat("s1")]))
        assert out[0].error is None and out[0].text == "s1#0:assistant"
        with pytest.raises(ValueError):
            ray.get_actor(first.actor_name(0), namespace="ray_knowsim")
        assert ray.get_actor(second.actor_name(0), namespace="ray_knowsim") is not None
    finally:
        first.shutdown()
        second.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(THIS_MODULE)
