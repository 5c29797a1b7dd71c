"""Tolerant parsing: JSON extraction, the spec's drifts, named failures, and the retry message."""

from __future__ import annotations

import json

from ray_knowsim.demo import demo_graphs
from ray_knowsim.llm.parse import (
    extract_json,
    parse_graph_extraction,
    parse_rating,
    parse_signal_report,
    parse_termination,
    parse_user_turn,
    repair_backslashes,
)
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.prompts.repair import build_retry
from ray_knowsim.schema.graph import IUGraph

GRAPH = IUGraph.model_validate({
    "nodes": [{"id": "IU1", "concept": "a"}, {"id": "IU2", "concept": "b"}, {"id": "IU3", "concept": "c"}],
    "edges": [{"from": "IU1", "to": "IU2"}],
})


def _entry(i, tq="shallow", **extra):
    base = {"id": i, "concept": i, "teaching_quality_reasoning": "r", "teaching_quality": tq,
            "user_attempt_reasoning": "", "user_attempt_type": "none", "assistant_response_role": "not_applicable"}
    base.update(extra)
    return base


# --- extraction ----------------------------------------------------------------------------


def test_fenced_block_and_surrounding_text():
    text = 'Sure! Here it is:\n```json\n{"message": "hi", "terminate": false}\n```\nHope that helps.'
    got = extract_json(text)
    assert got.value == {"message": "hi", "terminate": False} and "fenced_block" in got.repairs
    got = extract_json('I think {"a": {"b": [1, 2]}} and then {"c": 3}')
    assert got.value == {"a": {"b": [1, 2]}} and "surrounding_text" in got.repairs


def test_brace_matching_ignores_braces_and_quotes_inside_strings():
    text = '{"message": "a } b \\" { c", "thought": "x"} trailing }'
    assert extract_json(text).value == {"message": 'a } b " { c', "thought": "x"}


def test_latex_backslashes_are_repaired():
    # \sqrt is not a JSON escape (decode error); \frac and \times decode as control characters no
    # message holds before letters; "\nbreak" is a newline before a word
    raw = '{"message": "so $\\sqrt{9} = 3$ and $\\frac{1}{2} \\times 4 = 2$, line\\nbreak"}'
    got = extract_json(raw)
    assert got.value["message"] == "so $\\sqrt{9} = 3$ and $\\frac{1}{2} \\times 4 = 2$, line\nbreak"
    assert got.repairs == ("literal_backslashes:\\sqrt", "latex_from_escapes:\\frac,\\times")
    assert extract_json('{"m": "\\u00e9 \\\\frac"}').value == {"m": "é \\frac"}  # valid escapes kept
    # only backslashes that start no JSON escape are doubled before decoding
    assert repair_backslashes('"\\alpha \\neq \\nu \\n \\nothing \\u00e9 \\ubar"') == (
        '"\\\\alpha \\neq \\nu \\n \\nothing \\u00e9 \\\\ubar"')


def test_a_repair_never_changes_what_decodes_as_meant():
    # a newline before "u = x+1" and a tab before "an apple" are what JSON says they are
    assert extract_json('{"m": "so\\nu = x+1"}').value == {"m": "so\nu = x+1"}
    assert extract_json('{"m": "\\tan apple"}').value == {"m": "\tan apple"}
    # the same letters inside math, or before an argument, can only be LaTeX
    assert extract_json('{"m": "$\\nu = x+1$"}').value == {"m": "$\\nu = x+1$"}
    assert extract_json('{"m": "\\tan{x}"}').value == {"m": "\\tan{x}"}
    # a form feed or backspace before letters is never meant; a lone carriage return before a command neither
    got = extract_json('{"m": "\\fx \\bq \\rho", "k": ["\\rnot a command"]}')
    assert got.value == {"m": "\\fx \\bq \\rho", "k": ["\rnot a command"]}
    assert got.repairs == ("latex_from_escapes:\\fx,\\bq,\\rho",)
    # what decoded is walked everywhere: nested lists and keys too
    assert extract_json('{"\\theta": [{"x": "\\beta"}]}').value == {"\\theta": [{"x": "\\beta"}]}


def test_trailing_commas_and_failures_are_named():
    assert extract_json('{"a": [1, 2,], }').value == {"a": [1, 2]}
    assert extract_json("").error == "the reply is empty"
    assert "no JSON object" in extract_json("just words").error
    assert "not closed" in extract_json('{"a": [1, 2').error
    assert "invalid JSON at line 1" in extract_json('{"a": nope}').error


# --- user simulator --------------------------------------------------------------------------


def test_user_turn_parsing_and_drift():
    ok = parse_user_turn('```json\n{"thought": "t", "message": "I get 19.", "attempt_verify": true, "terminate": "false"}\n```')
    assert ok.ok and ok.value.message == "I get 19." and ok.value.attempt_verify and not ok.value.terminate
    renamed = parse_user_turn('{"thinking": "t", "response": "hello"}')
    assert renamed.value.message == "hello" and renamed.value.thought == "t"
    assert "renamed:response->message" in renamed.repairs
    xml = parse_user_turn("<thought>hmm</thought>\n<message>What is w?</message>\n<terminate>false</terminate>")
    assert xml.ok and xml.value.message == "What is w?" and xml.repairs == ("xml_tags",)


def test_user_turn_failures():
    assert parse_user_turn("").error == "user_sim_empty"
    thought_only = parse_user_turn('{"thought": "I should ask", "message": "  "}')
    assert thought_only.error == "user_sim_empty" and "thought-only" in thought_only.detail
    assert parse_user_turn("no json here").error == "user_sim_invalid_json"
    bad = parse_user_turn('{"message": ["a"]}')
    assert bad.error == "user_sim_invalid_output" and bad.detail.startswith("message:")
    assert parse_user_turn("nothing", role="baseline").error == "baseline_invalid_json"


# --- signal reports --------------------------------------------------------------------------


def test_complete_report_parses_in_order():
    text = json.dumps({"iu_analysis": [_entry("IU2", "well_explained"), _entry("IU1"), _entry("IU3", "not_mentioned")]})
    res = parse_signal_report(text, GRAPH)
    assert res.ok and res.warnings == () and res.repairs == ()
    assert [e.id for e in res.value.entries] == ["IU2", "IU1", "IU3"]
    assert [e.teaching_quality for e in res.value.entries] == ["well_explained", "shallow", "not_mentioned"]


def test_harmless_drift_is_normalised_and_recorded():
    g = IUGraph.model_validate({"nodes": [{"id": "IU1", "concept": "Equivalent fractions"}, {"id": "IU2", "concept": "b"},
                                          {"id": "IU3", "concept": "c"}, {"id": "IU4", "concept": "d"}], "edges": []})
    entries = [_entry("iu1", " Well Explained "), _entry("IU 2", "SHALLOW"), _entry("IU3: c", user_attempt_type="Reasoning"),
               _entry(4, "not-mentioned", concept="d")]
    res = parse_signal_report(json.dumps({"iu_analysis": entries}), g)
    assert res.ok, res.detail
    assert [(e.id, e.teaching_quality) for e in res.value.entries] == [
        ("IU1", "well_explained"), ("IU2", "shallow"), ("IU3", "shallow"), ("IU4", "not_mentioned")]
    assert res.value.entries[2].user_attempt_type == "reasoning"
    assert set(res.repairs) == {
        "id:'iu1'->IU1", "label:IU1.teaching_quality:' Well Explained '->well_explained", "id:'IU 2'->IU2",
        "label:IU2.teaching_quality:'SHALLOW'->shallow", "id:'IU3: c'->IU3", "label:IU3.user_attempt_type:'Reasoning'->reasoning",
        "id:4->IU4", "label:IU4.teaching_quality:'not-mentioned'->not_mentioned"}
    by_concept = [_entry("Equivalent Fractions"), _entry("IU2"), _entry("IU3"), _entry("IU4")]
    res = parse_signal_report(json.dumps(by_concept), g)
    assert res.ok and res.value.entries[0].id == "IU1" and "id:'Equivalent Fractions'->IU1" in res.repairs


def test_field_name_drift_and_arrow_labels_are_repaired():
    raw = [
        {"id": "IU1", "teaching_quality_reasoning": "defined and motivated -> well_explained", "user_attempt": "reasoning",
         "assistant_role": "confirmed_correct"},
        {"id": "IU2", "teaching_quality": "shallow", "attempted_by_user": True, "assistant_reasoning_role": "ignored"},
        {"id": "IU3", "teaching_quality": "not_mentioned", "user_attempt_type": "none", "assistant_response_role": "ignored",
         "teaching_quality_reasoning": None},
    ]
    res = parse_signal_report("```\n" + json.dumps({"analysis": raw}) + "\n```", GRAPH)
    assert res.ok, res.detail
    e1, e2, e3 = res.value.entries
    assert (e1.teaching_quality, e1.user_attempt_type, e1.assistant_response_role) == ("well_explained", "reasoning", "confirmed_correct")
    assert (e2.user_attempt_type, e2.assistant_response_role) == ("reasoning", "ignored")
    assert e3.teaching_quality == "not_mentioned" and e3.teaching_quality_reasoning == ""
    for r in ("renamed:analysis->iu_analysis", "renamed:assistant_role->assistant_response_role",
              "renamed:user_attempt->user_attempt_type", "teaching_quality_from_reasoning:IU1", "fenced_block",
              "legacy:attempted_by_user->user_attempt_type:entry 2", "null_text:IU3.teaching_quality_reasoning"):
        assert r in res.repairs


def test_drift_that_is_not_harmless_is_refused_with_a_precise_detail():
    cases = {
        "unknown id": ([_entry("IU1"), _entry("IU2"), _entry("IU3"), _entry("IU12")], ["'IU12' is not an IU of this graph"]),
        "missing IU": ([_entry("IU1"), _entry("IU3")], ["IU2 is missing"]),
        "duplicate": ([_entry("IU1"), _entry("IU2"), _entry("IU2", "well_explained"), _entry("IU3")], ["IU2 appears 2 times"]),
        "null label": ([_entry("IU1", None), _entry("IU2"), _entry("IU3")], ["IU1: teaching_quality null is not one of"]),
        "unknown label": ([_entry("IU1"), _entry("IU2", "excellent"), _entry("IU3")], ["IU2: teaching_quality 'excellent' is not one of"]),
        "unknown role": ([_entry("IU1", assistant_response_role="praised"), _entry("IU2"), _entry("IU3")],
                         ["IU1: assistant_response_role 'praised'"]),
        "missing label": ([{"id": "IU1", "teaching_quality_reasoning": "no arrow"}, _entry("IU2"), _entry("IU3")],
                          ["IU1: teaching_quality is missing", "IU1: user_attempt_type is missing"]),
        "no id": ([_entry(None), _entry("IU1"), _entry("IU2"), _entry("IU3")], ["entry 1 has no id"]),
        "not an object": (["IU1", _entry("IU1"), _entry("IU2"), _entry("IU3")], ["entry 1 is not an object"]),
        "several": ([_entry("IU1"), _entry("IU12")], ["IU2, IU3 are missing", "'IU12' is not an IU of this graph"]),
    }
    for name, (entries, wanted) in cases.items():
        res = parse_signal_report(json.dumps({"iu_analysis": entries}), GRAPH)
        assert res.error == "extractor_invalid_signals", name
        for w in wanted:
            assert w in res.detail, (name, res.detail)
        assert res.detail.endswith("Write exactly one entry for each of IU1, IU2, IU3, in that order."), name
    # an ambiguous concept name resolves to nothing
    g = IUGraph.model_validate({"nodes": [{"id": "IU1", "concept": "x"}, {"id": "IU2", "concept": "x"}], "edges": []})
    res = parse_signal_report(json.dumps([_entry("x"), _entry("IU2")]), g)
    assert res.error == "extractor_invalid_signals" and "'x' is not an IU of this graph" in res.detail


def test_signal_report_failures_are_named():
    assert parse_signal_report("", GRAPH).error == "extractor_empty"
    assert parse_signal_report("I could not do it", GRAPH).error == "extractor_invalid_json"
    assert parse_signal_report('{"iu_analysis": []}', GRAPH).error == "extractor_empty"
    assert parse_signal_report('{"summary": "fine"}', GRAPH).error == "extractor_invalid_output"


def test_latex_inside_a_signal_report():
    text = ('{"iu_analysis": [{"id": "IU1", "teaching_quality": "well_explained", "teaching_quality_reasoning": '
            '"shows $\\binom{6}{3}$ and \\sqrt{x}", "user_attempt_type": "none", "assistant_response_role": "ignored"}]}')
    res = parse_signal_report(text, IUGraph.model_validate({"nodes": [{"id": "IU1", "concept": "a"}], "edges": []}))
    assert res.ok and res.value.entries[0].teaching_quality_reasoning == "shows $\\binom{6}{3}$ and \\sqrt{x}"


# --- graphs, judges --------------------------------------------------------------------------


def test_graph_extraction_parsing():
    good = demo_graphs("math")["demo_math_02"].to_json_dict()
    res = parse_graph_extraction("```json\n" + json.dumps(good) + "\n```", item_id="x")
    assert res.ok and len(res.value.nodes) == 11 and res.warnings == ()
    cyclic = {"nodes": good["nodes"][:2], "edges": [{"from": "IU1", "to": "IU2"}, {"from": "IU2", "to": "IU1"}]}
    bad = parse_graph_extraction(json.dumps(cyclic), item_id="x")
    assert bad.error == "graph_extractor_invalid_output" and "cycle" in bad.detail
    truncated = json.dumps(good)[:-200]
    salvaged = parse_graph_extraction(truncated, item_id="x")
    assert salvaged.ok and salvaged.value.edges == [] and "salvaged_nodes_without_edges" in salvaged.repairs
    assert any("10 to 30" in w for w in parse_graph_extraction(json.dumps(cyclic | {"edges": []})).warnings)
    assert parse_graph_extraction('{"nodes": []}').error == "graph_extractor_invalid_output"


def test_rating_reads_scores_as_meant_and_refuses_other_scales():
    res = parse_rating('{"information_calibration": "75%", "perceived_overload": "0.2", "quality": "8/10", "perceived_learning": 7}')
    assert res.ok and res.value.information_calibration == 0.75 and res.value.quality_score == 8.0
    assert res.repairs == ("renamed:quality->quality_score", "percent:information_calibration=75%",
                           "number_from_string:perceived_overload", "out_of_top:quality_score=8/10")
    seven = parse_rating('{"information_calibration": "7/10", "perceived_overload": 0.5, "quality_score": 5, "perceived_learning": 5}')
    assert seven.ok and seven.value.information_calibration == 0.7  # x/y means x/y (it was read as 0.07)
    for bare in ("7", "70"):  # another scale: refused, never guessed
        bad = parse_rating(f'{{"information_calibration": {bare}, "perceived_overload": 0.5, "quality_score": 5, "perceived_learning": 5}}')
        assert bad.error == "judge_invalid_output" and bad.detail.startswith(f"information_calibration is {bare}, outside its 0–1 scale")
    bad = parse_rating('{"information_calibration": 0.5, "perceived_overload": 0.5, "quality_score": 14, "perceived_learning": 5}')
    assert bad.error == "judge_invalid_output" and "quality_score is 14, outside its 1–10 scale" in bad.detail
    assert "Field required" not in bad.detail and "less than or equal" not in bad.detail  # one complaint per field
    assert parse_rating("").error == "judge_empty" and parse_rating("great chat").error == "judge_invalid_json"


def test_rating_with_mixed_scales_is_refused_not_read_as_it_stands():
    # the planted case: "8.3/10" beside a bare 1 that the judge meant as 1 out of 10 (0.1)
    planted = ('{"information_calibration": "8.3/10", "perceived_overload": 1, "quality_score": 7, '
               '"perceived_learning": 6}')
    bad = parse_rating(planted)
    assert bad.error == "judge_invalid_output" and bad.value is None
    assert bad.detail.startswith("perceived_overload is a bare 1 while information_calibration '8.3/10'")
    assert "0.1 or 1.0" in bad.detail  # what the repair round asks for
    for mixed in ('"83%"', '"8.3 out of 10"'):
        also = parse_rating(f'{{"information_calibration": {mixed}, "perceived_overload": "1", "quality_score": 7, "perceived_learning": 6}}')
        assert also.error == "judge_invalid_output" and "perceived_overload is a bare 1" in also.detail
    # one scale throughout, or nothing ambiguous: read (0 is 0 on every scale; 0.4 is plainly 0–1)
    for fine, overload in (('"8.3/10", "perceived_overload": "1/10"', 0.1), ('"8.3/10", "perceived_overload": 0', 0.0),
                           ('"8.3/10", "perceived_overload": 0.4', 0.4), ('0.83, "perceived_overload": 1', 1.0),
                           ('"1/1", "perceived_overload": 1', 1.0)):
        ok = parse_rating(f'{{"information_calibration": {fine}, "quality_score": "7/10", "perceived_learning": 6}}')
        assert ok.ok and ok.value.perceived_overload == overload, fine


def test_termination_parsing():
    res = parse_termination('{"turn_analysis": [], "ending_turn": 7, "termination_reason": "problem_completion"}', "math", 4)
    assert res.ok and res.value.ending_turn == 4 and "read as 4" in res.warnings[0]
    wrong = parse_termination('{"ending_turn": 2, "termination_reason": "problem_completion"}', "expertqa", 4)
    assert wrong.error == "judge_invalid_output" and "comprehension_satisfied" in wrong.detail
    drift = parse_termination('{"end_turn": "2", "reason": "max_turns"}', "expertqa", 4)
    assert drift.ok and drift.value.ending_turn == 2


def test_build_retry_appends_the_reply_and_the_error():
    req = ChatRequest(messages=({"role": "system", "content": "s"}, {"role": "user", "content": "u"}), role="extractor",
                      temperature=0.0, json_schema={"type": "object"}, prompt_version="extractor@v1")
    res = parse_signal_report('{"iu_analysis": []}', GRAPH)
    retry = build_retry(req, '{"iu_analysis": []}', res.detail, temperature=0.4)
    assert [m["role"] for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert retry.messages[2]["content"] == '{"iu_analysis": []}'
    assert "the iu_analysis list has no entries" in retry.messages[3]["content"]
    assert retry.temperature == 0.4 and retry.prompt_version == "extractor@v1+repair@v1" and retry.json_schema == {"type": "object"}
    user_req = ChatRequest(messages=req.messages, role="user_sim", temperature=0.7)
    assert build_retry(user_req, "x", parse_user_turn("x").detail).temperature == 0.7  # no setting: the request's own
