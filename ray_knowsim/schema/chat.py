"""What travels between the prompts and the model clients: a chat request, its response, usage.

Both :mod:`ray_knowsim.prompts` (which builds requests) and :mod:`ray_knowsim.llm` (which sends
them) import these types from here, so neither layer imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

ROLES = ("user_sim", "assistant", "extractor", "judge", "graph_extractor")


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[dict[str, str], ...]  # {"role": "system"|"user"|"assistant", "content": str}
    role: str = "assistant"  # which KnowSim role asks (for accounting and the offline backend)
    temperature: float = 0.0
    max_tokens: int = 1024
    seed: int | None = None
    json_schema: dict[str, Any] | None = None  # constrain decoding to this schema where supported
    schema_name: str | None = None
    prompt_version: str = ""  # "<template>@<version>", recorded with results and cache keys
    request_id: str = ""
    # Out-of-band facts for the offline test double (template, ids, state, transcript, ...). They
    # never enter ``messages``: a real model sees only the method's inputs. Only our own offline
    # server receives them, as a request extension, when a model entry says it is that server.
    offline_facts: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)



_REQUEST_FIELDS = frozenset(ChatRequest.__dataclass_fields__)


def with_fields(request: ChatRequest, **changes: Any) -> ChatRequest:
    """``dataclasses.replace(request, **changes)``, equal to it field for field, without its walk
    over the fields and its ``__init__`` call (a request has no ``__post_init__``): a request is
    copied several times on its way out (its budget, its attempt's seed, the role's settings),
    and ``replace`` cost ~4 us a copy."""
    unknown = changes.keys() - _REQUEST_FIELDS
    if unknown:
        raise TypeError(f"ChatRequest has no field {sorted(unknown)[0]!r}")
    new = object.__new__(type(request))
    fields = new.__dict__
    fields.update(request.__dict__)
    fields.update(changes)
    return new


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    # the part of completion_tokens a reasoning model spent thinking (reported by the server, or
    # estimated from the reasoning text it returned); never part of the transcript
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0  # of prompt_tokens, written into the provider's prompt cache (billed at a premium by some)

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_prompt_tokens += other.cached_prompt_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cache_write_tokens += other.cache_write_tokens


def _count(block: Any, *names: str) -> int:
    """The first of ``names`` that ``block`` (a dict) holds as a count, else 0."""
    if isinstance(block, dict):
        for name in names:
            value = block.get(name)
            if value is not None:
                return int(value)
    return 0


def usage_from_wire(raw: dict[str, Any]) -> Usage:
    """A response's ``usage`` block as OpenAI counts it: ``prompt_tokens`` holds every prompt token,
    the cached and written ones among them. Providers differ in what they send and in what their
    input count holds, and a cost read from the wrong one is wrong by the whole cached share:

    * OpenAI, Gemini and vLLM: ``prompt_tokens`` with ``prompt_tokens_details.cached_tokens``;
    * Anthropic's own API: ``input_tokens`` (the UNcached remainder), ``output_tokens``,
      ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` beside it: added up;
    * proxies that pass Anthropic through (LiteLLM, OpenRouter): ``prompt_tokens`` (all of them)
      with ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` at the top, or
      ``cache_write_tokens`` / ``cache_creation_tokens`` in ``prompt_tokens_details``.

    A ``prompt_tokens`` below its own cached and written counts cannot hold them: they are added.
    Raises TypeError/ValueError on a block that is not counts (the caller says so once)."""
    details = raw.get("prompt_tokens_details")
    cached = _count(details, "cached_tokens") or _count(raw, "cache_read_input_tokens")
    written = _count(raw, "cache_creation_input_tokens") or _count(details, "cache_write_tokens", "cache_creation_tokens")
    if raw.get("prompt_tokens") is None and raw.get("input_tokens") is not None:  # Anthropic's own convention
        prompt, completion = int(raw["input_tokens"]) + cached + written, _count(raw, "output_tokens")
    else:
        prompt, completion = _count(raw, "prompt_tokens"), _count(raw, "completion_tokens")
        if prompt < cached + written:
            prompt += cached + written
    usage = Usage(prompt, completion, cached, cache_write_tokens=written)
    reasoning = raw.get("completion_tokens_details")
    if isinstance(reasoning, dict) and reasoning.get("reasoning_tokens") is not None:
        usage.reasoning_tokens = int(reasoning["reasoning_tokens"])
    return usage


@dataclass
class ChatResponse:
    text: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    error: str | None = None  # None on success; a short reason otherwise (never a secret)
    # On a failure, the other side's own words, secrets masked and bounded: for an HTTP error its
    # status and the server's message ("HTTP 400: max_tokens=8192 cannot be greater than
    # max_model_len=4096"); "" when there are none. Kept on the failed session's row (error_detail).
    detail: str = ""
    cached: bool = False
    finish_reason: str | None = None
    # On a cache hit ``usage`` is zero (no new spend); this keeps what the original call cost.
    original_usage: Usage | None = None
    # Set by a response cache on an answer it may store: the reader calls it once it accepted the
    # answer (parsed, not truncated), so refused answers never enter the cache. In-process only.
    commit: Callable[[], bool] | None = field(default=None, compare=False, repr=False)
    # Whether the call reached a model (it answered; the call counts as a model call, and may be
    # billed) and how many transport attempts it took. Backends that do not retry leave the defaults.
    reached_model: bool = True
    attempts: int = 1


__all__ = ["ROLES", "ChatRequest", "ChatResponse", "Usage", "usage_from_wire"]
