"""The turn row's signal JSON: one serializer call for the list, the bytes each entry's own dump gave."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.sim.rows import signals_json

_TEXT = st.text(max_size=12)  # any characters: non-ASCII, quotes, escapes, surrogate-free


@st.composite
def _entry(draw) -> SignalEntry:
    extra = draw(st.dictionaries(st.sampled_from(["note", "score", "flag", "tags"]),
                                 st.one_of(_TEXT, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(),
                                           st.lists(_TEXT, max_size=2)), max_size=2))
    return SignalEntry(id=draw(st.one_of(st.none(), _TEXT)), concept=draw(_TEXT),
                       teaching_quality=draw(st.sampled_from(["well_explained", "shallow", "not_mentioned", "wrong"])),
                       user_attempt_type=draw(st.sampled_from(["none", "reasoning", "articulation"])), **extra)


@settings(max_examples=200, deadline=None)
@given(st.lists(_entry(), max_size=5))
def test_signal_json_is_each_entrys_own_dump(entries):
    assert signals_json(entries) == json.dumps([e.model_dump(mode="json") for e in entries], ensure_ascii=False)


def test_a_subclassed_entry_keeps_its_own_fields():
    class Tagged(SignalEntry):
        source: str = "replay"

    entries = [SignalEntry(id="a"), Tagged(id="b")]
    out = json.loads(signals_json(entries))
    assert out[1]["source"] == "replay"
    assert signals_json(entries) == json.dumps([e.model_dump(mode="json") for e in entries], ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(_entry(), max_size=5), st.data())
def test_entries_without_extras_read_in_place_dump_as_the_model_dumps_them(entries, data):
    plain = [SignalEntry(**{k: v for k, v in e.model_dump().items() if k in SignalEntry.model_fields}) for e in entries]
    mixed = plain + entries[: data.draw(st.integers(0, len(entries)))]  # with extras too: the list serializer
    for group in (plain, mixed):
        assert signals_json(group) == json.dumps([e.model_dump(mode="json") for e in group], ensure_ascii=False)


def test_graph_json_is_the_graphs_json_written_once_per_graph():
    import json as _json

    from ray_knowsim.demo import demo_graphs
    from ray_knowsim.sim.rows import graph_json

    graph = next(iter(demo_graphs().values()))
    text = graph_json(graph)
    assert text == _json.dumps(graph.to_json_dict(), ensure_ascii=False)
    assert graph_json(graph) is text  # found again, not written again
    other = graph.model_copy(deep=True)
    assert graph_json(other) == text and graph_json(other) is not text  # another object: its own entry
