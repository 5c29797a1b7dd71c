"""The practice set (ray_knowsim/demo/practice.py): the committed files are exactly what the
generator makes (scripts/make_practice_items.py rewrites them), and they load as a run loads
them, with graphs shaped like the demo's (eight IUs, levelled edges of at most 0.35)."""

from __future__ import annotations

import json
from importlib import resources

from ray_knowsim.demo.practice import GRAPHS_FILE, ITEMS_FILE, practice_files
from ray_knowsim.schema.graph import build_index, check_graph, parse_graph
from ray_knowsim.schema.items import item_from_row
from tests.doubles.scripts import load_script


def _shipped(name: str) -> str:
    return resources.files("ray_knowsim.demo").joinpath(name).read_text(encoding="utf-8")


def test_the_committed_files_are_the_generators_output():
    for name, text in practice_files().items():
        assert _shipped(name) == text, f"{name} is stale: run scripts/make_practice_items.py"
    assert practice_files() == practice_files()  # no draws: the same on every call


def test_the_script_checks_the_committed_files(capsys):
    assert load_script("scripts/make_practice_items.py").main(["--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_thirty_distinct_items_each_with_its_own_levelled_graph():
    rows = [json.loads(line) for line in _shipped(ITEMS_FILE).splitlines()]
    graphs = json.loads(_shipped(GRAPHS_FILE))
    items = [item_from_row("math", row) for row in rows]
    assert len(items) == 30 and [i.id for i in items] == list(graphs)
    assert len({i.question for i in items}) == 30 and all("\\boxed{" in i.reference_answer for i in items)
    assert len({json.dumps(g, sort_keys=True) for g in graphs.values()}) == 30
    for item_id, raw in graphs.items():
        graph = check_graph(parse_graph(raw, item_id), item_id, "strict")
        assert [n.id for n in graph.nodes] == [f"IU{k}" for k in range(1, 9)]
        level = {n.id: n.abstraction_level for n in graph.nodes}
        assert all(len(n.description.split()) >= 10 for n in graph.nodes)
        assert len({n.concept for n in graph.nodes}) == 8
        for e in graph.edges:
            assert abs(e.delta_l - (level[e.source] - level[e.target])) < 1e-9
            assert 0 < e.delta_l <= 0.35 + 1e-9, (item_id, e.source, e.target)
        index = build_index(graph, item_id)
        assert any(not index.prereqs[v] for v in index.ids)
