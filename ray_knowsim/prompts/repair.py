"""The one repair round trip: the request again, the unusable reply, and what was wrong with it."""

from __future__ import annotations

from dataclasses import replace

from ray_knowsim.model.chat import ChatRequest
from ray_knowsim.prompts.templates import load_template

EXTRACTOR_RETRY_TEMPERATURE = 0.4  # spec §12.5: the extractor is asked again a little warmer
#: temperature of the one repair attempt, by role (the extractor's retry temperature is the spec's)
RETRY_TEMPERATURE = {"extractor": EXTRACTOR_RETRY_TEMPERATURE}


def build_retry(request: ChatRequest, bad_reply: str, reason: str, *, temperature: float | None = None) -> ChatRequest:
    """The request followed by the unusable reply and one message naming ``reason``."""
    tpl = load_template("repair")
    follow_up = tpl.fill("user", {"error": reason or "it could not be read"})
    messages = tuple(request.messages) + (
        {"role": "assistant", "content": bad_reply or ""},
        {"role": "user", "content": follow_up},
    )
    if temperature is None:
        temperature = RETRY_TEMPERATURE.get(request.role, request.temperature)
    return replace(
        request,
        messages=messages,
        temperature=temperature,
        prompt_version=f"{request.prompt_version}+{tpl.prompt_version}",
    )


__all__ = ["RETRY_TEMPERATURE", "build_retry"]
