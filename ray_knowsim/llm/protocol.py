"""The one interface every model backend implements: a batch of chat requests in, texts out.

Failures are per request (``ChatResponse.error``), never an exception for the whole batch, so a
shard can retry or fail exactly the sessions that were hit. The request/response types live in
:mod:`ray_knowsim.model.chat`.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from ray_knowsim.model.chat import ChatRequest, ChatResponse


@runtime_checkable
class ChatModel(Protocol):
    """A model endpoint. ``name`` identifies it in caches, manifests and results."""

    name: str

    async def complete(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Answer every request (same order); concurrency and rate limits are the backend's job."""
        ...
