"""The one repair round trip: the request again, the unusable reply, and what was wrong with it."""

from __future__ import annotations

from dataclasses import replace

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.prompts.templates import load_template


def build_retry(request: ChatRequest, bad_reply: str, reason: str, *, temperature: float | None = None) -> ChatRequest:
    """The request followed by the unusable reply and one message naming ``reason``, at
    ``temperature`` (the role's ``repair_temperature`` setting; None keeps the request's)."""
    tpl = load_template("repair")
    follow_up = tpl.fill("user", {"error": reason or "it could not be read"})
    messages = tuple(request.messages) + (
        {"role": "assistant", "content": bad_reply or ""},
        {"role": "user", "content": follow_up},
    )
    return replace(
        request,
        messages=messages,
        temperature=request.temperature if temperature is None else temperature,
        prompt_version=f"{request.prompt_version}+{tpl.prompt_version}",
    )


__all__ = ["build_retry"]
