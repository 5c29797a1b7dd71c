"""An OpenAI-compatible HTTP server in front of any ChatModel.

Uses: ``ray-knowsim serve-offline`` (the deterministic offline model behind a real socket, so the
HTTP backend, retries, limits and the engine's batching are exercised end to end without a
provider), a fixed-latency endpoint for engine benchmarks (``delay_s``), a stand-in of known
generation speed (``delay_per_token_s``: each answer held that long per completion token, as a
slow self-hosted model would), and test fixtures
(``serve_model_in_thread`` picks a free port on 127.0.0.1).

Non-streaming ``/v1/chat/completions`` only. The offline model's facts travel in the
``knowsim_offline_facts`` body extension, which OpenAICompatibleModel adds only for a model entry
with ``offline_server: true``; the optional ``X-KnowSim-*`` headers may name the role, prompt
version, schema name and request id. ``response_format`` of type
``json_schema`` or ``json_object`` with a ``schema`` is passed on as ``ChatRequest.json_schema``.
No authentication: bind to loopback unless the network is trusted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterator

from aiohttp import web

from ray_knowsim.llm.http.wire import (
    OFFLINE_DOUBLE_FIELD, OFFLINE_FACTS_FIELD, PROMPT_VERSION_HEADER, REQUEST_ID_HEADER, ROLE_HEADER, SCHEMA_NAME_HEADER,
)
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.chat import ROLES

log = logging.getLogger(__name__)

MODEL_KEY = web.AppKey("model", object)
CONFIG_KEY = web.AppKey("server_config", object)
_MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant"})
_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class _ServerConfig:
    served_name: str
    delay_s: float
    delay_per_token_s: float = 0.0
    offline_double: bool = False  # the model answers from the offline facts (the models list says so)


class _BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.message, self.param, self.status, self.code = message, param, status, code


def _error(status: int, message: str, *, kind: str, param: str | None = None, code: str | None = None):
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": param, "code": code}}, status=status
    )


def _content_text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: only text is understood
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise _BadRequest("only text content parts are supported", f"messages[{index}].content")
            texts.append(part["text"])
        return "".join(texts)
    raise _BadRequest("content must be a string or a list of text parts", f"messages[{index}].content")


def _schema_from(response_format: Any) -> tuple[dict[str, Any] | None, str | None]:
    if response_format is None:
        return None, None
    if not isinstance(response_format, dict):
        raise _BadRequest("response_format must be an object", "response_format")
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            raise _BadRequest("response_format.json_schema.schema must be an object", "response_format")
        return spec["schema"], spec.get("name")
    if kind == "json_object":
        schema = response_format.get("schema")
        if schema is not None and not isinstance(schema, dict):
            raise _BadRequest("response_format.schema must be an object", "response_format")
        return schema, None
    if kind in (None, "text"):
        return None, None
    raise _BadRequest(f"unsupported response_format type {kind!r}", "response_format")


def parse_chat_request(body: Any, headers: Any, served_name: str) -> ChatRequest:
    """The ChatRequest for an OpenAI chat-completions body; raises _BadRequest on anything odd."""
    if not isinstance(body, dict):
        raise _BadRequest("request body must be a JSON object")
    model = body.get("model")
    if model != served_name:
        raise _BadRequest(
            f"model {model!r} is not served here (this server serves {served_name!r})",
            "model", status=404, code="model_not_found",
        )
    if body.get("stream"):
        raise _BadRequest("streaming is not supported", "stream")
    if body.get("n", 1) != 1:
        raise _BadRequest("only n=1 is supported", "n")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _BadRequest("messages must be a non-empty list", "messages")
    parsed = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in _MESSAGE_ROLES:
            raise _BadRequest(f"messages[{i}] needs a role in {sorted(_MESSAGE_ROLES)}", f"messages[{i}]")
        parsed.append({"role": m["role"], "content": _content_text(m.get("content"), i)})
    try:
        sampling = {"temperature": float(body.get("temperature", 1.0)),  # the OpenAI default when absent
                    "max_tokens": int(body.get("max_completion_tokens") or body.get("max_tokens") or 1024),
                    "seed": None if body.get("seed") is None else int(body["seed"])}
    except (TypeError, ValueError) as exc:
        raise _BadRequest(f"bad sampling parameter: {exc}") from None
    schema, schema_name = _schema_from(body.get("response_format"))
    facts = body.get(OFFLINE_FACTS_FIELD)
    if facts is not None and not isinstance(facts, dict):
        raise _BadRequest(f"{OFFLINE_FACTS_FIELD} must be an object", OFFLINE_FACTS_FIELD)
    role = headers.get(ROLE_HEADER) or (facts or {}).get("role") or "assistant"
    if role not in ROLES:
        raise _BadRequest(f"{ROLE_HEADER} must be one of {list(ROLES)}, got {role!r}")
    return ChatRequest(messages=tuple(parsed), role=role, **sampling, json_schema=schema,
                       schema_name=headers.get(SCHEMA_NAME_HEADER) or schema_name,
                       prompt_version=headers.get(PROMPT_VERSION_HEADER, ""),
                       request_id=headers.get(REQUEST_ID_HEADER) or f"srv-{uuid.uuid4().hex[:12]}", offline_facts=facts)


async def _chat_completions(request: web.Request) -> web.Response:
    model: ChatModel = request.app[MODEL_KEY]  # type: ignore[assignment]
    cfg: _ServerConfig = request.app[CONFIG_KEY]  # type: ignore[assignment]
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "request body is not valid JSON", kind="invalid_request_error")
    try:
        chat = parse_chat_request(body, request.headers, cfg.served_name)
    except _BadRequest as bad:
        return _error(bad.status, bad.message, kind="invalid_request_error", param=bad.param, code=bad.code)
    if cfg.delay_s > 0:
        await asyncio.sleep(cfg.delay_s)
    try:
        answer = await model.generate(chat)
    except Exception:
        log.exception("model %s failed on request %s", cfg.served_name, chat.request_id)
        return _error(500, "the model raised an exception", kind="server_error", code="internal_error")
    if cfg.delay_per_token_s > 0 and answer.error is None:
        await asyncio.sleep(cfg.delay_per_token_s * answer.usage.completion_tokens)
    if answer.error is not None:
        # the model's short reason ("kind: detail") travels as message, its kind as the code
        kind = answer.error.split(":", 1)[0].strip()
        code = kind if _CODE.match(kind) else "model_error"
        return _error(500, f"model error: {answer.error}", kind="server_error", code=code)
    usage = answer.usage
    return web.json_response(
        {
            "id": f"chatcmpl-{chat.request_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": cfg.served_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.text},
                    "finish_reason": answer.finish_reason or "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total,
            },
        }
    )


async def _models(request: web.Request) -> web.Response:
    cfg: _ServerConfig = request.app[CONFIG_KEY]  # type: ignore[assignment]
    entry = {"id": cfg.served_name, "object": "model", "created": 0, "owned_by": "ray_knowsim"}
    if cfg.offline_double:
        entry[OFFLINE_DOUBLE_FIELD] = True
    return web.json_response({"object": "list", "data": [entry]})


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def build_app(model: ChatModel, *, served_name: str | None = None, delay_s: float = 0.0,
              delay_per_token_s: float = 0.0) -> web.Application:
    """The aiohttp application serving ``model`` under ``served_name`` (default: ``model.name``)."""
    if delay_s < 0 or delay_per_token_s < 0:
        raise ValueError(f"delay_s and delay_per_token_s must be >= 0, got {delay_s}, {delay_per_token_s}")
    app = web.Application(client_max_size=64 * 2**20)
    app[MODEL_KEY] = model
    app[CONFIG_KEY] = _ServerConfig(served_name=served_name or model.name, delay_s=delay_s, delay_per_token_s=delay_per_token_s,
                                    offline_double=bool(getattr(model, "reads_offline_facts", False)))
    app.router.add_post("/v1/chat/completions", _chat_completions)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    return app


@dataclass(frozen=True)
class ServerHandle:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to put in HTTPModelConfig.base_url."""
        return f"{self.url}/v1"


@contextlib.asynccontextmanager
async def serve_app(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[ServerHandle]:
    """Serve ``app`` on the running event loop; port 0 picks a free one."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        yield ServerHandle(host=host, port=int(bound[1]))
    finally:
        await runner.cleanup()


@contextlib.contextmanager
def serve_app_in_thread(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> Iterator[ServerHandle]:
    """Serve ``app`` from a background thread with its own event loop (usable from sync code and
    from another event loop alike); stops when the block ends."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop: asyncio.Event | None = None
    result: dict[str, Any] = {}

    async def main() -> None:
        nonlocal stop
        stop = asyncio.Event()
        try:
            async with serve_app(app, host, port) as handle:
                result["handle"] = handle
                ready.set()
                await stop.wait()
        except (Exception, asyncio.CancelledError) as exc:  # startup failure: hand it to the caller
            result["error"] = exc
            ready.set()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), name="knowsim-server", daemon=True)
    thread.start()
    ready.wait()
    try:
        if "error" in result:
            raise RuntimeError(f"server failed to start on {host}:{port}: {result['error']}") from result["error"]
        yield result["handle"]
    finally:
        if stop is not None:
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        loop.close()


def serve_model_in_thread(
    model: ChatModel, *, host: str = "127.0.0.1", port: int = 0, served_name: str | None = None, delay_s: float = 0.0
) -> contextlib.AbstractContextManager[ServerHandle]:
    """``with serve_model_in_thread(model) as server: ... server.base_url ...``"""
    return serve_app_in_thread(build_app(model, served_name=served_name, delay_s=delay_s), host, port)


def run_server(
    model: ChatModel, *, host: str, port: int, served_name: str | None = None, delay_s: float = 0.0,
    delay_per_token_s: float = 0.0,
) -> None:
    """Serve until interrupted (the CLI)."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving on %s without authentication: anyone who can reach it can use it", host)
    app = build_app(model, served_name=served_name, delay_s=delay_s, delay_per_token_s=delay_per_token_s)
    name = app[CONFIG_KEY].served_name  # type: ignore[attr-defined]
    web.run_app(
        app, host=host, port=port, access_log=None,
        print=lambda _msg: print(f"serving model {name!r} at http://{host}:{port}/v1 (Ctrl-C stops)", flush=True),
    )
