"""The one interface every model backend implements: one chat request in, one response out.

A model is asked one request at a time, so nothing above it waits for anything but its own
answer: a conversation's next request goes out as soon as its previous answer is read, whatever
other conversations are doing. Batching is a backend's own business (vLLM's engine batches
continuously; an HTTP endpoint sees concurrent requests), never the caller's. Failures are the
response's (``ChatResponse.error``), never an exception, so one failed request fails only the
session that sent it. The request/response types live in :mod:`ray_knowsim.schema.chat`.

Wrappers (response cache, accounting, limiters) take a model and are one: they compose per request.
"""

from __future__ import annotations

import asyncio
from typing import Iterable, Protocol, runtime_checkable

from ray_knowsim.schema.chat import ChatRequest, ChatResponse


@runtime_checkable
class ChatModel(Protocol):
    """A model endpoint. ``name`` identifies it in manifests and results."""

    name: str

    async def generate(self, request: ChatRequest) -> ChatResponse:
        """Answer one request; concurrency and rate limits are the backend's job."""
        ...


async def generate_all(model: ChatModel, requests: Iterable[ChatRequest]) -> list[ChatResponse]:
    """Every request's answer (same order), all asked at once: for callers that have many
    requests and nothing to do until all are answered (graph extraction, benchmarks, tools)."""
    return list(await asyncio.gather(*(model.generate(r) for r in requests)))


__all__ = ["ChatModel", "generate_all"]
