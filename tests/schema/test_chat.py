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
