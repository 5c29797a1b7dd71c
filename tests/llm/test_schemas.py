"""Output schemas: what the decoding schemas look like, and what validation accepts."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ray_knowsim.model.outputs import (
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
