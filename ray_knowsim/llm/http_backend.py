"""ChatModel over any OpenAI-compatible ``/v1/chat/completions`` endpoint (OpenAI, vLLM, OpenRouter,
our own offline server, ...), with transport retries, rate limits and structured output.

Transport retries live here and only here (429/408/409/5xx honouring Retry-After, connection
errors, timeouts, unreadable 200s); the simulation above never resends a transport failure. A
seeded request keeps its seed on every transport retry (it is the same request). A read timeout
means the server may still be computing (and billing) the request: the retry backs off for at
least half the timeout while keeping the in-flight slot, so timeouts never turn into a storm of
resends. One ``aiohttp.ClientSession`` per event loop lives as long as the model (``aclose``).

Reasoning models: ``thinking="off"`` switches thinking off (``chat_template_kwargs:
{enable_thinking: false}`` for vLLM/SGLang-served open models, or ``reasoning_effort`` for OpenAI-style
APIs, which cannot switch it off entirely: ``reasoning_effort_off`` says how little). Whatever the
setting, ``<think>`` blocks never reach ``ChatResponse.text``, and reasoning tokens are counted in
``Usage.reasoning_tokens`` (a part of ``completion_tokens``).

Secrets: the config holds only the NAME of the environment variable with the API key. The value
lives in a ``_Secret`` that prints as ``***``, pickles as the variable name (a copy sent to a Ray
worker re-reads the worker's environment) and is scrubbed from every text we log.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import random
import re
import time
import weakref
from typing import Any, Literal, Sequence
from urllib.parse import urlsplit

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ray_knowsim.model.outputs import portable_schema
from ray_knowsim.model.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.llm.limiter import Grant, RateLimiter, RateLimits
from ray_knowsim.llm.retry import BackoffConfig, backoff_delay, is_retryable_status, parse_retry_after
from ray_knowsim.llm.thinking import strip_thinking

log = logging.getLogger(__name__)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SCHEMA_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")
_ERROR_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# Request fields this backend sets itself; extra_body may not override them silently.
_OWN_FIELDS = frozenset(
    {"model", "messages", "stream", "n", "temperature", "max_tokens", "max_completion_tokens", "seed",
     "response_format"}
)
_CREDENTIAL_NAMES = frozenset(
    {"api_key", "apikey", "key", "authorization", "token", "access_token", "secret", "password",
     "x_api_key", "auth_token", "bearer", "bearer_token", "client_secret", "refresh_token", "private_key",
     "credentials", "hf_token", "session_token", "passwd"}
)


def _credential_like(name: Any) -> bool:
    """A field name that usually carries a secret (``api-key``, ``Authorization``, ``hf_token``, ...)."""
    norm = str(name).lower().replace("-", "_")
    return norm in _CREDENTIAL_NAMES or norm.endswith(("_api_key", "_secret", "_password"))


# values shaped like well-known API tokens (OpenAI, Hugging Face, GitHub, Slack, AWS access keys)
_TOKEN_VALUE = re.compile(r"^(sk-|sk_|hf_|ghp_|gho_|github_pat_|xox[abp]-|AKIA)[A-Za-z0-9_\-]{12,}$")


def _secret_like(key: Any, value: Any) -> bool:
    if not isinstance(value, str):
        return _credential_like(key)
    # "<hidden>": a secret-shaped value that validation replaced before checking (still refused)
    return _credential_like(key) or value == "<hidden>" or bool(_TOKEN_VALUE.match(value.strip()))


def _credential_paths(value: Any, path: str = "") -> list[str]:
    """Dotted paths of credential-like keys (or token-shaped values) anywhere in a nested mapping/list."""
    found: list[str] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = [(f"[{i}]", v) for i, v in enumerate(value)]
    else:
        return found
    for k, v in items:
        here = (f"{path}{k}" if str(k).startswith("[") else f"{path}.{k}") if path else str(k)
        if _secret_like(k, v):
            found.append(here)
        else:
            found += _credential_paths(v, here)
    return found


def _hide_credentials(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("<hidden>" if _secret_like(k, v) else _hide_credentials(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [("<hidden>" if _secret_like("", v) else _hide_credentials(v)) for v in value]
    return value
# Headers that tell our own server (serve-offline) which KnowSim role asks; harmless elsewhere.
ROLE_HEADER = "X-KnowSim-Role"
PROMPT_VERSION_HEADER = "X-KnowSim-Prompt-Version"
SCHEMA_NAME_HEADER = "X-KnowSim-Schema-Name"
#: the request-body extension that carries the offline facts to our own offline server only
OFFLINE_FACTS_FIELD = "knowsim_offline_facts"


class HTTPModelConfig(BaseModel):
    """One OpenAI-compatible endpoint and model. Contains no secret, so it can be logged and stored."""

    # A secret pasted into the wrong field must not be echoed back by a validation error.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    base_url: str  # ".../v1"; requests go to base_url + "/chat/completions"
    model: str
    name: str | None = None  # identity in caches/results; defaults to ``model``
    api_key_env: str | None = None  # NAME of the env var holding the key; None: send no key
    api_key_header: str = "Authorization"  # "Authorization" sends "Bearer <key>"; others the raw key
    timeout_s: float = Field(120.0, gt=0)  # per attempt
    max_attempts: int = Field(3, ge=1)
    backoff: BackoffConfig = Field(default_factory=BackoffConfig)
    max_in_flight: int = Field(16, ge=1)  # per process
    requests_per_minute: float | None = Field(None, gt=0)  # shared by all workers of a run
    tokens_per_minute: float | None = Field(None, gt=0)
    max_in_flight_global: int | None = Field(None, ge=1)  # across all workers (self-hosted servers)
    structured_output: Literal["json_schema", "json_object", "none"] = "json_schema"
    json_schema_strict: bool = True
    # "portable": send each schema within the subset hosted strict modes accept (no length bounds,
    # no prefixItems; model/outputs.portable_schema). Looser, never different: the parser still
    # checks every fact the full schema states. "full" for vLLM/SGLang-style servers.
    schema_subset: Literal["full", "portable"] = "full"
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    send_knowsim_headers: bool = False  # role / prompt version / schema name as X-KnowSim-* headers
    # True only for our own ``serve-offline`` endpoint: each request then carries the offline test
    # double's facts as the ``knowsim_offline_facts`` body extension. Never sent to anything else.
    offline_server: bool = False
    # Reasoning models: "off" asks the server not to think, through ``thinking_off_via``:
    # "chat_template_kwargs" sends ``chat_template_kwargs: {enable_thinking: false}`` (vLLM, SGLang
    # and other servers rendering an open model's chat template: Qwen3, DeepSeek-R1 distills, ...);
    # "reasoning_effort" sends ``reasoning_effort: <reasoning_effort_off>`` (OpenAI-style APIs; o-series
    # accept "low", GPT-5 "minimal", some newer models "none").
    thinking: Literal["default", "off"] = "default"
    thinking_off_via: Literal["chat_template_kwargs", "reasoning_effort"] = "chat_template_kwargs"
    reasoning_effort_off: Literal["none", "minimal", "low"] = "minimal"
    # Connecting must succeed within this (a request not yet sent is safe to resend at once).
    connect_timeout_s: float = Field(10.0, gt=0)
    extra_body: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _hide_secret_looking_input(cls, data: Any) -> Any:
        """Replace values that may BE secrets before validation, so that no error (not even
        ``ValidationError.errors()``, which keeps inputs) can carry them."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        env = data.get("api_key_env")
        if isinstance(env, str) and not _ENV_NAME.match(env):
            data["api_key_env"] = "<hidden: not an environment variable name>"
        url = data.get("base_url")
        if isinstance(url, str):
            parts = urlsplit(url)
            if parts.username or parts.password or parts.query or parts.fragment:
                host = parts.hostname or ""
                userinfo = "***@" if (parts.username or parts.password) else ""
                tail = "?***" if (parts.query or parts.fragment) else ""
                data["base_url"] = f"{parts.scheme}://{userinfo}{host}{parts.path}{tail}"
        extra = data.get("extra_body")
        if isinstance(extra, dict) and _credential_paths(extra):
            data["extra_body"] = _hide_credentials(extra)
        return data

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("base_url must be an http(s) URL such as https://api.openai.com/v1")
        if parts.username or parts.password:
            raise ValueError("base_url must not contain credentials; use api_key_env")
        if parts.query or parts.fragment:
            raise ValueError("base_url must not have a query or fragment (no keys in URLs)")
        return v.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _check_env_name(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_NAME.match(v):
            raise ValueError(
                "api_key_env must be the NAME of an environment variable (letters, digits, _), "
                "not the key itself"
            )
        return v

    @field_validator("extra_body")
    @classmethod
    def _check_extra(cls, v: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(_OWN_FIELDS & set(v))
        if clash:
            raise ValueError(
                f"extra_body may not set {clash}: these come from each ChatRequest / the config"
            )
        creds = sorted(_credential_paths(v))
        if creds:
            raise ValueError(f"extra_body may not carry credentials {creds}: use api_key_env")
        return v

    @model_validator(mode="after")
    def _check(self) -> "HTTPModelConfig":
        if not self.model:
            raise ValueError("model must be a non-empty model id")
        if self.thinking == "off":
            if self.thinking_off_via == "reasoning_effort" and "reasoning_effort" in self.extra_body:
                raise ValueError("thinking='off' via reasoning_effort: do not also set extra_body.reasoning_effort")
            ctk = self.extra_body.get("chat_template_kwargs")
            if self.thinking_off_via == "chat_template_kwargs" and ctk is not None:
                if not isinstance(ctk, dict):
                    raise ValueError("extra_body.chat_template_kwargs must be a mapping")
                if ctk.get("enable_thinking", False) is not False:
                    raise ValueError("thinking='off' contradicts extra_body.chat_template_kwargs.enable_thinking")
        return self

    @property
    def model_name(self) -> str:
        return self.name or self.model

    @property
    def endpoint_key(self) -> str:
        """Stable short id of (endpoint, model)."""
        return hashlib.sha256(f"{self.base_url}\n{self.model}".encode()).hexdigest()[:16]

    @property
    def limiter_name(self) -> str:
        """Name of the run-wide limiter of this (endpoint, model); see ``create_shared_limiter``."""
        return f"ray_knowsim.limiter.{self.endpoint_key}"

    def rate_limits(self) -> RateLimits:
        return RateLimits(
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            max_in_flight=self.max_in_flight_global,
            lease_timeout_s=max(600.0, self.timeout_s + 60.0),
        )


class MissingAPIKeyError(RuntimeError):
    """The configured environment variable is unset or empty."""


class _Secret:
    """An API key that never shows itself: ``***`` in repr/str, its env NAME when pickled."""

    __slots__ = ("env_name", "_value")

    def __init__(self, env_name: str, value: str) -> None:
        self.env_name = env_name
        self._value = value

    @classmethod
    def from_env(cls, env_name: str) -> "_Secret":
        value = os.environ.get(env_name, "")
        if not value.strip():
            raise MissingAPIKeyError(
                f"environment variable {env_name} (named by api_key_env) is not set or empty"
            )
        return cls(env_name, value.strip())

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return f"<secret from ${self.env_name}>"

    __str__ = __repr__

    def __reduce__(self):
        return (_Secret.from_env, (self.env_name,))


def estimate_tokens(request: ChatRequest) -> int:
    """Upper-ish estimate for the token bucket before the call (~4 characters per token plus the
    full completion budget); settled against the real usage afterwards."""
    chars = sum(len(str(m.get("content", ""))) for m in request.messages)
    return chars // 4 + 4 * len(request.messages) + request.max_tokens


def _schema_name(request: ChatRequest) -> str:
    name = _SCHEMA_NAME_BAD.sub("_", request.schema_name or "output")[:64]
    return name or "output"


class _Failure(Exception):
    """One failed attempt, with the short reason recorded in ChatResponse.error.

    ``sent``: the server may have received the request (and may be computing or billing it);
    ``reached``: the model answered (a 2xx came back)."""

    def __init__(self, reason: str, retryable: bool, retry_after_s: float | None = None, *,
                 sent: bool = True, reached: bool = False, usage: Usage | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.sent = sent
        self.reached = reached
        self.usage = usage


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

    Rate limits: pass the run's limiter (``ray_knowsim.engine.limiter``); without one, a config
    that sets limits is refused, so that no limit is silently ignored."""

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
                "max_in_flight_global); pass limiter=ray_knowsim.engine.limiter.make_limiter("
                "config.limiter_name, config.rate_limits()) (the engine does this for every run)"
            )
        self.config = config
        self.name = config.model_name
        self._secret = _Secret.from_env(config.api_key_env) if config.api_key_env else None
        self._limiter = limiter
        self._rng = rng or random.Random()
        self._url = config.base_url + "/chat/completions"
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
            weakref.WeakKeyDictionary()
        )
        self._warned_no_usage = False
        self._warned_reasoning_estimate = False

    # --- identity and pickling -------------------------------------------------------------

    @property
    def cache_identity(self) -> dict[str, Any]:
        """What besides the request decides the answer (for CachedModel keys)."""
        ident = {
            "name": self.name,
            "model": self.config.model,
            "structured_output": self.config.structured_output,
            "json_schema_strict": self.config.json_schema_strict,
            "extra_body": self.config.extra_body,
        }
        if self.config.thinking != "default":  # only when set, so existing cache keys stay valid
            ident["thinking"] = self._thinking_fields()
        return ident

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

    async def complete(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        if not requests:
            return []
        session = self._session()
        return list(await asyncio.gather(*(self._one(session, r) for r in requests)))

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

    def _session(self) -> aiohttp.ClientSession:
        """One session (connection pool) per event loop, kept until ``aclose``."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
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
        headers = {"Content-Type": "application/json"}
        if self._secret is not None:
            key = self._secret.reveal()
            headers[self.config.api_key_header] = (
                f"Bearer {key}" if self.config.api_key_header.lower() == "authorization" else key
            )
        if self.config.send_knowsim_headers:
            headers[ROLE_HEADER] = request.role
            if request.prompt_version:
                headers[PROMPT_VERSION_HEADER] = request.prompt_version
            if request.schema_name:
                headers[SCHEMA_NAME_HEADER] = request.schema_name
        return headers

    def _scrub(self, text: str) -> str:
        return self._secret.scrub(text) if self._secret is not None else text

    async def _one(self, session: aiohttp.ClientSession, request: ChatRequest) -> ChatResponse:
        # One body for every attempt: a transport retry is the same request (same seed).
        body = self.build_payload(request)
        estimate = estimate_tokens(request)
        cfg = self.config
        last: _Failure | None = None
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
                            last = _Failure("limiter_error", retryable=False, sent=False)
                            break
                    t0 = time.perf_counter()
                    try:
                        response = await self._attempt(session, request, body)
                    except _Failure as failure:
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
                        last = _Failure("rate_limited_long", retryable=False, reached=reached)
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
        return ChatResponse(text="", usage=spent, latency_s=latency, error=last.reason,
                            attempts=attempt if last.reason != "limiter_error" else attempt - 1,
                            reached_model=reached)

    def _release(self, grant: Grant | None, used: int | None) -> None:
        if grant is None or self._limiter is None:
            return
        try:
            self._limiter.release(grant, used)
        except Exception as exc:  # the share is reclaimed on its own; the answer is still good
            log.warning("%s: rate limiter release failed: %s", self.name, self._scrub(repr(exc)))

    async def _attempt(
        self, session: aiohttp.ClientSession, request: ChatRequest, body: dict[str, Any]
    ) -> ChatResponse:
        try:
            async with session.post(self._url, json=body, headers=self._headers(request)) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after = parse_retry_after(resp.headers)
        except aiohttp.ConnectionTimeoutError:
            raise _Failure("connection", retryable=True, sent=False) from None
        except asyncio.TimeoutError:
            raise _Failure("timeout", retryable=True) from None
        except aiohttp.ClientConnectorError as exc:  # refused, DNS, ...: never sent
            log.debug("%s: %s", self.name, self._scrub(f"{type(exc).__name__}: {exc}"))
            raise _Failure("connection", retryable=True, sent=False) from None
        except aiohttp.ClientError as exc:
            # reset, payload cut short, ...: transient from our side
            log.debug("%s: %s", self.name, self._scrub(f"{type(exc).__name__}: {exc}"))
            raise _Failure("connection", retryable=True) from None
        except (TypeError, ValueError) as exc:  # e.g. a message that cannot be sent as JSON
            log.warning("%s: cannot send request: %s", self.name, self._scrub(f"{type(exc).__name__}: {exc}"))
            raise _Failure("bad_request", retryable=False, sent=False) from None

        if not 200 <= status < 300:
            reason = f"http_{status}"
            code = _error_code(raw)
            if code and self._scrub(code) != code:
                code = None  # a server echoing the key as an error code: never record it
            if code:
                reason = f"{reason}:{code}"
            detail = self._scrub(raw[:300].decode("utf-8", "replace"))
            level = logging.DEBUG if is_retryable_status(status) else logging.WARNING
            log.log(level, "%s HTTP %d: %s", self.name, status, detail)
            raise _Failure(reason, is_retryable_status(status), retry_after)

        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        usage = self._usage(data.get("usage")) if isinstance(data, dict) else None
        try:
            choice = data["choices"][0]  # type: ignore[index]
            message = choice.get("message") or {}
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (KeyError, IndexError, TypeError, AttributeError):
            log.debug("%s: unreadable 2xx body: %s", self.name, self._scrub(raw[:300].decode("utf-8", "replace")))
            raise _Failure("bad_response", retryable=True, reached=True, usage=usage) from None
        if usage is None:
            usage = self._usage(None)
        finish_reason = choice.get("finish_reason")
        finish_reason = finish_reason if isinstance(finish_reason, str) else None
        content = message.get("content")
        if content is None and message.get("refusal"):
            return ChatResponse(text="", usage=usage, error="refusal", finish_reason=finish_reason)
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        text, thought = strip_thinking(content if isinstance(content, str) else "")
        for field in ("reasoning_content", "reasoning"):  # servers that split reasoning out
            extra = message.get(field)
            if isinstance(extra, str) and extra:
                thought = f"{thought}\n{extra}" if thought else extra
        if thought and not usage.reasoning_tokens:
            # the server did not count them: estimate (~4 characters per token), never above
            # what it says it generated
            usage.reasoning_tokens = -(-len(thought) // 4)
            if usage.completion_tokens:
                usage.reasoning_tokens = min(usage.reasoning_tokens, usage.completion_tokens)
            if not self._warned_reasoning_estimate:
                self._warned_reasoning_estimate = True
                log.info("%s: reasoning tokens not reported by the server; estimated from the text", self.name)
        return ChatResponse(text=text, usage=usage, finish_reason=finish_reason)

    def _usage(self, raw: Any) -> Usage:
        if isinstance(raw, dict):
            try:
                details = raw.get("prompt_tokens_details")
                cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
                usage = Usage(int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0), cached)
                details = raw.get("completion_tokens_details")
                if isinstance(details, dict) and details.get("reasoning_tokens") is not None:
                    usage.reasoning_tokens = int(details["reasoning_tokens"])
                return usage
            except (TypeError, ValueError, AttributeError) as exc:
                if not self._warned_no_usage:
                    self._warned_no_usage = True
                    log.warning("%s: unreadable usage block (%s: %s); token counts are recorded as 0",
                                self.name, type(exc).__name__, exc)
                return Usage()
        if not self._warned_no_usage:
            self._warned_no_usage = True
            log.warning("%s: response has no usage; token counts are recorded as 0", self.name)
        return Usage()


def _error_code(raw: bytes) -> str | None:
    """The provider's short error code (OpenAI ``error.code``/``error.type``), if it is a plain id."""
    try:
        err = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        return None
    if not isinstance(err, dict):
        return None
    for field in ("code", "type"):
        value = err.get(field)
        if isinstance(value, str) and _ERROR_CODE.match(value):
            return value
    return None
