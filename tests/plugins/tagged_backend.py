"""A model backend defined OUTSIDE the package, exactly as docs/extending.md describes.

``tagged`` wraps the offline model and puts a fixed prefix before every assistant reply, so a test
can see that its answers (not the built-in backend's) reached the transcripts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ray_knowsim.backends.registry import BuildContext, register_backend
from ray_knowsim.schema.chat import ChatRequest, ChatResponse


class TaggedEntry(BaseModel):
    """``models.<key>: {backend: tagged, prefix: "..."}`` in a run config."""

    model_config = ConfigDict(extra="forbid")
    backend: Literal["tagged"]
    prefix: str = "[tagged] "
    delay_s: float = 0.0  # operational: does not change answers, so it stays out of the config hash


class TaggedModel:
    def __init__(self, name: str, prefix: str, graphs) -> None:
        from ray_knowsim.llm.offline import OfflineModel

        self.name = name
        self.prefix = prefix
        self.inner = OfflineModel(name=name)
        self.inner.register_graphs(dict(graphs))

    async def generate(self, request: ChatRequest) -> ChatResponse:
        answer = await self.inner.generate(request)
        return replace(answer, text=self.prefix + answer.text) if request.role == "assistant" and answer.error is None else answer


@register_backend("tagged", TaggedEntry, operational={"delay_s"}, cacheable=False)
def build_tagged(entry: TaggedEntry, ctx: BuildContext) -> TaggedModel:
    return TaggedModel(ctx.key, entry.prefix, ctx.graphs)
