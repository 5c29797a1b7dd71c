"""The one interface every model backend implements: a batch of chat requests in, texts out.

Failures are per request (``ChatResponse.error``), never an exception for the whole batch, so a
shard can retry or fail exactly the sessions that were hit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

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


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


@dataclass
class ChatResponse:
    text: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    error: str | None = None  # None on success; a short reason otherwise (never a secret)
    cached: bool = False
    finish_reason: str | None = None
    # On a cache hit ``usage`` is zero (no new spend); this keeps what the original call cost.
    original_usage: Usage | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A model endpoint. ``name`` identifies it in caches, manifests and results."""

    name: str

    async def complete(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Answer every request (same order); concurrency and rate limits are the backend's job."""
        ...
