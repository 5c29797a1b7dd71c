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
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterable, Iterator, Protocol, runtime_checkable

from ray_knowsim.schema.chat import ChatRequest, ChatResponse


#: set by the accounting wrapper around one request to a model that ``reports_leaving``: called when
#: the request goes out (after any wait for an in-flight slot or a rate grant), so that the spend
#: journal counts as "sent" only what left, never what was still queued when the process died
_ON_LEAVING: ContextVar[Callable[[], None] | None] = ContextVar("ray_knowsim_on_leaving", default=None)


def request_leaves() -> None:
    """Said by a transport right before an attempt of the current request is sent (idempotent per
    request: a retry says it again, the first counts)."""
    hook = _ON_LEAVING.get()
    if hook is not None:
        hook()


@contextmanager
def on_request_leaving(hook: Callable[[], None]) -> Iterator[None]:
    """Within the block (one request's ``generate``), :func:`request_leaves` calls ``hook``."""
    token = _ON_LEAVING.set(hook)
    try:
        yield
    finally:
        _ON_LEAVING.reset(token)


def reports_leaving(model: object) -> bool:
    """Whether ``model`` (or the model it wraps) calls :func:`request_leaves` for what it sends."""
    return bool(getattr(model, "reports_leaving", False))


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
