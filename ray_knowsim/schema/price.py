"""What a model's tokens cost: an optional ``price`` on a run config's model entry.

USD per million tokens, the way providers list them: input (prompt), cached input (prompt tokens
served from the provider's prompt cache, usually cheaper), cache write (prompt tokens written into
the cache, a premium on Anthropic) and output (completion). A response's ``prompt_tokens`` include
its cached and written ones (OpenAI's convention; Anthropic's usage is converted to it), so

    cost = ((prompt - cached - written) * input + cached * cached_input + written * cache_write
            + completion * output) / 1e6

``cached_input`` and ``cache_write`` default to ``input`` (a provider without a cache discount or
premium). Prices never change results, so they stay out of the config hash: a price can be added to
a finished run's config and the run resumed or re-priced.

**The cache minimum.** No provider caches a prefix shorter than its minimum, so a prompt whose
stable prefix is shorter is billed in full however cheap ``cached_input`` is. The dry run prices
cached input from each prompt's stable prefix and ``cache_min_tokens``; when the entry does not
give it, its ``provider``'s documented default (:data:`PROVIDER_CACHE`), else
:data:`DEFAULT_CACHE_MIN_TOKENS`, and the dry run's summary says which it assumed. Defaults, as the
providers published them in 2025 (check yours; a field given on the entry always wins):

* ``openai``: automatic prefix caching from 1,024 tokens (in 128-token steps); the cached price is
  per model (0.1x-0.5x input): give ``cached_input``; no write premium.
* ``anthropic``: 1,024 tokens (Sonnet, Opus 4/4.1), 2,048 (Haiku 3/3.5), 4,096 (Opus 4.5, Haiku
  4.5): set ``cache_min_tokens`` for those; reads 0.1x input, writes 1.25x input (5-minute cache;
  2x for the 1-hour one). Anthropic caches only up to ``cache_control`` breakpoints in the request.
* ``gemini``: implicit caching from 1,024 tokens (Flash; Pro models 2,048-4,096: set it); the
  cached price is per model: give ``cached_input``; no write premium for implicit caching.
* ``deepseek``: a disk cache in 64-token units; the cached price is per model; no write premium.
"""

from __future__ import annotations

import math

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PER = 1_000_000
#: THE words for a cost that is not known because a model has no price: every place that shows a
#: cost (the run's terminal lines, the dry run, the report, the viewer) says this, never "$0.0000"
NO_PRICE = "no price given"
#: and for a cost shown in tokens because every model is priced at $0 (the offline test double)
PRICED_AT_ZERO = "the models are priced at $0"


#: the cache minimum assumed for a price that names neither one nor a provider (OpenAI's, Gemini
#: Flash's, Anthropic Sonnet's): the dry run says it assumed it
DEFAULT_CACHE_MIN_TOKENS = 1024


class ProviderCache(BaseModel):
    """A provider's documented cache terms, as multiples of the input price where they are fixed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_tokens: int
    cached_input_x: float | None = None  # cached price / input price; None: per model, give cached_input
    cache_write_x: float = 1.0  # cache-write price / input price


PROVIDER_CACHE: dict[str, ProviderCache] = {
    "openai": ProviderCache(min_tokens=1024),
    "anthropic": ProviderCache(min_tokens=1024, cached_input_x=0.1, cache_write_x=1.25),
    "gemini": ProviderCache(min_tokens=1024),
    "deepseek": ProviderCache(min_tokens=64),
}


class CacheTerms(BaseModel):
    """The cache terms a price resolves to (USD per million tokens) and where each came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cached_input: float
    cache_write: float
    min_tokens: int
    min_tokens_from: str  # "the entry", "provider <name>'s default", "assumed (...)"


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)  # USD per million prompt tokens
    output: float = Field(ge=0)  # USD per million completion tokens
    cached_input: float | None = Field(None, ge=0)  # USD per million cached prompt tokens (default: input)
    cache_write: float | None = Field(None, ge=0)  # USD per million prompt tokens written to the cache (default: input)
    cache_min_tokens: int | None = Field(None, ge=0)  # the shortest prefix the provider caches
    provider: Literal["openai", "anthropic", "gemini", "deepseek"] | None = None  # its documented cache defaults

    @model_validator(mode="after")
    def _cache_discount_is_a_discount(self) -> "Price":
        # a cached price above the input price is a typo (per million vs per thousand, swapped fields)
        if self.cached_input is not None and self.cached_input > self.input:
            raise ValueError(f"cached_input {self.cached_input} is above input {self.input}: a cache read costs less than a prompt token")
        return self

    @classmethod
    def free(cls) -> "Price":
        return cls(input=0.0, output=0.0)

    def cache_rates(self) -> tuple[float, float]:
        """USD per million cached and per million written prompt tokens: the entry's fields, else
        its provider's documented multiples of ``input``, else ``input`` (no discount, no premium).
        Plain arithmetic, no model built: it prices every recorded call."""
        preset = PROVIDER_CACHE.get(self.provider) if self.provider else None
        cached = self.cached_input
        if cached is None:
            cached = self.input * preset.cached_input_x if preset is not None and preset.cached_input_x is not None else self.input
        write = self.cache_write if self.cache_write is not None else self.input * (preset.cache_write_x if preset else 1.0)
        return cached, write

    def cache_terms(self) -> CacheTerms:
        """The rates with the shortest prefix the provider caches and where that number came from
        (the dry run prints it: a minimum is never assumed silently)."""
        cached, write = self.cache_rates()
        if self.cache_min_tokens is not None:
            minimum, source = self.cache_min_tokens, "the entry"
        elif self.provider is not None:
            minimum, source = PROVIDER_CACHE[self.provider].min_tokens, f"provider {self.provider}'s default"
        else:
            minimum, source = DEFAULT_CACHE_MIN_TOKENS, "assumed: the price names neither cache_min_tokens nor a provider"
        return CacheTerms(cached_input=cached, cache_write=write, min_tokens=minimum, min_tokens_from=source)

    def usage_cost(self, usage: Any) -> float:
        """What one recorded usage (:class:`ray_knowsim.schema.chat.Usage`) cost: every place that
        prices a call prices it here, cache reads and writes included."""
        return self.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens, usage.cache_write_tokens)

    def cost(self, prompt_tokens: int | float, completion_tokens: int | float, cached_prompt_tokens: int | float = 0,
             cache_write_tokens: int | float = 0) -> float:
        cached_rate, write_rate = self.cache_rates()
        cached = min(max(cached_prompt_tokens, 0), prompt_tokens)
        written = min(max(cache_write_tokens, 0), prompt_tokens - cached)
        plain = prompt_tokens - cached - written
        return (plain * self.input + cached * cached_rate + written * write_rate + completion_tokens * self.output) / PER


def usd_text(cost: float | None, priced: int | None = None, of: int | None = None, digits: int = 4) -> str:
    """A cost in words: ``$1.2345``, or :data:`NO_PRICE` when it is unknown (None or NaN; with
    ``priced``/``of`` sessions, how many of them were priced)."""
    if cost is not None and not (isinstance(cost, float) and math.isnan(cost)):
        return f"${cost:,.{digits}f}"
    if priced and of:
        return f"{NO_PRICE} ({priced:,} of {of:,} sessions priced)"
    return NO_PRICE


__all__ = ["PRICED_AT_ZERO", "DEFAULT_CACHE_MIN_TOKENS", "NO_PRICE", "PROVIDER_CACHE", "CacheTerms", "Price", "ProviderCache", "usd_text"]
