"""The vLLM engine actor on the real async engine, on CPU with SmolLM2-135M (marker ``llm_cpu``;
skipped outside .venv-llm): structured outputs, an overlong prompt failing alone, concurrency."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.doubles.llm_cpu import (  # noqa: F401  (pytest finds fixtures by name)
    SERVED_MODEL_NAME, llm_ray, post_json, smollm2_dir, vllm_cpu_config, vllm_cpu_pool, vllm_server,
)

from ray_knowsim.backends.vllm.pool import VLLMActorModel
from ray_knowsim.llm.protocol import generate_all
from ray_knowsim.schema.chat import ChatRequest

# The actor logic with a fake engine, routing, restarts: tests/backends/test_vllm_actor.py.

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
                        json_schema=ANSWER_SCHEMA, schema_name="answer", seed=0, request_id=f"q{i}#0:assistant")
            for i, q in enumerate(QUESTIONS)]
    t = time.perf_counter()
    out = asyncio.run(generate_all(model, reqs))
    wall = time.perf_counter() - t
    assert len(out) == 4
    for r in out:
        assert r.error is None, r.error
        _check_answer(r.text)
        assert r.finish_reason == "stop"
        assert r.usage.prompt_tokens > 10 and 0 < r.usage.completion_tokens <= 64
    assert out[0].text == out[3].text  # greedy decoding is deterministic
    # The default grammar is a plain `vllm serve`'s (free whitespace, VLLM_SERVE_STRUCTURED), so
    # the two paths decode alike; "compact" removes it (the mapping: tests/backends/test_vllm_actor.py).
    compact = "\n" not in out[0].text and ": " not in out[0].text
    assert compact == (vllm_cpu_config.json_whitespace == "compact"), out[0].text
    toks = sum(r.usage.completion_tokens for r in out)
    print(f"\n[llm_cpu] actor batch of 4: {wall:.2f} s, {toks} output tokens, {toks / wall:.0f} tok/s")


@pytest.mark.llm_cpu
@pytest.mark.slow
def test_vllm_actor_rejects_only_the_overlong_request(vllm_cpu_config, vllm_cpu_pool):
    model = VLLMActorModel(vllm_cpu_config, actors=vllm_cpu_pool)
    too_long = "word " * (vllm_cpu_config.max_model_len + 100)
    reqs = [ChatRequest(messages=({"role": "user", "content": too_long},), max_tokens=8),
            ChatRequest(messages=({"role": "user", "content": "Say hi."},), max_tokens=8)]
    bad, good = asyncio.run(generate_all(model, reqs))
    assert bad.error is not None and bad.error.startswith("vllm_prompt_too_long") and bad.text == ""
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


@pytest.mark.llm_cpu
def test_a_vllm_entry_decodes_json_as_a_plain_vllm_server(smollm2_dir):
    """The installed vLLM's own server defaults are what a `vllm` entry uses by default, so an
    `http` entry against a plain `vllm serve` and a `vllm` entry decode the same seeds alike."""
    from vllm.config.structured_outputs import StructuredOutputsConfig

    from ray_knowsim.backends.vllm.config import VLLM_SERVE_STRUCTURED, VLLMModelConfig

    served = StructuredOutputsConfig()
    assert {"backend": served.backend, "disable_any_whitespace": served.disable_any_whitespace} == VLLM_SERVE_STRUCTURED
    assert VLLMModelConfig(model=str(smollm2_dir)).engine_args()["structured_outputs_config"] == VLLM_SERVE_STRUCTURED


@pytest.mark.llm_cpu
@pytest.mark.slow
def test_the_same_seeded_requests_decode_alike_as_a_vllm_entry_and_over_http(vllm_server, vllm_cpu_config, vllm_cpu_pool):
    """Issue 29: the same seeds truncated in turn 1 on the `vllm` entry and passed over HTTP. Both
    paths now get the same grammar and sampling defaults, so a seeded request gives the same
    answer, the same token count and the same finish reason (a cut answer is cut on both)."""
    from ray_knowsim.llm.http.client import OpenAICompatibleModel
    from ray_knowsim.llm.http.config import HTTPModelConfig

    over_http = OpenAICompatibleModel(HTTPModelConfig(base_url=vllm_server, model=SERVED_MODEL_NAME,
                                                      timeout_s=600, max_attempts=1))
    as_entry = VLLMActorModel(vllm_cpu_config, actors=vllm_cpu_pool)
    system = {"role": "system", "content": "Answer in JSON with fields answer and confidence."}
    reqs = [ChatRequest(messages=(system, {"role": "user", "content": q}), max_tokens=cap, json_schema=ANSWER_SCHEMA,
                        schema_name="answer", seed=seed, temperature=temperature, request_id=f"p{i}#0:extractor")
            for i, (q, cap, seed, temperature) in enumerate([
                (QUESTIONS[0], 64, 0, 0.0),  # greedy, room to finish
                (QUESTIONS[1], 64, 7, 0.8),  # sampled: the seed decides, on both paths alike
                (QUESTIONS[2], 6, 3, 0.8),   # cut by max_tokens: truncated on both paths
            ])]
    http_out = asyncio.run(generate_all(over_http, reqs))
    entry_out = asyncio.run(generate_all(as_entry, reqs))
    for req, h, e in zip(reqs, http_out, entry_out):
        assert h.error is None and e.error is None, (h.error, e.error)
        assert (h.text, h.finish_reason, h.usage.completion_tokens) == (e.text, e.finish_reason, e.usage.completion_tokens), req.request_id
        assert h.usage.prompt_tokens == e.usage.prompt_tokens  # the same chat template
    assert http_out[2].finish_reason == "length"
