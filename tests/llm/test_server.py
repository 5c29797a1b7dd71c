"""The OpenAI-compatible server: any ChatModel behind HTTP, called back through the HTTP backend."""

from __future__ import annotations

import asyncio
import sys

import aiohttp
import pytest

from ray_knowsim.cli.main import build_parser
from ray_knowsim.llm.http.client import OpenAICompatibleModel
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.protocol import generate_all
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.llm.retry import BackoffConfig
from ray_knowsim.llm.offline.server import serve_model_in_thread


class StubModel:
    name = "stub-1"

    def __init__(self) -> None:
        self.seen: list[ChatRequest] = []

    async def generate(self, r: ChatRequest) -> ChatResponse:
        self.seen.append(r)
        content = r.messages[-1]["content"]
        if content == "please fail":
            return ChatResponse(text="", error="stub_failure")
        return ChatResponse(text=f"{r.role} says: {content}", usage=Usage(len(content), 7), finish_reason="length")


def client(base_url: str, **kw) -> OpenAICompatibleModel:
    kw.setdefault("model", "stub-1")
    kw.setdefault("max_attempts", 1)
    kw.setdefault("backoff", BackoffConfig(initial_s=0.01, max_s=0.02))
    return OpenAICompatibleModel(HTTPModelConfig(base_url=base_url, **kw))


def test_round_trip_text_usage_and_request_fields():
    stub = StubModel()
    schema = {"type": "object", "properties": {"message": {"type": "string"}}}
    requests = [
        ChatRequest(
            messages=({"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}),
            role="user_sim", temperature=0.7, max_tokens=321, seed=5, json_schema=schema,
            schema_name="UserTurn", prompt_version="user_sim@3",
        ),
        ChatRequest(messages=({"role": "user", "content": "plain"},)),
    ]
    with serve_model_in_thread(stub) as server:
        responses = asyncio.run(generate_all(client(server.base_url, send_knowsim_headers=True), requests))
    a, b = responses
    assert a.text == "user_sim says: hello" and a.usage == Usage(5, 7) and a.finish_reason == "length"
    assert b.text == "assistant says: plain" and b.usage == Usage(5, 7)
    assert a.error is None and a.latency_s > 0
    seen = {r.messages[-1]["content"]: r for r in stub.seen}
    s = seen["hello"]
    assert s.messages == requests[0].messages
    assert (s.role, s.temperature, s.max_tokens, s.seed) == ("user_sim", 0.7, 321, 5)
    assert s.json_schema == schema and s.schema_name == "UserTurn" and s.prompt_version == "user_sim@3"
    assert seen["plain"].json_schema is None and seen["plain"].seed is None


def test_json_object_form_passes_the_schema_on():
    stub = StubModel()
    schema = {"type": "object", "required": ["x"]}
    with serve_model_in_thread(stub) as server:
        asyncio.run(generate_all(client(server.base_url, structured_output="json_object"),
            [ChatRequest(messages=({"role": "user", "content": "q"},), json_schema=schema)]
        ))
    assert stub.seen[0].json_schema == schema


def test_errors_are_openai_shaped():
    stub = StubModel()

    async def probe(base: str):
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{base}/health") as r:
                health = (r.status, await r.json())
            async with s.get(f"{base}/v1/models") as r:
                models = await r.json()
            async with s.post(f"{base}/v1/chat/completions", data=b"{not json") as r:
                bad_json = r.status
            body = {"model": "stub-1", "messages": [{"role": "user", "content": "x"}], "stream": True}
            async with s.post(f"{base}/v1/chat/completions", json=body) as r:
                stream = (r.status, await r.json())
            body = {"model": "stub-1", "messages": [{"role": "robot", "content": "x"}]}
            async with s.post(f"{base}/v1/chat/completions", json=body) as r:
                bad_role = r.status
            body = {"model": "stub-1", "messages": [{"role": "user", "content": "x"}]}
            async with s.post(f"{base}/v1/chat/completions", json=body, headers={"X-KnowSim-Role": "pirate"}) as r:
                bad_header = r.status
        return health, models, bad_json, stream, bad_role, bad_header

    with serve_model_in_thread(stub) as server:
        health, models, bad_json, stream, bad_role, bad_header = asyncio.run(probe(server.url))
        wrong_model = asyncio.run(generate_all(client(server.base_url, model="gpt-x"),
            [ChatRequest(messages=({"role": "user", "content": "x"},))]))[0]
        failing = asyncio.run(generate_all(client(server.base_url, max_attempts=2),
            [ChatRequest(messages=({"role": "user", "content": "please fail"},))]))[0]
    assert health == (200, {"status": "ok"})
    assert [m["id"] for m in models["data"]] == ["stub-1"]
    assert bad_json == 400 and bad_role == 400 and bad_header == 400
    assert stream[0] == 400 and stream[1]["error"]["param"] == "stream"
    assert wrong_model.error == "http_404:model_not_found"
    assert failing.error == "http_500:stub_failure"  # a model-side error: retried, then reported
    assert sum(1 for r in stub.seen if r.messages[-1]["content"] == "please fail") == 2


class RendezvousModel(StubModel):
    """Answers only once ``n`` requests are inside the model at the same time: a server that
    handled requests one after the other (delay included) would never get there."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.inside, self.peak = n, 0, 0
        self.all_in: asyncio.Event | None = None

    async def generate(self, request: ChatRequest) -> ChatResponse:
        if self.all_in is None:
            self.all_in = asyncio.Event()
        self.inside += 1
        self.peak = max(self.peak, self.inside)
        if self.inside >= self.n:
            self.all_in.set()
        try:
            await asyncio.wait_for(self.all_in.wait(), timeout=60)
        except asyncio.TimeoutError:
            return ChatResponse(text="", error="not_concurrent")
        return await super().generate(request)


def test_fixed_delay_applies_per_request_concurrently():
    stub = RendezvousModel(6)
    with serve_model_in_thread(stub, delay_s=0.3) as server:
        model = client(server.base_url)
        out = asyncio.run(generate_all(model, [ChatRequest(messages=({"role": "user", "content": str(i)},)) for i in range(6)]))
    assert [r.error for r in out] == [None] * 6  # all six were in flight at once: side by side, not queued
    assert stub.peak == 6
    assert all(r.latency_s >= 0.3 for r in out)  # and each waited the delay


def test_serve_offline_cli_is_registered_and_a_broken_install_is_not_hidden(monkeypatch, capsys):
    parser = build_parser()
    args = parser.parse_args(["serve-offline", "--port", "9", "--delay-s", "0.5"])
    assert (args.host, args.port, args.delay_s) == ("127.0.0.1", 9, 0.5)
    monkeypatch.setitem(sys.modules, "ray_knowsim.llm.offline", None)  # a broken install
    with pytest.raises(ImportError):  # propagates as what it is, no fallback
        args.func(args)
    bad = parser.parse_args(["serve-offline", "--delay-s", "-1"])
    assert bad.func(bad) == 2


def test_server_rejects_negative_delay():
    from ray_knowsim.llm.offline.server import build_app

    with pytest.raises(ValueError, match="delay_s"):
        build_app(StubModel(), delay_s=-1)


def test_serves_the_offline_model():
    from ray_knowsim.cli.serve_offline import load_offline_model

    model = load_offline_model(seed=3)
    with serve_model_in_thread(model, delay_s=0.05) as server:
        [answer] = asyncio.run(generate_all(client(server.base_url, model=model.name),
            [ChatRequest(messages=({"role": "user", "content": "What is a derivative?"},))]))
    assert answer.error is None and answer.text and answer.usage.completion_tokens > 0
