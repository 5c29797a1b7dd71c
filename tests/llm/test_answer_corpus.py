"""Parsing fidelity: every reply of the corpus (tests/llm/data/answer_corpus.yaml, the shapes real
models write) reads as the value it must read as, or gets the complaint it must get."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ray_knowsim.llm.parse import extract_json, parse_rating, parse_signal_report, parse_termination, parse_user_turn
from ray_knowsim.schema.graph import IUGraph

CORPUS = yaml.safe_load((Path(__file__).parent / "data" / "answer_corpus.yaml").read_text(encoding="utf-8"))
GRAPH = IUGraph.model_validate({
    "nodes": [{"id": "IU1", "concept": "a"}, {"id": "IU2", "concept": "b"}, {"id": "IU3", "concept": "c"}],
    "edges": [{"from": "IU1", "to": "IU2"}],
})


def _cases(section: str) -> list:
    return [pytest.param(case, id=case["id"]) for case in CORPUS[section]]


def _complaint(result, case: dict) -> None:
    """``result`` failed with the case's named error and every part of its complaint."""
    assert result.error == case["error"], (result.error, result.detail)
    for part in case.get("detail", []):
        assert part in result.detail, (part, result.detail)


def test_the_corpus_covers_the_shapes_models_write():
    ids = {section: {c["id"] for c in cases} for section, cases in CORPUS.items()}
    assert {"prose_newlines", "prose_tab_table", "unicode_escapes", "doubled_backslashes", "single_frac", "single_nabla",
            "single_theta", "tan_in_math", "nu_in_math", "newline_before_u", "tab_an_apple", "escaped_quotes",
            "code_fence_trailing_prose", "truncated_mid_string"} <= ids["json"]
    assert {"scores_as_strings", "fraction_on_unit_field", "marked_percentages", "bare_seventy_on_unit_field",
            "out_of_range", "fenced_with_prose", "latex_and_quotes_in_reasoning", "truncated"} <= ids["rating"]
    for section, cases in CORPUS.items():
        assert len({c["id"] for c in cases}) == len(cases), f"{section}: ids repeat"


@pytest.mark.parametrize("case", _cases("json"))
def test_json_reads_as_meant(case):
    got = extract_json(case["reply"], allow_array=True)
    if "error" in case:
        assert got.error is not None and case["error"] in got.error, got
        return
    assert got.error is None, got.error
    assert got.value == case["value"]
    assert list(got.repairs) == case["repairs"], "every repair is recorded, and only those made"


@pytest.mark.parametrize("case", _cases("rating"))
def test_rating_reads_as_meant(case):
    got = parse_rating(case["reply"])
    if "error" in case:
        _complaint(got, case)
        return
    assert got.ok, got.detail
    for key, want in case["value"].items():
        assert getattr(got.value, key) == pytest.approx(want) if isinstance(want, float) else getattr(got.value, key) == want, key
    assert list(got.repairs) == case["repairs"]


@pytest.mark.parametrize("case", _cases("termination"))
def test_termination_reads_as_meant(case):
    got = parse_termination(case["reply"], case["task"], case["n_turns"])
    if "error" in case:
        _complaint(got, case)
        return
    assert got.ok, got.detail
    assert (got.value.ending_turn, got.value.termination_reason) == (case["value"]["ending_turn"], case["value"]["termination_reason"])
    assert list(got.warnings) == case["warnings"]


@pytest.mark.parametrize("case", _cases("extractor"))
def test_extractor_reads_as_meant(case):
    got = parse_signal_report(case["reply"], GRAPH)
    if "error" in case:
        _complaint(got, case)
        return
    assert got.ok, got.detail
    assert {e.id: e.teaching_quality for e in got.value.entries} == case["value"]
    assert [e.id for e in got.value.entries] == list(case["value"])
    by_id = {e.id: e for e in got.value.entries}
    for iu, text in case.get("text", {}).items():
        assert by_id[iu].teaching_quality_reasoning == text


@pytest.mark.parametrize("case", _cases("user_sim"))
def test_learner_message_reads_as_meant(case):
    got = parse_user_turn(case["reply"])
    if "error" in case:
        assert got.error == case["error"], got
        return
    assert got.ok, got.detail
    assert got.value.message == case["message"]
