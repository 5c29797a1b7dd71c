"""The API key reaches the provider's Authorization header and nowhere else: not logs, exception
texts, cache files, reprs, pickles or error strings, even when a server echoes it back."""

from __future__ import annotations

import asyncio
import logging
import pickle
import secrets
import socket
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import ValidationError

from ray_knowsim.llm.cache import CachedModel, ResponseCache
from ray_knowsim.llm.http.client import OpenAICompatibleModel
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.http.credentials import MissingAPIKeyError
from ray_knowsim.llm.protocol import generate_all
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.llm.retry import BackoffConfig
from ray_knowsim.llm.offline.server import serve_app_in_thread

ENV = "KNOWSIM_TEST_SECRET_KEY"


@pytest.fixture
def key(monkeypatch) -> str:
    value = "sk-knowsim-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, value)
    return value


def leaky_app(received: list[str]) -> web.Application:
    """A provider that behaves badly: it echoes the credential in error bodies and error codes."""

    async def handle(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        received.append(auth)
        body = await request.json()
        what = body["messages"][-1]["content"]
        if what == "ok":
            return web.json_response({
                "choices": [{"message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            })
        if what == "bad-key":
            return web.json_response(
                {"error": {"message": f"Incorrect API key provided: {auth}", "code": auth.split()[-1]}}, status=401
            )
        if what == "boom":
            return web.json_response({"error": {"message": f"upstream saw {auth}"}}, status=500)
        if what == "garbage":
            return web.Response(text=f"<html>{auth}</html>", status=200)
        return web.json_response({"error": {"message": auth}}, status=429, headers={"Retry-After": "0"})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    return app


def req(text: str) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},))


def test_key_never_leaks(key: str, tmp_path: Path, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, aiohttp's included
    received: list[str] = []
    texts: list[str] = []
    with serve_app_in_thread(leaky_app(received)) as server:
        cfg = HTTPModelConfig(
            base_url=server.base_url, model="m", api_key_env=ENV, max_attempts=2,
            backoff=BackoffConfig(initial_s=0.01, max_s=0.02),
        )
        model = OpenAICompatibleModel(cfg)
        cached = CachedModel(model, ResponseCache(tmp_path / "cache"))
        out = asyncio.run(generate_all(cached, [req(t) for t in ("ok", "bad-key", "boom", "garbage", "limited")]))
        for r in out:  # the reader accepts what parsed (see sim.ask): only then is it cached
            if r.commit is not None:
                r.commit()
        out += asyncio.run(generate_all(cached, [req("ok")]))  # a cache hit
        texts += [repr(r) for r in out]

    assert received and all(a == f"Bearer {key}" for a in received)  # the key was really sent
    assert [r.error for r in out] == [None, "http_401", "http_500", "bad_response", "http_429", None]
    assert out[-1].cached

    # a dead endpoint: connection errors
    with socket.socket() as s:  # held bound, never listening: refused, and no one else can take it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        dead = OpenAICompatibleModel(cfg.model_copy(update={"base_url": f"http://127.0.0.1:{port}/v1"}))
        texts += [repr(r) for r in asyncio.run(generate_all(dead, [req("ok")]))]

    # exception texts: the key where a name belongs, the key in a URL, a missing variable
    for bad in (
        {"api_key_env": key},
        {"base_url": f"https://user:{key}@example.com/v1"},
        {"base_url": f"https://example.com/v1?key={key}"},
        {"extra_body": {"api_key": key}},
    ):
        with pytest.raises(ValidationError) as info:
            HTTPModelConfig(**{"base_url": "https://example.com/v1", "model": "m", **bad})
        texts.append(str(info.value))
        texts.append(repr(info.value.errors()))
    with pytest.raises(MissingAPIKeyError) as missing:
        OpenAICompatibleModel(cfg.model_copy(update={"api_key_env": "KNOWSIM_TEST_UNSET_VAR"}))
    texts.append(str(missing.value))

    # reprs, dumps and pickles of everything a run would store or ship
    texts += [repr(cfg), str(cfg), cfg.model_dump_json(), repr(model), str(model), repr(cached), repr(model._secret)]
    blobs = [pickle.dumps(model), pickle.dumps(cfg), pickle.dumps(cached)]
    clone = pickle.loads(blobs[0])  # a worker's copy re-reads the key from its own environment
    assert clone._headers(req("x"))["Authorization"] == f"Bearer {key}"

    texts.append(caplog.text)
    texts += [str(rec.args) for rec in caplog.records]
    texts += [rec.exc_text or "" for rec in caplog.records]
    blobs += [p.read_bytes() for p in (tmp_path / "cache").iterdir()]

    assert any("HTTP 401" in t for t in texts)  # the failures were logged (redacted), not silent
    assert "***" in caplog.text
    for t in texts:
        assert key not in t
    for b in blobs:
        assert key.encode() not in b


def test_credentials_nested_in_extra_body_are_refused_and_never_echoed(key: str):
    for extra in (
        {"chat_template_kwargs": {"hf_token": key}},
        {"metadata": [{"X-Api-Key": key}]},
        {"provider": {"auth": {"client_secret": key}}},
        {"user": key},  # a value shaped like an API key, whatever the field
    ):
        with pytest.raises(ValidationError) as info:
            HTTPModelConfig(base_url="https://example.com/v1", model="m", extra_body=extra)
        text = str(info.value) + repr(info.value.errors())
        assert key not in text and "credentials" in text
    ok = HTTPModelConfig(base_url="https://example.com/v1", model="m",
                         extra_body={"chat_template_kwargs": {"enable_thinking": False}, "prompt_cache_key": "run-1"})
    assert ok.extra_body["prompt_cache_key"] == "run-1"  # ordinary fields are not mistaken for secrets
