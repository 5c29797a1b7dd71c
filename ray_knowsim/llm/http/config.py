"""The config of one OpenAI-compatible endpoint and model (an ``http`` backend entry): what to send
where, the retry and rate limits, structured output and thinking settings. It holds no secret
(only the NAME of the key's environment variable) and refuses input that looks like one without
echoing it back.

Reasoning models: ``thinking="off"`` switches thinking off (``chat_template_kwargs:
{enable_thinking: false}`` for vLLM/SGLang-served open models, or ``reasoning_effort`` for OpenAI-style
APIs, which cannot switch it off entirely: ``reasoning_effort_off`` says how little).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ray_knowsim.llm.http.credentials import credential_paths, hide_credentials
from ray_knowsim.llm.limiter import RateLimits
from ray_knowsim.llm.retry import BackoffConfig

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Request fields this backend sets itself; extra_body may not override them silently.
_OWN_FIELDS = frozenset(
    {"model", "messages", "stream", "n", "temperature", "max_tokens", "max_completion_tokens", "seed",
     "response_format"}
)


#: The settings of an endpoint that can change what it answers, with the request itself (see
#: :data:`ray_knowsim.llm.cache.REQUEST_FIELDS`): where it goes (``base_url``: two servers may serve
#: different weights under one model name), which model, how the output is constrained
#: (``structured_output``, ``json_schema_strict``, ``schema_subset``), thinking and chat-template
#: options (``thinking*``, ``extra_body``: also any extra sampling parameter), which field carries
#: the cap, whether our own test double gets its facts (``offline_server``), and the name the results
#: carry. The response cache's key (:meth:`HTTPModelConfig.answer_identity`) and the config hash
#: (``backends/http/__init__.py`` registers it as the backend's operational fields) both use exactly this split.
ANSWER_FIELDS = ("base_url", "model", "name", "structured_output", "json_schema_strict", "schema_subset",
                 "max_tokens_field", "offline_server", "thinking", "thinking_off_via", "reasoning_effort_off",
                 "extra_body")
#: The settings that cannot change an answer: how long and how often to try, how many at once, at
#: what rate, with which key and headers it is fetched. Changing them keeps every cache hit and
#: keeps a run directory resumable.
OPERATIONAL_FIELDS = ("timeout_s", "connect_timeout_s", "max_attempts", "backoff", "max_in_flight",
                      "requests_per_minute", "tokens_per_minute", "max_in_flight_global", "api_key_env",
                      "api_key_header", "send_knowsim_headers", "tokenizer")


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
    send_knowsim_headers: bool = False  # role / prompt version / schema name / request id as X-KnowSim-* headers
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
    # The served model's tokenizer on this machine (a directory holding tokenizer.json, or the
    # file): pre-flight and the dry run count prompts with it instead of ceil(chars / 4).
    tokenizer: str | None = None

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
        if isinstance(extra, dict) and credential_paths(extra):
            data["extra_body"] = hide_credentials(extra)
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
        creds = sorted(credential_paths(v))
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

    def answer_identity(self) -> dict[str, Any]:
        """What besides the request decides an answer of this endpoint (:data:`ANSWER_FIELDS`)."""
        return {"backend": "http", **self.model_dump(mode="json", include=set(ANSWER_FIELDS))}

    @property
    def limiter_name(self) -> str:
        """Name of the cluster-wide limiter of this (endpoint, model, credential NAME): every run
        that reaches the model with the same key shares one budget; see ``create_shared_limiter``."""
        key = hashlib.sha256(f"{self.base_url}\n{self.model}\n{self.api_key_env or ''}".encode()).hexdigest()[:16]
        return f"ray_knowsim.limiter.{key}"

    def rate_limits(self) -> RateLimits:
        return RateLimits(
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            max_in_flight=self.max_in_flight_global,
            lease_timeout_s=max(600.0, self.timeout_s + 60.0),
        )


__all__ = ["ANSWER_FIELDS", "OPERATIONAL_FIELDS", "HTTPModelConfig"]
