"""What a backend's check before spending reports (:class:`Capacity`), and the helpers the built-in
probes share (``backends/http/probe.py``, ``backends/vllm/probe.py``). The checks that read these
answers are :mod:`ray_knowsim.preflight.checks`; the probes sit with their backends so that a
backend registers its probe without importing the pre-flight checks (which import the registry)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ray_knowsim.llm.http.credentials import mask_secrets
from ray_knowsim.llm.http.response import error_message
from ray_knowsim.schema.chat import usage_from_wire

#: the longest a probe waits for one answer (the entry's own timeout when that is shorter)
PROBE_TIMEOUT_S = 20.0

#: fields of a models-list entry that state the model's context length, in the order looked at
CONTEXT_FIELDS = ("max_model_len", "context_length", "context_window", "max_context_length")

#: completion tokens of the tiny request sent to an endpoint without a models list
TINY_MAX_TOKENS = 8


_SHOWN_MODELS = 8


@dataclass
class Capacity:
    """What one model entry's endpoint said about itself."""

    where: str  # the endpoint in words, for messages ("http://host/v1", "self-hosted vLLM /models/x")
    checked: str  # how: "models list", "one tiny request", "entry", or why not ("not checked: ...")
    max_model_len: int | None = None  # the context, prompt and completion together (None: unknown)
    limit_source: str = ""  # where max_model_len comes from
    setting: str = ""  # how to set a context of {n} tokens, for advice ("models.sim.max_model_len: {n}")
    error: str | None = None  # why the entry cannot be used; None: usable
    warning: str | None = None  # something odd that does not stop the run
    requests: int = 0  # HTTP requests this check sent
    chat_requests: int = 0  # of them, chat completions (the tiny request, the speed probe)
    chat_prompt_tokens: int = 0  # what the chat requests above spent (their usage), for the run's spend journal
    chat_completion_tokens: int = 0
    chat_cached_prompt_tokens: int = 0  # of chat_prompt_tokens, served from the provider's prompt cache
    tokens_per_s: float | None = None  # per request, measured by the speed probe (None: not measured)
    speed: str = ""  # how the speed was measured, or why not


class _NoAnswer(Exception):
    """The endpoint could not be reached or did not answer in time."""


def _server_message(raw: bytes, scrub: Any) -> str:
    """The server's reason (the HTTP client's own reading of an error body), scrubbed and with
    anything credential-shaped masked, short."""
    return mask_secrets(scrub(error_message(raw)))[:240]


def _usage(raw: bytes) -> tuple[int, int, int]:
    """(prompt, completion, cached prompt) tokens of a chat completion's ``usage`` (zeros when it
    has none), read as the client reads it (:func:`ray_knowsim.schema.chat.usage_from_wire`)."""
    try:
        usage = usage_from_wire(json.loads(raw).get("usage") or {})
        return usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens
    except (ValueError, AttributeError, TypeError):
        return 0, 0, 0


__all__ = ["CONTEXT_FIELDS", "Capacity", "PROBE_TIMEOUT_S", "TINY_MAX_TOKENS"]
