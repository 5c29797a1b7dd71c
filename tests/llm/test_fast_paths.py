"""The client's fast paths give exactly what the slow paths they skip would give.

Each hot-path shortcut taken for the client's CPU per request (docs/performance.md) is checked
here against the straightforward code it replaces, on generated inputs: reading a reply's JSON
(decoded at C speed when valid, the LaTeX restoration skipped when no escape can have produced a
control character), the flat-object indented JSON of the prompts' state views, a state mapping's
codes, and the request body's bytes.
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ray_knowsim.llm.http.client import encode_body
from ray_knowsim.llm.parse import json_extract
from ray_knowsim.llm.parse.json_extract import JsonExtraction, decode_json, extract_json, fenced_blocks
from ray_knowsim.prompts.views import pretty_json


class _Always:
    """A pattern that matches every text: the LaTeX restoration runs on every decoded value."""

    def search(self, *args, **kwargs):
        return True


def _reference_extract(text, *, allow_array=False) -> JsonExtraction:
    """extract_json with its shortcuts off, as it was before them: the string-aware scan, the
    repairs and the restoration walk on every reply."""
    fast, pattern = json_extract._decoded_at, json_extract._CONTROL_ESCAPE
    json_extract._decoded_at, json_extract._CONTROL_ESCAPE = (lambda body, start: None), _Always()
    try:
        return extract_json(text, allow_array=allow_array)
    finally:
        json_extract._decoded_at, json_extract._CONTROL_ESCAPE = fast, pattern


# strings a model writes: LaTeX commands, escapes, quotes, control characters, non-ASCII
_pieces = st.sampled_from(["\\frac{1}{2}", "\\theta", "\\nabla", "\\nu", "\\tan x", "$\\nu$", "\\(", "\\sqrt2", "\n", "\t",
                           "\r\n", "\"", "\\", "é", "→", "’", "\x0b", "\x1f", "x", " ", "{", "}", "[", "]", ",", "abc", "\\u0041", "\b", "\f"])
_texts = st.lists(_pieces, max_size=8).map("".join)
_scalars = st.one_of(_texts, st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                     st.none())
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(_texts, inner, max_size=4)), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(value=st.dictionaries(_texts, _values, max_size=5), before=_texts, after=_texts, fenced=st.booleans(),
       allow_array=st.booleans(), mangle=st.sampled_from(["", "latex", "comma", "cut", "u_escapes"]), ascii=st.booleans())
def test_extract_json_fast_path_equals_the_scan(value, before, after, fenced, allow_array, mangle, ascii):
    text = json.dumps(value, ensure_ascii=ascii)  # ascii: non-ASCII as \\uXXXX escapes, which need no restoration
    if mangle == "u_escapes":  # control characters written as \\u00XX, which do
        for short, long in (("\\b", "\\u0008"), ("\\f", "\\u000C"), ("\\n", "\\u000a"), ("\\t", "\\u0009"), ("\\r", "\\u000D")):
            text = text.replace(short, long)
    elif mangle == "latex":  # a model's raw LaTeX: backslashes JSON refuses or misreads
        text = text.replace("\\\\", "\\")
    elif mangle == "comma":
        text = text.replace("}", ",}", 1)
    elif mangle == "cut":
        text = text[: len(text) // 2]
    reply = f"{before}```json\n{text}\n```{after}" if fenced else f"{before}{text}{after}"
    assert extract_json(reply, allow_array=allow_array) == _reference_extract(reply, allow_array=allow_array)


@settings(max_examples=100, deadline=None)
@given(items=st.lists(_values, max_size=4), before=_texts)
def test_extract_json_fast_path_equals_the_scan_for_arrays(items, before):
    reply = before.lstrip("{[") + json.dumps(items)
    for allow in (True, False):
        assert extract_json(reply, allow_array=allow) == _reference_extract(reply, allow_array=allow)


#: what a fenced block was before fenced_blocks: a lazy scan to the closing backticks
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["`", "``", "```", "````", "```json", "```py-3_x", "json", " ", "\t", "\n", "\r\n", "x",
                                 "{", "}", "[", "é", "-", "_"]), max_size=24).map("".join))
def test_fenced_blocks_are_the_lazy_regex_groups(text):
    assert list(fenced_blocks(text)) == [m.group(1) for m in _FENCE.finditer(text)]


def test_a_valid_reply_with_escaped_latex_still_gets_its_backslashes_back():
    reply = json.dumps({"note": "\f" + "rac{1}{2} and \theta"})  # what JSON made of \frac and \theta
    got = extract_json(reply)
    assert got.value == {"note": "\\frac{1}{2} and \\theta"}
    assert got.repairs == ("latex_from_escapes:\\frac,\\theta",)
    assert decode_json(reply) == (got.value, got.repairs, None)


@settings(max_examples=100, deadline=None)
@given(value=st.one_of(st.dictionaries(_texts, _scalars, max_size=8), st.dictionaries(_texts, _values, max_size=4)))
def test_pretty_json_is_json_dumps_indent_1(value):
    assert pretty_json(value) == json.dumps(value, ensure_ascii=False, indent=1)


@settings(max_examples=60, deadline=None)
@given(value=st.dictionaries(_texts, _values, max_size=5))
def test_request_body_bytes_decode_to_the_body(value):
    assert json.loads(encode_body(value)) == value


def test_the_extractor_asks_with_one_shared_schema_per_graph_that_sending_leaves_as_it_was():
    """render_extractor shares one schema object per graph instead of decoding a copy per request:
    it must be the schema signal_report_schema gives, and building the HTTP body (full and portable
    subset, json_schema and json_object forms) must not edit it."""
    from ray_knowsim.llm.http.client import OpenAICompatibleModel
    from ray_knowsim.llm.http.config import HTTPModelConfig
    from ray_knowsim.prompts.render import render_extractor
    from ray_knowsim.schema.graph import build_index
    from ray_knowsim.schema.outputs import shared_signal_report_schema, signal_report_schema
    from ray_knowsim.demo import demo_graphs, demo_items

    item = demo_items("math")[0]
    graph = demo_graphs("math")[item.id]
    index = build_index(graph, item.id)
    states = {v: 0 for v in index.ids}
    first = render_extractor(item, graph, states, [], "u", "a", index=index)
    second = render_extractor(item, graph, states, [["user", "u"], ["assistant", "a"]], "u2", "a2", index=index)
    fresh = signal_report_schema(graph)
    assert first.json_schema == fresh and second.json_schema == fresh
    assert first.json_schema["properties"] is second.json_schema["properties"]  # shared, not copied
    for structured in ("json_schema", "json_object"):
        for subset in ("full", "portable"):
            model = OpenAICompatibleModel(HTTPModelConfig(base_url="http://127.0.0.1:9/v1", model="m",
                                                          structured_output=structured, schema_subset=subset))
            encode_body(model.build_payload(first))
    assert shared_signal_report_schema(graph) == fresh == signal_report_schema(graph)


def test_shared_objects_are_written_from_their_bytes_exactly_as_in_place_and_the_body_is_left_alone():
    """encode_body writes a shared read-only object (a graph's schema, the offline facts' graph)
    from its JSON fragment: the bytes must be those orjson writes for the object in place, at its
    key's position, and the body handed in must not be edited."""
    import copy

    import orjson

    from ray_knowsim.llm.http.wire import OFFLINE_FACTS_FIELD
    from ray_knowsim.schema.outputs import share_json, shared_json_fragment

    schema = share_json({"type": "object", "properties": {"x": {"type": "string", "const": "caf\u00e9"}}})
    graph = share_json({"nodes": [{"id": "IU1", "concept": "\u2014 \"q\""}], "edges": []})
    assert shared_json_fragment(schema) is not None and shared_json_fragment(dict(schema)) is None
    bodies = [
        {"model": "m", "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": True}},
         OFFLINE_FACTS_FIELD: {"role": "extractor", "graph": graph, "turn": 2}, "seed": 1},
        {"model": "m", "response_format": {"type": "json_object", "schema": schema}, "max_tokens": 9},
        {"model": "m", OFFLINE_FACTS_FIELD: {"graph": graph}},
        {"model": "m", "response_format": {"type": "json_object", "schema": dict(schema)}},  # not shared
    ]
    for body in bodies:
        before = copy.deepcopy(body)
        assert encode_body(body) == orjson.dumps(before, option=orjson.OPT_NON_STR_KEYS)
        assert body == before
    assert bodies[0]["response_format"]["json_schema"]["schema"] is schema and bodies[2][OFFLINE_FACTS_FIELD]["graph"] is graph


# bodies a server sends: any JSON text json reads, wide integers (orjson reads those outside 64 bits
# as floats), and the texts orjson refuses and json reads (NaN, Infinity, a lone surrogate)
_numbers = st.one_of(st.integers(), st.integers(2**63 - 3, 2**64 + 3), st.integers(-(2**63) - 3, -(2**63) + 3),
                     st.floats(allow_nan=False, allow_infinity=False))
_body_values = st.recursive(st.one_of(_texts, _numbers, st.booleans(), st.none()),
                            lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_texts, inner, max_size=4)),
                            max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(usage=st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "prompt_tokens_details", "x"]),
                             _body_values, max_size=4),
       rest=_body_values, extra=st.sampled_from(["", "NaN", "Infinity", '"\\ud800"', "1e400"]))
def test_a_body_decodes_as_json_reads_it_and_reads_as_the_same_answer(usage, rest, extra):
    from ray_knowsim.llm.http.response import ResponseReader, decode_body

    body = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": usage, "rest": rest}
    text = json.dumps(body)
    if extra:
        text = text[:-1] + f', "extra": {extra}}}'
    raw = text.encode("utf-8")
    expected = json.loads(raw)
    got = decode_body(raw)
    assert repr(got) == repr(expected)  # every value of the same type, keys in the same order (NaN included)
    assert repr(ResponseReader("t", None).read(raw)) == repr(_json_read(raw))


def _json_read(raw: bytes):
    """The reader as it was: json decoding every body."""
    from ray_knowsim.llm.http import response

    fast, response.decode_body = response.decode_body, _json_or_none
    try:
        return response.ResponseReader("t", None).read(raw)
    finally:
        response.decode_body = fast


def _json_or_none(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return None


def test_a_body_json_cannot_read_is_none_and_utf16_or_a_bom_still_decodes():
    from ray_knowsim.llm.http.response import decode_body

    assert decode_body(b"{not json") is None
    assert decode_body(b"") is None
    assert decode_body(b"\xff\xfe") is None
    assert decode_body('{"a": "é"}'.encode("utf-16")) == {"a": "é"}
    assert decode_body(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}
    wide = b'{"usage": {"prompt_tokens": 123456789012345678901234567890}, "n": [-9223372036854775809]}'
    assert decode_body(wide) == {"usage": {"prompt_tokens": 123456789012345678901234567890}, "n": [-9223372036854775809]}
    assert decode_body(b'{"a": 1, "b": 2, "a": 3}') == {"a": 3, "b": 2} and list(decode_body(b'{"a": 1, "b": 2, "a": 3}')) == ["a", "b"]


def _reference_code(value):
    """views._code as it was before its shortcut for an in-range ordinal: every check, in order."""
    from collections.abc import Mapping

    from ray_knowsim.schema.states import KNOWS_WELL, UNAWARE, state_value

    if isinstance(value, Mapping):
        value = value.get("state")
    if isinstance(value, bool):
        return UNAWARE
    if isinstance(value, int):
        if not UNAWARE <= value <= KNOWS_WELL:
            raise ValueError(f"state ordinal out of range: {value}")
        return value
    return state_value(value)


def _reference_state_codes(index, states):
    """views.state_codes of a mapping with every value through the checks of :func:`_reference_code`."""
    return {node_id: _reference_code(states[label]) if label in states else _reference_code(states.get(node_id))
            for node_id, label in zip(index.ids, index.labels)}


_STATE_VALUES = st.one_of(st.integers(-2, 5), st.booleans(), st.none(),
                          st.sampled_from(["unaware", "struggling", "partial_understanding", "knows_well", "KNOWS_WELL", "nope"]),
                          st.fixed_dictionaries({"state": st.sampled_from(["struggling", "knows_well", 2])}))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_state_codes_shortcut_equals_the_code_of_every_value(data):
    """A state mapping's in-range ordinals are taken as they are; every other value (a bool, an
    ordinal out of range, a name, a KS entry, None) still goes through _code, with its error."""
    from ray_knowsim.prompts.views import state_codes
    from ray_knowsim.schema.graph import IUGraph, build_index

    n = data.draw(st.integers(1, 6))
    graph = IUGraph.model_validate({"nodes": [{"id": f"IU{k}", "concept": data.draw(st.sampled_from(["", f"c{k}"]))}
                                              for k in range(1, n + 1)], "edges": []})
    index = build_index(graph, "item")
    keys = st.sampled_from([*index.ids, *index.labels])
    states = data.draw(st.dictionaries(keys, _STATE_VALUES, max_size=2 * n))

    def outcome(fn):
        try:
            return fn(index, states)
        except ValueError as exc:
            return ("error", type(exc), str(exc))

    assert outcome(state_codes) == outcome(_reference_state_codes)
