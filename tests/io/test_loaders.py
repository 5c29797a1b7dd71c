"""Loaders of the authors' data formats: good files load, bad ones say where and why."""

from __future__ import annotations

import json
import warnings

import pytest

from ray_knowsim.io.loaders import (
    GraphLoadError,
    LoadError,
    LoadWarning,
    load_graph_cache,
    load_init_cache,
    load_items,
    load_records,
)
from ray_knowsim.schema.graph import GraphError, GraphWarning

MATH_ROW = {"id": "math_001", "split": ["benchmarking"], "source_index": 3, "problem": "1+1?", "solution": "2", "level": "Level 4", "type": "Algebra"}
EQA_ROW = {
    "id": "expertqa_001",
    "split": ["benchmarking", "validation"],
    "question": "Why?",
    "annotator_id": "a1",
    "metadata": {"field": "Law"},
    "answers": {"gpt4": {"answer_string": "first", "revised_answer_string": ""}, "bing": {"answer_string": "x", "revised_answer_string": "revised"}},
}


def write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def graph(nodes, edges):
    return {"knowledge_areas": [], "nodes": [{"id": n, "concept": f"c{n}"} for n in nodes], "edges": [{"from": a, "to": b} for a, b in edges]}


# --- items -------------------------------------------------------------------------------------


def test_items_infer_task_and_keep_file_order(tmp_path):
    math = load_items(write_jsonl(tmp_path / "m.jsonl", [MATH_ROW, {**MATH_ROW, "id": "math_000"}]))
    assert [(i.id, i.task) for i in math] == [("math_001", "math"), ("math_000", "math")]
    assert math[0].reference_answer == "2" and math[0].metadata == {"level": "Level 4", "type": "Algebra"}
    eqa = load_items(write_jsonl(tmp_path / "e.jsonl", [EQA_ROW, ""]))
    assert eqa[0].task == "expertqa" and eqa[0].reference_answer == "revised" and eqa[0].splits == ["benchmarking", "validation"]
    assert eqa[0].metadata["answer_variant"] == "bing"


def test_items_malformed_json_line_names_the_line(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", [MATH_ROW, "", '{"id": "math_002", "problem": '])
    with pytest.raises(LoadError, match=r"m\.jsonl:3: malformed JSON line"):
        load_items(path)


def test_items_non_object_line(tmp_path):
    with pytest.raises(LoadError, match=r":2: expected a JSON object, found a JSON array"):
        load_items(write_jsonl(tmp_path / "m.jsonl", [MATH_ROW, "[1, 2]"]))


def test_items_duplicate_id_names_both_lines(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", [MATH_ROW, {**MATH_ROW, "id": "math_002"}, MATH_ROW])
    with pytest.raises(LoadError, match=r"m\.jsonl:3: duplicate item id 'math_001' \(first on line 1\)"):
        load_items(path)


def test_items_missing_field_names_line_and_item(tmp_path):
    row = {k: v for k, v in MATH_ROW.items() if k != "problem"}
    with pytest.raises(LoadError, match=r":2 \(item 'math_002'\): bad math row: problem: Field required"):
        load_items(write_jsonl(tmp_path / "m.jsonl", [MATH_ROW, {**row, "id": "math_002"}]), task="math")
    with pytest.raises(LoadError, match=r":1: cannot tell the task"):
        load_items(write_jsonl(tmp_path / "n.jsonl", [row]))
    with pytest.raises(LoadError, match=r":1: bad math row: id"):
        load_items(write_jsonl(tmp_path / "o.jsonl", [{**MATH_ROW, "id": ""}]))


def test_items_mixed_tasks_and_empty_file(tmp_path):
    with pytest.raises(LoadError, match=r":2: looks like a expertqa row, but line 1 was math"):
        load_items(write_jsonl(tmp_path / "m.jsonl", [MATH_ROW, EQA_ROW]))
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(LoadError, match="no items"):
        load_items(tmp_path / "empty.jsonl")
    with pytest.raises(LoadError, match="cannot read"):
        load_items(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="unknown task"):
        load_items(tmp_path / "empty.jsonl", task="physics")


# --- graph cache -------------------------------------------------------------------------------


def write_json(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_graph_cache_loads_and_keeps_order(tmp_path):
    path = write_json(tmp_path / "g.json", {"b_1": graph(["IU1", "IU2"], [("IU1", "IU2")]), "a_1": graph(["IU1"], [])})
    graphs = load_graph_cache(path)
    assert list(graphs) == ["b_1", "a_1"] and [n.id for n in graphs["b_1"].nodes] == ["IU1", "IU2"]


def test_graph_cache_cycle_is_an_error_naming_item_and_nodes_in_strict_mode(tmp_path):
    path = write_json(tmp_path / "g.json", {"ok": graph(["IU1"], []), "cyc_7": graph(["IU1", "IU2", "IU3"], [("IU1", "IU2"), ("IU2", "IU3"), ("IU3", "IU2")])})
    with pytest.raises(GraphLoadError) as err:
        load_graph_cache(path)
    msg = str(err.value)
    assert "g.json" in msg and "'cyc_7'" in msg and "IU2, IU3" in msg and "cycle" in msg
    assert isinstance(err.value, GraphError) and isinstance(err.value, LoadError)
    with pytest.warns(GraphWarning, match=r"g\.json: .*'cyc_7'.*cycle"):
        graphs = load_graph_cache(path, mode="reference")
    assert len(graphs["cyc_7"].edges) == 3


def test_graph_cache_dangling_edge(tmp_path):
    path = write_json(tmp_path / "g.json", {"dang": graph(["IU1", "IU2"], [("IU1", "IU2"), ("IU5", "IU2")])})
    with pytest.raises(GraphLoadError, match=r"'dang'.*unknown nodes: IU5->IU2"):
        load_graph_cache(path)
    with pytest.warns(GraphWarning, match="unknown nodes"):
        assert len(load_graph_cache(path, mode="reference")["dang"].edges) == 2


def test_graph_cache_duplicate_edge_dropped_in_strict_kept_in_reference(tmp_path):
    path = write_json(tmp_path / "g.json", {"dup": graph(["IU1", "IU2"], [("IU1", "IU2"), ("IU1", "IU2")])})
    with pytest.warns(GraphWarning, match=r"'dup'.*duplicate edges dropped: IU1->IU2"):
        assert len(load_graph_cache(path)["dup"].edges) == 1
    with pytest.warns(GraphWarning, match=r"'dup'.*duplicate edges kept.*IU1->IU2"):
        assert len(load_graph_cache(path, mode="reference")["dup"].edges) == 2


def test_graph_cache_bad_files(tmp_path):
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(LoadError, match=r"bad\.json: not valid JSON"):
        load_graph_cache(tmp_path / "bad.json")
    with pytest.raises(LoadError, match="expected an object .* found a JSON array"):
        load_graph_cache(write_json(tmp_path / "list.json", [graph(["IU1"], [])]))
    with pytest.raises(GraphLoadError, match=r"'empty'.*malformed"):
        load_graph_cache(write_json(tmp_path / "e.json", {"empty": {"nodes": []}}))
    with pytest.raises(GraphLoadError, match=r"'twice'.*repeats node ids: IU1"):
        load_graph_cache(write_json(tmp_path / "t.json", {"twice": graph(["IU1", "IU1"], [])}))
    with pytest.raises(ValueError, match="unknown graph mode"):
        load_graph_cache(tmp_path / "t.json", mode="lenient")


def test_shipped_graph_caches(shared_ref):
    with pytest.raises(GraphLoadError, match="'math_004'.*cycle"):
        load_graph_cache(shared_ref / "iu_cache" / "math.json")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphs = load_graph_cache(shared_ref / "iu_cache" / "math.json", mode="reference")
    text = " ".join(str(w.message) for w in caught)
    assert len(graphs) == 30 and all(f"'{i}'" in text for i in ("math_004", "math_007", "math_022", "math_030"))
    with pytest.warns(GraphWarning, match="expertqa_026"):
        assert len(load_graph_cache(shared_ref / "iu_cache" / "expertqa.json", mode="reference")) == 30


# --- init cache --------------------------------------------------------------------------------


def test_init_cache_lookup(tmp_path):
    ks = {"IU1: a": {"state": "knows_well"}}
    cache = load_init_cache(write_json(tmp_path / "c.json", {"_meta": {"x": 1}, "expertqa": {"e1": {"novice": ks}}}))
    assert cache.lookup("expertqa", "e1", "novice") == ks and cache.lookup("expertqa", "e1", "advanced") is None
    assert cache.meta == {"x": 1}


@pytest.mark.parametrize(
    "data, pattern",
    [
        ([], "expected an object"),
        ({"expertqa": []}, "task 'expertqa' must map"),
        ({"expertqa": {"e1": {"expert": {"IU1": {"state": "unaware"}}}}}, r"item 'e1'.*unknown knowledge level 'expert'"),
        ({"expertqa": {"e1": {"novice": {}}}}, r"item 'e1', level 'novice'.*non-empty"),
        ({"expertqa": {"e1": {"novice": {"IU1": "unaware"}}}}, r"item 'e1', level 'novice': entry 'IU1'"),
    ],
)
def test_init_cache_errors_name_the_item(tmp_path, data, pattern):
    with pytest.raises(LoadError, match=pattern):
        load_init_cache(write_json(tmp_path / "c.json", data))


def test_init_cache_unknown_state_name_warns(tmp_path):
    with pytest.warns(LoadWarning, match="'knows_it'.*unaware"):
        load_init_cache(write_json(tmp_path / "c.json", {"expertqa": {"e1": {"novice": {"IU1": {"state": "knows_it"}}}}}))


def test_shipped_init_cache(shared_ref):
    cache = load_init_cache(shared_ref / "init_ks_cache.json")
    assert sorted(cache.tasks()) == ["competition_math", "expertqa"]
    assert sum(len(levels) for per_item in cache.tasks().values() for levels in per_item.values()) == 180


# --- records -----------------------------------------------------------------------------------

STRUCTURED = {
    "problem_id": "math_003",
    "task": "math",
    "knowledge_level": "novice",
    "run_type": "KS-based",
    "simulation_method": "structured",
    "initial_knowledge_state": {"IU1: a": {"state": "unaware"}},
    "knowledge_state_history": [{"IU1: a": {"state": "unaware"}}],
    "iu_analysis_history": [[{"id": "IU1"}]],
    "metrics": {"knowledge_gain": 0.0},
    "virtual_early_stop_turn": None,
    "conversation": [["user", "hi"], ["assistant", "hello"]],
    "something_else": 5,
}
BASELINE = {"problem_id": "math_003", "run_type": "baseline", "simulation_method": "zero-shot-cot", "initial_knowledge_state": "", "metrics": {"knowledge_gain": None}}


def test_records_structured_and_baseline(tmp_path):
    recs = load_records(write_json(tmp_path / "r.json", [STRUCTURED, BASELINE]))
    assert [r.is_structured for r in recs] == [True, False]
    assert recs[0].model_extra == {"something_else": 5} and recs[1].knowledge_state_history == []


@pytest.mark.parametrize(
    "data, pattern",
    [
        ({"problem_id": "x"}, "expected a list of conversation records at the top level, found a JSON object"),
        ([STRUCTURED, 3], "record 1 is a JSON number"),
        ([{**STRUCTURED, "problem_id": ""}], r"record 0: problem_id"),
        ([BASELINE, {**STRUCTURED, "initial_knowledge_state": ""}], r"record 1 \(problem_id 'math_003'\).*no initial_knowledge_state"),
        ([{**BASELINE, "initial_knowledge_state": "text"}], r"record 0 .*empty string"),
        ([{**STRUCTURED, "turns": "many"}], r"record 0 .*turns"),
    ],
)
def test_records_errors(tmp_path, data, pattern):
    with pytest.raises(LoadError, match=pattern):
        load_records(write_json(tmp_path / "r.json", data))


def test_records_not_json(tmp_path):
    (tmp_path / "r.json").write_text("[{]")
    with pytest.raises(LoadError, match=r"r\.json: not valid JSON \(.* line 1, column 3\)"):
        load_records(tmp_path / "r.json")


def test_shipped_example_records(shared_ref):
    structured = load_records(shared_ref / "examples" / "mathqa_structured_adaptive_novice.json")
    baseline = load_records(shared_ref / "examples" / "mathqa_baseline_zero-shot-cot_novice.json")
    assert [r.problem_id for r in structured] == ["math_003", "math_004"]
    assert all(r.is_structured and len(r.knowledge_state_history) == r.turns + 1 == 16 for r in structured)
    assert all(len(r.iu_analysis_history) == len(r.turn_metrics_history) == 15 for r in structured)
    assert [r.virtual_early_stop_turn for r in structured] == [9, 11]
    assert not any(r.is_structured for r in baseline) and all(r.initial_knowledge_state == "" for r in baseline)
