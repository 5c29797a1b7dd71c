"""An HTTP error keeps the server's own words (status and message) in ChatResponse.detail, with
every secret masked: the run's key, and anything credential-shaped the server echoes."""

from __future__ import annotations

import asyncio

from aiohttp import web

from ray_knowsim.llm.http.client import OpenAICompatibleModel
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.http.credentials import mask_secrets
from ray_knowsim.llm.retry import BackoffConfig
from ray_knowsim.llm.offline.server import serve_app_in_thread
from ray_knowsim.schema.chat import ChatRequest

ENV = "KNOWSIM_TEST_DETAIL_KEY"
KEY = "plain-looking-key-0042"  # not token-shaped: only the client's own scrub can catch it


def _ask(model: OpenAICompatibleModel, request: ChatRequest):
    async def main():
        try:
            return await model.generate(request)
        finally:
            await model.aclose()

    return asyncio.run(main())


def _server(status: int, body, text: bool = False) -> web.Application:
    async def handle(_request: web.Request) -> web.Response:
        return web.Response(text=body, status=status) if text else web.json_response(body, status=status)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    return app


def _model(base_url: str) -> OpenAICompatibleModel:
    cfg = HTTPModelConfig(base_url=base_url, model="m", api_key_env=ENV, max_attempts=2, timeout_s=5.0,
                          backoff=BackoffConfig(initial_s=0.01, max_s=0.02, jitter=0.0))
    return OpenAICompatibleModel(cfg)


def test_an_http_error_keeps_the_servers_message_with_secrets_masked(monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    message = (f"max_tokens=8192 cannot be greater than max_model_len=4096 (request had Authorization: Bearer {KEY}, "
               "org key sk-proj-abcdefghijklmnopqrstu)")
    body = {"error": {"message": message, "type": "BadRequestError", "code": 400}}
    with serve_app_in_thread(_server(400, body)) as h:
        resp = _ask(_model(h.base_url), ChatRequest(messages=({"role": "user", "content": "hi"},)))
    assert resp.error == "http_400:BadRequestError"  # the error code stays the short name every rule reads
    assert resp.detail == ("HTTP 400: max_tokens=8192 cannot be greater than max_model_len=4096 (request had Authorization: "
                           "Bearer ***, org key ***)")
    assert KEY not in resp.detail and "sk-proj" not in resp.detail


def test_a_plain_text_error_and_a_retried_5xx_say_what_they_saw(monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    with serve_app_in_thread(_server(503, "upstream   overloaded\n try later", text=True)) as h:
        resp = _ask(_model(h.base_url), ChatRequest(messages=({"role": "user", "content": "hi"},)))
    assert resp.error == "http_503" and resp.detail == "HTTP 503: upstream overloaded try later (2 attempts)"


def test_mask_secrets_in_free_text():
    assert mask_secrets("key hf_abcdefghijklmnopqrst and ghp_0123456789abcdefXYZ end") == "key *** and *** end"
    assert mask_secrets("bearer abc.def-ghi_jkl") == "bearer ***"
    assert mask_secrets("max_tokens=8192 is too many") == "max_tokens=8192 is too many"
