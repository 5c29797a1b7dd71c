"""A price states its cache terms: what a cached and a written prompt token cost and the shortest
prefix its provider caches; defaults come from the documented provider table, never unstated."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ray_knowsim.schema.price import DEFAULT_CACHE_MIN_TOKENS, PROVIDER_CACHE, Price


def test_a_cache_write_premium_is_billed_on_the_written_tokens():
    price = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    # 1M prompt: 500k read, 100k written, 400k plain; 10k completion
    assert price.cost(1_000_000, 10_000, 500_000, 100_000) == pytest.approx(0.4 * 3.0 + 0.5 * 0.3 + 0.1 * 3.75 + 0.01 * 15.0)


def test_without_cache_fields_a_price_has_no_discount_and_no_premium():
    price = Price(input=2.0, output=8.0)
    assert price.cost(1000, 0, 500, 200) == price.cost(1000, 0)
    terms = price.cache_terms()
    assert (terms.cached_input, terms.cache_write, terms.min_tokens) == (2.0, 2.0, DEFAULT_CACHE_MIN_TOKENS)
    assert terms.min_tokens_from.startswith("assumed")


def test_a_provider_fills_what_the_entry_leaves_out_and_the_entry_wins():
    anthropic = Price(input=3.0, output=15.0, provider="anthropic")
    terms = anthropic.cache_terms()
    assert (terms.cached_input, terms.cache_write, terms.min_tokens) == pytest.approx((0.3, 3.75, 1024))
    assert terms.min_tokens_from == "provider anthropic's default"
    haiku = Price(input=1.0, output=5.0, provider="anthropic", cache_min_tokens=4096, cache_write=2.0)
    assert (haiku.cache_terms().min_tokens, haiku.cache_terms().cache_write, haiku.cache_terms().min_tokens_from) == (4096, 2.0, "the entry")
    # OpenAI's cached price is per model: without cached_input there is no discount, only the minimum
    openai = Price(input=1.25, output=10.0, provider="openai").cache_terms()
    assert (openai.cached_input, openai.cache_write, openai.min_tokens) == (1.25, 1.25, 1024)
    assert PROVIDER_CACHE["deepseek"].min_tokens == 64


@pytest.mark.parametrize("bad", [{"cached_input": 3.0}, {"provider": "acme"}, {"cache_min_tokens": -1}, {"cache_write": -0.1}])
def test_a_price_that_cannot_be_right_is_refused(bad):
    with pytest.raises(ValidationError):
        Price(input=2.0, output=8.0, **bad)
