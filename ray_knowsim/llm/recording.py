"""A ChatModel wrapper that records every request it passes on and the answer that came back.

For measurements and real-model tests that must see exactly what a model was sent and what it
said (retries included) without changing either: ``calls`` holds one :class:`Call` per model call,
in the order the answers arrived.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ray_knowsim.schema.chat import ChatRequest, ChatResponse


@dataclass(frozen=True)
class Call:
    request: ChatRequest
    response: ChatResponse


class RecordingModel:
    """Passes requests to ``inner`` unchanged and records each (request, response) pair."""

    def __init__(self, inner: Any):
        self.inner, self.name = inner, inner.name
        self.calls: list[Call] = []

    async def generate(self, request: ChatRequest) -> ChatResponse:
        out = await self.inner.generate(request)
        self.calls.append(Call(request, out))
        return out

    def log(self, chars: int = 400) -> str:
        """One line per call: role, request id, timing, budget, finish reason, tokens, the answer's start."""
        return "\n".join(
            f"[{c.request.role} {c.request.request_id}] {c.response.latency_s:.1f}s max_tokens={c.request.max_tokens} "
            f"finish={c.response.finish_reason} error={c.response.error} "
            f"tokens={c.response.usage.prompt_tokens}+{c.response.usage.completion_tokens}: "
            f"{c.response.text[:chars]!r}" for c in self.calls)


__all__ = ["Call", "RecordingModel"]
