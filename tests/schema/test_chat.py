"""The chat request type (schema/chat.py)."""

from __future__ import annotations


def test_with_fields_equals_dataclasses_replace():
    """with_fields (the request copies of sim/ask.py) is dataclasses.replace: every field equal,
    the original untouched, the same type, unknown fields refused."""
    import dataclasses

    import pytest

    from ray_knowsim.schema.chat import ChatRequest, with_fields

    base = ChatRequest(messages=({"role": "user", "content": "hi"},), role="extractor", temperature=0.3, max_tokens=77,
                       seed=5, json_schema={"type": "object"}, schema_name="report", prompt_version="x@v1",
                       request_id="s#1:extractor", offline_facts={"a": 1})
    for changes in ({}, {"seed": 9}, {"max_tokens": 12, "temperature": 0.0}, {"seed": None, "request_id": "r"},
                    {"messages": ()}, {"offline_facts": None}):
        got, want = with_fields(base, **changes), dataclasses.replace(base, **changes)
        assert type(got) is ChatRequest and got == want and got is not base
        assert {f.name: getattr(got, f.name) for f in dataclasses.fields(ChatRequest)} == \
               {f.name: getattr(want, f.name) for f in dataclasses.fields(ChatRequest)}
    assert base.seed == 5 and base.max_tokens == 77
    with pytest.raises(dataclasses.FrozenInstanceError):
        with_fields(base, seed=1).seed = 2
    with pytest.raises(TypeError):
        with_fields(base, sead=1)


def test_usage_of_every_convention_reads_as_openai_counts_it():
    """prompt_tokens holds every prompt token, cached and written ones among them, whichever way
    the provider said it: Anthropic's own input_tokens is the uncached remainder."""
    from ray_knowsim.schema.chat import usage_from_wire

    def seen(raw):
        u = usage_from_wire(raw)
        return u.prompt_tokens, u.completion_tokens, u.cached_prompt_tokens, u.cache_write_tokens

    # OpenAI / Gemini / vLLM
    assert seen({"prompt_tokens": 2006, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1920}}) == (2006, 300, 1920, 0)
    # Anthropic's Messages API (third call of a marked prompt: 9 uncached, 17,102 read)
    assert seen({"input_tokens": 9, "output_tokens": 8, "cache_read_input_tokens": 17102, "cache_creation_input_tokens": 0}) == (17111, 8, 17102, 0)
    assert seen({"input_tokens": 9, "output_tokens": 4, "cache_creation_input_tokens": 17102}) == (17111, 4, 0, 17102)
    # LiteLLM passing Anthropic through: OpenAI's prompt_tokens (all of them) plus the write count
    assert seen({"prompt_tokens": 2006, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1000},
                 "cache_creation_input_tokens": 900, "cache_read_input_tokens": 1000}) == (2006, 300, 1000, 900)
    # OpenRouter: the write count in the details
    assert seen({"prompt_tokens": 3000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 2800}}) == (3000, 5, 0, 2800)
    # a prompt count too small to hold its cache counts does not hold them
    assert seen({"prompt_tokens": 9, "completion_tokens": 8, "cache_read_input_tokens": 17102}) == (17111, 8, 17102, 0)
    assert usage_from_wire({"completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 2}}).reasoning_tokens == 2


def test_usage_adds_cache_writes():
    from ray_knowsim.schema.chat import Usage

    u = Usage(10, 1, 2, cache_write_tokens=3)
    u.add(Usage(5, 1, 0, cache_write_tokens=4))
    assert (u.prompt_tokens, u.cache_write_tokens) == (15, 7)
