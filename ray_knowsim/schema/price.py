"""What a model's tokens cost: an optional ``price`` on a run config's model entry.

USD per million tokens, the way providers list them: input (prompt), cached input (prompt tokens
served from the provider's prompt cache, usually cheaper) and output (completion). A response's
``prompt_tokens`` include its cached ones (OpenAI's convention), so

    cost = ((prompt - cached) * input + cached * cached_input + completion * output) / 1e6

``cached_input`` defaults to ``input`` (a provider without a cache discount). Prices never change
results, so they stay out of the config hash: a price can be added to a finished run's config
and the run resumed or re-priced.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

PER = 1_000_000
#: THE words for a cost that is not known because a model has no price: every place that shows a
#: cost (the run's terminal lines, the dry run, the report, the viewer) says this, never "$0.0000"
NO_PRICE = "no price given"


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)  # USD per million prompt tokens
    output: float = Field(ge=0)  # USD per million completion tokens
    cached_input: float | None = Field(None, ge=0)  # USD per million cached prompt tokens (default: input)

    @classmethod
    def free(cls) -> "Price":
        return cls(input=0.0, output=0.0)

    def cost(self, prompt_tokens: int | float, completion_tokens: int | float, cached_prompt_tokens: int | float = 0) -> float:
        cached = min(max(cached_prompt_tokens, 0), prompt_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return ((prompt_tokens - cached) * self.input + cached * cached_rate + completion_tokens * self.output) / PER


def usd_text(cost: float | None, priced: int | None = None, of: int | None = None, digits: int = 4) -> str:
    """A cost in words: ``$1.2345``, or :data:`NO_PRICE` when it is unknown (None or NaN; with
    ``priced``/``of`` sessions, how many of them were priced)."""
    if cost is not None and not (isinstance(cost, float) and math.isnan(cost)):
        return f"${cost:,.{digits}f}"
    if priced and of:
        return f"{NO_PRICE} ({priced:,} of {of:,} sessions priced)"
    return NO_PRICE


__all__ = ["NO_PRICE", "Price", "usd_text"]
