"""ChatModel over any OpenAI-compatible ``/v1/chat/completions`` endpoint (OpenAI, vLLM, OpenRouter,
our own offline server, ...): builds each request (structured output, thinking switch, X-KnowSim-*
headers) and sends it with transport retries under the rate limits; :mod:`.response` reads what
comes back.

Transport retries live here and only here (429/408/409/5xx honouring Retry-After, connection
errors, timeouts, unreadable 200s); the simulation above never resends a transport failure. A
seeded request keeps its seed on every transport retry (it is the same request). A read timeout
means the server may still be computing (and billing) the request: the retry backs off for at
least half the timeout while keeping the in-flight slot, so timeouts never turn into a storm of
resends. One connection pool per event loop lives as long as the model (``aclose``): for plain
``http://`` endpoints the lean keep-alive client of :mod:`.plain` (aiohttp's own request and
response machinery was a quarter of the client's CPU per request), for ``https://`` an
``aiohttp.ClientSession``; both fail in the same named ways.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
import weakref
from typing import Any

import aiohttp
import orjson

from ray_knowsim.schema.outputs import portable_schema, shared_json_fragment
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.http.credentials import Secret, auth_header
from ray_knowsim.llm.http.plain import ConnectFailed, ConnectionBroken, ConnectTimedOut, PlainHTTPPool, use_plain
from ray_knowsim.llm.http.response import ResponseReader, TransportFailure
from ray_knowsim.llm.http.wire import (
    OFFLINE_FACTS_FIELD, PROMPT_VERSION_HEADER, REQUEST_ID_HEADER, ROLE_HEADER, SCHEMA_NAME_HEADER,
)
from ray_knowsim.llm.limiter import Grant, RateLimiter
from ray_knowsim.llm.protocol import request_leaves
from ray_knowsim.llm.retry import backoff_delay, parse_retry_after

log = logging.getLogger(__name__)

_SCHEMA_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")


def estimate_tokens(request: ChatRequest) -> int:
    """Upper-ish estimate for the token bucket before the call (~4 characters per token plus the
    full completion budget); settled against the real usage afterwards."""
    chars = sum(len(str(m.get("content", ""))) for m in request.messages)
    return chars // 4 + 4 * len(request.messages) + request.max_tokens


def encode_body(body: dict[str, Any]) -> bytes:
    """The JSON bytes of a request body. orjson, not json: an extractor's body (its prompt, the
    per-graph decoding schema) is tens of KB of nested objects, and json spent about as much CPU
    encoding it as the rest of the client's work on the request (docs/performance.md). Non-str
    keys become strings, as with json; anything JSON cannot hold raises TypeError. The read-only
    objects the request path shares (a graph's decoding schema, the offline facts' graph:
    :func:`~ray_knowsim.schema.outputs.share_json`) are written from their bytes made once, the
    same bytes orjson writes for them in place."""
    return orjson.dumps(_shared_as_fragments(body), option=orjson.OPT_NON_STR_KEYS)


def _shared_as_fragments(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (unchanged) or a copy of the dicts on the way to its shared objects, with those
    objects replaced by their JSON fragments, every key where it was."""
    out = None
    rf = body.get("response_format")
    if type(rf) is dict:
        inner = rf.get("json_schema")
        if type(inner) is dict:  # json_schema: {"name", "schema", "strict"}
            frag = shared_json_fragment(inner.get("schema"))
            if frag is not None:
                out = dict(body)
                out["response_format"] = {**rf, "json_schema": {**inner, "schema": frag}}
        else:  # json_object: {"type", "schema"}
            frag = shared_json_fragment(rf.get("schema"))
            if frag is not None:
                out = dict(body)
                out["response_format"] = {**rf, "schema": frag}
    facts = body.get(OFFLINE_FACTS_FIELD)
    if type(facts) is dict:
        frag = shared_json_fragment(facts.get("graph"))
        if frag is not None:
            out = dict(body) if out is None else out
            out[OFFLINE_FACTS_FIELD] = {**facts, "graph": frag}
    return body if out is None else out


def _schema_name(request: ChatRequest) -> str:
    name = _SCHEMA_NAME_BAD.sub("_", request.schema_name or "output")[:64]
    return name or "output"


#: a connection pool of one event loop
Session = aiohttp.ClientSession | PlainHTTPPool


class LimiterRequiredError(ValueError):
    """The config sets run-wide limits but no limiter was given to enforce them."""


class OpenAICompatibleModel:
    """ChatModel over HTTP. Errors come back per request in ``ChatResponse.error`` as
    ``<kind>[:<detail>]``: ``http_<status>[:<provider error code>]``
    (``http_400:context_length_exceeded``, ``http_503``), ``timeout`` (no answer within
    ``timeout_s``), ``connection`` (could not connect, or the connection broke), ``bad_response``
    (a 2xx without a readable answer, e.g. no ``choices``), ``bad_request`` (not serialisable),
    ``refusal``, ``rate_limited_long`` (Retry-After beyond ``backoff.max_retry_after_s``),
    ``limiter_error``. ``latency_s`` is the duration of the last HTTP attempt; ``attempts`` how many
    were sent; ``reached_model`` whether any attempt got an answer from the model (2xx), i.e.
    whether the call is a model call to count.

    Rate limits: pass the run's limiter (``ray_knowsim.backends.limiter``); without one, a config
    that sets limits is refused, so that no limit is silently ignored.

    It says when a request goes out (:func:`ray_knowsim.llm.protocol.request_leaves`, once it holds
    its in-flight slot and rate grant), so a process killed while requests wait for a slot leaves
    them out of the spend journal's requests in flight: only what left may have been billed."""

    reports_leaving = True

    def __init__(
        self,
        config: HTTPModelConfig,
        *,
        limiter: RateLimiter | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if limiter is None and config.rate_limits().enabled:
            raise LimiterRequiredError(
                f"{config.model_name}: the config sets rate limits (requests/tokens per minute or "
                "max_in_flight_global); pass limiter=ray_knowsim.backends.limiter.make_limiter("
                "config.limiter_name, config.rate_limits()) (the engine does this for every run)"
            )
        self.config = config
        self.name = config.model_name
        self._secret = Secret.from_env(config.api_key_env) if config.api_key_env else None
        self._limiter = limiter
        self._rng = rng or random.Random()
        self._url = config.base_url + "/chat/completions"
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Session] = weakref.WeakKeyDictionary()
        self._reader = ResponseReader(self.name, self._secret)

    # --- identity and pickling -------------------------------------------------------------

    @property
    def cache_identity(self) -> dict[str, Any]:
        """What besides the request decides the answer (for CachedModel keys): the config's
        answer fields (:data:`ray_knowsim.llm.http.config.ANSWER_FIELDS`), never its timeouts,
        limits or key."""
        return self.config.answer_identity()

    def __repr__(self) -> str:
        c = self.config
        return (
            f"OpenAICompatibleModel(name={self.name!r}, base_url={c.base_url!r}, model={c.model!r}, "
            f"api_key_env={c.api_key_env!r})"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_semaphores"] = None
        state["_sessions"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._semaphores = weakref.WeakKeyDictionary()
        self._sessions = weakref.WeakKeyDictionary()

    # --- the ChatModel API ---------------------------------------------------------------

    async def generate(self, request: ChatRequest) -> ChatResponse:
        return await self._one(self._session(), request)

    async def aclose(self) -> None:
        """Close this event loop's HTTP session and return its share of the limiter. The model stays
        usable (a later call opens a new session)."""
        loop = asyncio.get_running_loop()
        session = self._sessions.pop(loop, None)
        if session is not None and not session.closed:
            await session.close()
        if self._limiter is not None:
            await self._limiter.aclose()

    # --- internals ---------------------------------------------------------------------------

    def _session(self) -> Session:
        """One session (connection pool) per event loop, kept until ``aclose``: the plain-http
        client for ``http://`` (:func:`~.plain.use_plain`), aiohttp for ``https://``."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            if use_plain(self._url):
                session = self._sessions[loop] = PlainHTTPPool(
                    self._url, timeout_s=self.config.timeout_s, connect_timeout_s=self.config.connect_timeout_s)
                return session
            limit = self.config.max_in_flight
            timeout = aiohttp.ClientTimeout(
                total=self.config.timeout_s, sock_connect=self.config.connect_timeout_s
            )
            connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit)
            session = self._sessions[loop] = aiohttp.ClientSession(timeout=timeout, connector=connector)
        return session

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            sem = self._semaphores[loop] = asyncio.Semaphore(self.config.max_in_flight)
        return sem

    def _thinking_fields(self) -> dict[str, Any]:
        c = self.config
        if c.thinking != "off":
            return {}
        if c.thinking_off_via == "reasoning_effort":
            return {"reasoning_effort": c.reasoning_effort_off}
        kwargs = dict(c.extra_body.get("chat_template_kwargs") or {})
        kwargs["enable_thinking"] = False
        return {"chat_template_kwargs": kwargs}

    def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body for one request (public so tests and tools can inspect it)."""
        c = self.config
        body: dict[str, Any] = {
            "model": c.model,
            "messages": [dict(m) for m in request.messages],
            "temperature": request.temperature,
            c.max_tokens_field: request.max_tokens,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.json_schema is not None and c.structured_output != "none":
            schema = portable_schema(request.json_schema) if c.schema_subset == "portable" else request.json_schema
            if c.structured_output == "json_schema":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": _schema_name(request),
                        "schema": schema,
                        "strict": c.json_schema_strict,
                    },
                }
            else:
                body["response_format"] = {"type": "json_object", "schema": schema}
        body.update(c.extra_body)
        body.update(self._thinking_fields())
        if c.offline_server and request.offline_facts is not None:
            body[OFFLINE_FACTS_FIELD] = dict(request.offline_facts)
        return body

    def _headers(self, request: ChatRequest) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **auth_header(self.config.api_key_header, self._secret)}
        if self.config.send_knowsim_headers:
            headers[ROLE_HEADER] = request.role
            if request.prompt_version:
                headers[PROMPT_VERSION_HEADER] = request.prompt_version
            if request.schema_name:
                headers[SCHEMA_NAME_HEADER] = request.schema_name
            if request.request_id:
                headers[REQUEST_ID_HEADER] = request.request_id
        return headers

    def _scrub(self, text: str) -> str:
        return self._secret.scrub(text) if self._secret is not None else text

    def _failure_detail(self, last: TransportFailure, attempts: int) -> str:
        """What a failed request's row says about it: the server's words, or what we saw."""
        if last.detail:
            said = last.detail
        elif last.reason == "timeout":
            said = f"no answer within timeout_s={self.config.timeout_s:g}"
        elif last.reason == "connection":
            said = f"cannot connect to the endpoint of {self.name}"
        else:
            said = last.reason
        return self._scrub(f"{said} ({attempts} attempt{'s' if attempts != 1 else ''})" if attempts > 1 else said)

    async def _one(self, session: Session, request: ChatRequest) -> ChatResponse:
        # One body for every attempt: a transport retry is the same request (same seed).
        body = self.build_payload(request)
        try:
            data: bytes | Exception = encode_body(body)
        except (TypeError, ValueError) as exc:  # e.g. a message that cannot be sent as JSON: each attempt says so
            data = exc
        estimate = estimate_tokens(request)
        cfg = self.config
        last: TransportFailure | None = None
        latency = 0.0
        reached = False
        spent = Usage()  # what failed attempts that reached the model reported
        attempt = 0
        # Local slot first, then the run-wide grant (waiting for the rate while holding the slot):
        # the request leaves when its grant says, not in a bunch when slots free up later.
        async with self._semaphore():
            grant: Grant | None = None
            try:
                for attempt in range(1, cfg.max_attempts + 1):
                    if grant is None and self._limiter is not None:
                        try:
                            grant = await self._limiter.acquire(estimate)
                        except Exception as exc:  # a broken limiter fails requests, not the batch
                            log.warning("%s: rate limiter failed: %s", self.name, self._scrub(repr(exc)))
                            last = TransportFailure("limiter_error", retryable=False, sent=False)
                            break
                    t0 = time.perf_counter()
                    request_leaves()  # slot and grant held: it goes out now (the spend journal's "sent")
                    try:
                        response = await self._attempt(session, request, data)
                    except TransportFailure as failure:
                        last = failure
                        reached = reached or failure.reached
                        if failure.usage is not None:
                            spent.add(failure.usage)
                    else:
                        latency = time.perf_counter() - t0
                        response.latency_s = latency
                        response.attempts = attempt
                        response.reached_model = True
                        response.usage.add(spent)
                        log.debug(
                            "%s %s attempt %d ok in %.3fs (role=%s, id=%s)",
                            self.name, self._url, attempt, latency, request.role, request.request_id,
                        )
                        self._release(grant, response.usage.total or None)
                        grant = None
                        return response
                    latency = time.perf_counter() - t0
                    log.debug(
                        "%s attempt %d/%d failed: %s (role=%s, id=%s)",
                        self.name, attempt, cfg.max_attempts, last.reason, request.role, request.request_id,
                    )
                    if not last.retryable or attempt == cfg.max_attempts:
                        break
                    if last.retry_after_s is not None and last.retry_after_s > cfg.backoff.max_retry_after_s:
                        last = TransportFailure("rate_limited_long", retryable=False, reached=reached)
                        break
                    delay = backoff_delay(attempt, cfg.backoff, self._rng, last.retry_after_s)
                    timed_out = last.reason == "timeout"
                    if timed_out:
                        # the server may still be computing (and billing) it: no quick resend, and
                        # its in-flight slot stays taken while we back off
                        delay = max(delay, cfg.timeout_s / 2)
                    else:
                        # nothing of ours runs on the server: free the slot while we wait
                        self._release(grant, None)
                        grant = None
                    if last.reason.startswith("http_429") and self._limiter is not None:
                        self._limiter.pause(delay)  # every worker backs off, not just this one
                    await asyncio.sleep(delay)
                    # the next attempt is a new request for the rate limits: a fresh grant (a failed
                    # attempt's token reservation is not refunded: it may have been billed)
                    self._release(grant, None)
                    grant = None
            finally:
                if grant is not None:
                    self._release(grant, None)

        if last is None:  # the loop always runs at least once; a failure here is a bug of ours
            raise RuntimeError(f"{self.name}: no attempt was made for request {request.request_id!r}")
        log.warning(
            "%s request failed after %d attempt(s): %s (role=%s, id=%s)",
            self.name, attempt, last.reason, request.role, request.request_id,
        )
        return ChatResponse(text="", usage=spent, latency_s=latency, error=last.reason, detail=self._failure_detail(last, attempt),
                            attempts=attempt if last.reason != "limiter_error" else attempt - 1,
                            reached_model=reached)

    def _release(self, grant: Grant | None, used: int | None) -> None:
        if grant is None or self._limiter is None:
            return
        try:
            self._limiter.release(grant, used)
        except Exception as exc:  # the share is reclaimed on its own; the answer is still good
            log.warning("%s: rate limiter release failed: %s", self.name, self._scrub(repr(exc)))

    async def _attempt(self, session: Session, request: ChatRequest, data: bytes | Exception) -> ChatResponse:
        if isinstance(session, PlainHTTPPool):
            return await self._attempt_plain(session, request, data)
        try:
            if isinstance(data, Exception):
                raise data
            async with session.post(self._url, data=data, headers=self._headers(request)) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after = parse_retry_after(resp.headers)
        except aiohttp.ConnectionTimeoutError:
            raise TransportFailure("connection", retryable=True, sent=False) from None
        except asyncio.TimeoutError:
            raise TransportFailure("timeout", retryable=True) from None
        except aiohttp.ClientConnectorError as exc:  # refused, DNS, ...: never sent
            log.debug("%s: %s", self.name, self._scrub(f"{type(exc).__name__}: {exc}"))
            raise TransportFailure("connection", retryable=True, sent=False) from None
        except aiohttp.ClientError as exc:
            # reset, payload cut short, ...: transient from our side
            log.debug("%s: %s", self.name, self._scrub(f"{type(exc).__name__}: {exc}"))
            raise TransportFailure("connection", retryable=True) from None
        except (TypeError, ValueError) as exc:  # e.g. a message that cannot be sent as JSON
            log.warning("%s: cannot send request: %s", self.name, self._scrub(f"{type(exc).__name__}: {exc}"))
            raise TransportFailure("bad_request", retryable=False, sent=False) from None

        if not 200 <= status < 300:
            raise self._reader.error(status, raw, retry_after)
        return self._reader.read(raw)

    async def _attempt_plain(self, pool: PlainHTTPPool, request: ChatRequest, data: bytes | Exception) -> ChatResponse:
        """:meth:`_attempt` over the plain-http client: the same failures under the same names."""
        try:
            if isinstance(data, Exception):
                raise data
            answer = await pool.post(data, self._headers(request))
        except ConnectTimedOut:
            raise TransportFailure("connection", retryable=True, sent=False) from None
        except asyncio.TimeoutError:
            raise TransportFailure("timeout", retryable=True) from None
        except ConnectFailed as exc:  # refused, DNS, ...: never sent
            log.debug("%s: %s", self.name, self._scrub(f"{type(exc).__name__}: {exc}"))
            raise TransportFailure("connection", retryable=True, sent=False) from None
        except (ConnectionBroken, OSError) as exc:
            # reset, payload cut short, ...: transient from our side
            log.debug("%s: %s", self.name, self._scrub(f"{type(exc).__name__}: {exc}"))
            raise TransportFailure("connection", retryable=True) from None
        except (TypeError, ValueError) as exc:  # e.g. a message that cannot be sent as JSON
            log.warning("%s: cannot send request: %s", self.name, self._scrub(f"{type(exc).__name__}: {exc}"))
            raise TransportFailure("bad_request", retryable=False, sent=False) from None
        if not 200 <= answer.status < 300:
            raise self._reader.error(answer.status, answer.body, parse_retry_after(answer.headers))
        return self._reader.read(answer.body)


__all__ = ["LimiterRequiredError", "OpenAICompatibleModel", "encode_body", "estimate_tokens"]
