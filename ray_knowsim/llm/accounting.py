"""What the model calls of a run cost, per KnowSim role; shards count, the driver merges.

Counts are plain integers/floats in dataclasses, so they pickle (Ray), serialise (``to_dict``) and
add up (``merge``) without any shared state between workers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Protocol

from ray_knowsim.schema.chat import ChatRequest, ChatResponse
from ray_knowsim.llm.protocol import ChatModel, on_request_leaving, reports_leaving


@dataclass
class RoleStats:
    calls: int = 0  # responses received (hits and errors included)
    errors: int = 0
    cached: int = 0  # answered from cache: no new spend
    prompt_tokens: int = 0  # new spend only
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    reasoning_tokens: int = 0  # the thinking part of completion_tokens (reasoning models)
    cache_write_tokens: int = 0  # of prompt_tokens, written into the provider's prompt cache
    saved_prompt_tokens: int = 0  # what cache hits would have cost
    saved_completion_tokens: int = 0
    latency_s: float = 0.0  # sum over calls that reached a model
    error_kinds: dict[str, int] = field(default_factory=dict)  # "http_429" -> n (detail dropped)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def record(self, response: ChatResponse) -> None:
        self.calls += 1
        self.prompt_tokens += response.usage.prompt_tokens
        self.completion_tokens += response.usage.completion_tokens
        self.cached_prompt_tokens += response.usage.cached_prompt_tokens
        self.reasoning_tokens += response.usage.reasoning_tokens
        self.cache_write_tokens += response.usage.cache_write_tokens
        if response.cached:
            self.cached += 1
            if response.original_usage is not None:
                self.saved_prompt_tokens += response.original_usage.prompt_tokens
                self.saved_completion_tokens += response.original_usage.completion_tokens
        else:
            self.latency_s += response.latency_s
        if response.error is not None:
            self.errors += 1
            kind = response.error.split(":", 1)[0]
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1

    def merge(self, other: "RoleStats") -> None:
        for name in (
            "calls", "errors", "cached", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "reasoning_tokens", "cache_write_tokens",
            "saved_prompt_tokens", "saved_completion_tokens", "latency_s",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for kind, n in other.error_kinds.items():
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + n


@dataclass
class Accounting:
    """Per-role RoleStats. ``merge`` is associative and commutative (shard order does not matter)."""

    by_role: dict[str, RoleStats] = field(default_factory=dict)

    def role(self, name: str) -> RoleStats:
        stats = self.by_role.get(name)
        if stats is None:
            stats = self.by_role[name] = RoleStats()
        return stats

    def record(self, request: ChatRequest, response: ChatResponse) -> None:
        self.role(request.role).record(response)

    def merge(self, other: "Accounting") -> "Accounting":
        for name, stats in other.by_role.items():
            self.role(name).merge(stats)
        return self

    @classmethod
    def merged(cls, parts: Iterable["Accounting"]) -> "Accounting":
        total = cls()
        for part in parts:
            total.merge(part)
        return total

    def total(self) -> RoleStats:
        out = RoleStats()
        for stats in self.by_role.values():
            out.merge(stats)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {name: asdict(stats) for name, stats in sorted(self.by_role.items())}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Accounting":
        return cls({name: RoleStats(**{**d, "error_kinds": dict(d.get("error_kinds", {}))})
                    for name, d in data.items()})


class SpendSink(Protocol):
    """Told of every request as it leaves and of its answer as it arrives (the run's spend
    journal, :class:`ray_knowsim.io.spend.SpendJournal`; the progress reporter)."""

    def sent(self, request: ChatRequest, model_key: str) -> None: ...

    def answered(self, request: ChatRequest, response: ChatResponse, model_key: str) -> None: ...


class AccountedModel:
    """A ChatModel wrapper that records every response into ``accounting`` and tells ``sink``
    (when given) of each request and answer; ``key``: the model's key in the run config."""

    def __init__(self, inner: ChatModel, accounting: Accounting | None = None, *, key: str = "",
                 sink: SpendSink | None = None) -> None:
        self.inner = inner
        self.accounting = accounting if accounting is not None else Accounting()
        self.name = inner.name
        self.key = key or inner.name
        self.sink = sink

    @property
    def cache_identity(self) -> Any:
        return getattr(self.inner, "cache_identity", None) or {"name": self.inner.name}

    def __repr__(self) -> str:
        return f"AccountedModel({self.inner!r})"

    async def generate(self, request: ChatRequest) -> ChatResponse:
        sink = self.sink
        if sink is None:
            response = await self.inner.generate(request)
        elif not reports_leaving(self.inner):  # no word of when it leaves: it counts as sent now
            sink.sent(request, self.key)
            response = await self.inner.generate(request)
        else:  # "sent" when the transport says the request goes out, not while it waits for a slot
            left = False

            def on_leaving() -> None:
                nonlocal left
                if not left:
                    left = True
                    sink.sent(request, self.key)

            with on_request_leaving(on_leaving):
                response = await self.inner.generate(request)
            if not left:  # answered without leaving (a cache hit, a twin's answer, refused before sending)
                sink.sent(request, self.key)
        self.accounting.record(request, response)
        if sink is not None:
            sink.answered(request, response, self.key)
        return response

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
