"""Output schemas: what the decoding schemas look like, and what validation accepts."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ray_knowsim.schema.outputs import (
    BaselineCoTTurn,
    BaselineTurn,
    GraphExtraction,
    InteractionRating,
    SignalReport,
    TerminationJudgement,
    UserTurn,
    termination_reasons,
)

MODELS = [UserTurn, BaselineTurn, BaselineCoTTurn, SignalReport, GraphExtraction, InteractionRating, TerminationJudgement]


def _objects(node):
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for v in node.values():
            yield from _objects(v)
    elif isinstance(node, list):
        for v in node:
            yield from _objects(v)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_decoding_schemas_are_self_contained_strict_and_portable(model):
    schema = model.json_schema()
    text = json.dumps(schema)
    for banned in ("$ref", "$defs", '"title"', '"default"', '"minimum"', '"maximum"', '"minItems"', '"minLength"'):
        assert banned not in text, banned
    objects = list(_objects(schema))
    assert objects
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])


def test_signal_schema_enumerates_the_spec_labels():
    entry = SignalReport.json_schema()["properties"]["iu_analysis"]["items"]["properties"]
    assert entry["teaching_quality"]["enum"] == ["well_explained", "shallow", "not_mentioned"]
    assert entry["user_attempt_type"]["enum"] == ["reasoning", "articulation", "none"]
    assert "confirmed_incorrect_no_explanation" in entry["assistant_response_role"]["enum"]


def test_graph_schema_uses_the_cache_field_names():
    edge = GraphExtraction.json_schema()["properties"]["edges"]["items"]["properties"]
    assert list(edge) == ["from", "to", "delta_l", "reason"]
    g = GraphExtraction.model_validate({"nodes": [{"id": "IU1", "concept": "c", "abstraction_level": 0.5, "description": "d"}],
                                        "edges": [{"from": "IU1", "to": "IU1", "delta_l": 0}]})
    assert g.edges[0].source == "IU1"
    with pytest.raises(ValidationError):
        GraphExtraction.model_validate({"nodes": [{"id": "IU1", "concept": "c", "abstraction_level": 1.5, "description": "d"}]})
    with pytest.raises(ValidationError):
        GraphExtraction.model_validate({"nodes": []})


def test_rating_bounds_are_enforced_on_validation():
    ok = {"information_calibration": 0.5, "perceived_overload": 0.1, "quality_score": 7, "perceived_learning": 6}
    assert InteractionRating.model_validate(ok).quality_score == 7.0
    for key, bad in (("information_calibration", 1.2), ("quality_score", 0), ("perceived_learning", 11)):
        with pytest.raises(ValidationError):
            InteractionRating.model_validate({**ok, key: bad})


def test_termination_reasons_per_task():
    assert termination_reasons("math") == ("problem_completion", "problem_shift", "circular_queries", "max_turns")
    assert termination_reasons("expertqa") == ("comprehension_satisfied", "unproductive_stalling", "max_turns")
    assert TerminationJudgement.json_schema_for("expertqa")["properties"]["termination_reason"]["enum"][0] == "comprehension_satisfied"
    with pytest.raises(ValueError):
        termination_reasons("chess")


def test_user_turn_defaults_and_extra_keys():
    t = UserTurn.model_validate({"message": "hi", "mood": "calm"})
    assert (t.thought, t.attempt_verify, t.terminate) == ("", False, False)
    assert UserTurn.model_validate({"message": "x", "terminate": "true"}).terminate is True
    with pytest.raises(ValidationError):
        UserTurn.model_validate({"thought": "only"})


def test_per_request_signal_schema_fixes_every_iu_once_with_enums_and_no_text_bound():
    import jsonschema

    from ray_knowsim.demo import demo_graphs, demo_items
    from ray_knowsim.schema.outputs import V2_REASONING_MAX_CHARS, signal_report_schema
    from ray_knowsim.prompts.render import render_extractor

    graph = next(iter(demo_graphs("math").values()))
    schema = signal_report_schema(graph)
    listing = schema["properties"]["iu_analysis"]
    n = len(graph.nodes)
    assert listing["minItems"] == listing["maxItems"] == n and listing["items"] is False and "items" in listing
    assert [s["properties"]["id"]["const"] for s in listing["prefixItems"]] == [v.id for v in graph.nodes]
    assert [s["properties"]["concept"]["const"] for s in listing["prefixItems"]] == [v.concept for v in graph.nodes]
    for slot in listing["prefixItems"]:
        p = slot["properties"]
        assert slot["additionalProperties"] is False and slot["required"] == list(p)
        assert p["teaching_quality"]["enum"] == ["well_explained", "shallow", "not_mentioned"]
        assert "maxLength" not in p["user_attempt_reasoning"] and "maxLength" not in p["teaching_quality_reasoning"]
    jsonschema.Draft202012Validator.check_schema(schema)

    def entry(node, **kw):
        e = {"id": node.id, "concept": node.concept, "teaching_quality_reasoning": "r", "teaching_quality": "shallow",
             "user_attempt_reasoning": "", "user_attempt_type": "none", "assistant_response_role": "ignored"}
        e.update(kw)
        return e

    v = jsonschema.Draft202012Validator(schema)
    good = [entry(node) for node in graph.nodes]
    assert not list(v.iter_errors({"iu_analysis": good}))
    for bad in (good[1:], good + [good[0]], [entry(graph.nodes[0], id="IU99")] + good[1:],
                [entry(graph.nodes[0], teaching_quality=None)] + good[1:], list(reversed(good))):
        assert list(v.iter_errors({"iu_analysis": bad}))
    long_reason = [entry(graph.nodes[0], teaching_quality_reasoning="x" * 5000)] + good[1:]
    assert not list(v.iter_errors({"iu_analysis": long_reason}))  # a rationale is never cut (spec §12.8)
    bounded = jsonschema.Draft202012Validator(signal_report_schema(graph, reasoning_max_chars=V2_REASONING_MAX_CHARS))
    assert list(bounded.iter_errors({"iu_analysis": long_reason}))  # what v1/v2 requests were sent with
    # the extractor request carries exactly this schema
    item = next(i for i in demo_items("math") if i.id in demo_graphs("math") and demo_graphs("math")[i.id] is graph)
    req = render_extractor(item, graph, {}, [], "hi", "hello")
    assert req.json_schema == schema and req.schema_name == "SignalReport"
    old = render_extractor(item, graph, {}, [], "hi", "hello", prompts="v2")
    assert old.json_schema == signal_report_schema(graph, reasoning_max_chars=V2_REASONING_MAX_CHARS)


def test_learner_schemas_bound_free_text_only_when_asked():
    from ray_knowsim.schema.outputs import V2_TEXT_BOUNDS

    for model in (UserTurn, BaselineTurn, BaselineCoTTurn):
        assert "maxLength" not in json.dumps(model.json_schema())  # prompt set v3: nothing cut mid-sentence
        props = model.json_schema(text_bounds=V2_TEXT_BOUNDS)["properties"]
        assert props["message"]["maxLength"] == V2_TEXT_BOUNDS["message"]
        assert props.get("thought", {}).get("maxLength") == (V2_TEXT_BOUNDS["thought"] if "thought" in props else None)


def test_portable_schema_keeps_the_facts_within_the_common_subset():
    from ray_knowsim.demo import demo_graphs
    from ray_knowsim.schema.outputs import portable_schema, signal_report_schema

    graph = next(iter(demo_graphs("math").values()))
    full = signal_report_schema(graph)
    portable = portable_schema(full)
    text = json.dumps(portable)
    for banned in ("prefixItems", "maxLength", "minItems", "maxItems", '"const"'):
        assert banned not in text, banned
    entry = portable["properties"]["iu_analysis"]["items"]
    assert entry["properties"]["id"]["enum"] == [n.id for n in graph.nodes]
    assert entry["properties"]["teaching_quality"]["enum"] == ["well_explained", "shallow", "not_mentioned"]
    assert entry["additionalProperties"] is False and entry["required"] == list(entry["properties"])
    bounded = signal_report_schema(graph, reasoning_max_chars=240)
    assert "maxLength" in json.dumps(bounded) and "maxLength" not in json.dumps(portable_schema(bounded))
    assert full == signal_report_schema(graph)  # the input is untouched
    assert "maxLength" not in json.dumps(portable_schema(UserTurn.json_schema(text_bounds={"message": 300})))
