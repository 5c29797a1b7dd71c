"""The shipped demo set: formats of spec §1.1/§1.2, sizes, acyclic graphs, sensible levels."""

from __future__ import annotations

from ray_knowsim.demo import demo_graphs, demo_items
from ray_knowsim.schema.graph import build_index


def test_items_and_graphs_match_and_load_with_the_model_layer():
    items = demo_items()
    graphs = demo_graphs()
    assert 6 <= len(items) <= 8
    assert {i.task for i in items} == {"math", "expertqa"}
    assert [i.id for i in items] == list(graphs)
    for item in items:
        assert item.question and item.reference_answer
        if item.task == "expertqa":
            assert item.metadata["field"] and item.metadata["answer_source"] == "answer_string"
    assert {i.id for i in demo_items("math")} == set(demo_graphs("math"))


def test_graphs_are_acyclic_well_sized_and_levelled():
    for item_id, graph in demo_graphs().items():  # loading already ran the strict checks (no cycles)
        assert 8 <= len(graph.nodes) <= 14, item_id
        assert [n.id for n in graph.nodes] == [f"IU{k}" for k in range(1, len(graph.nodes) + 1)]
        level = {n.id: n.abstraction_level for n in graph.nodes}
        for n in graph.nodes:
            assert 0.0 <= n.abstraction_level <= 1.0 and len(n.description.split()) >= 10 and n.concept
        for e in graph.edges:
            assert abs(e.delta_l - (level[e.source] - level[e.target])) < 1e-9
            assert -1e-9 <= e.delta_l <= 0.35 + 1e-9, (item_id, e.source, e.target)  # bridged spans
        index = build_index(graph, item_id)
        assert any(not index.prereqs[v] for v in index.ids)
        assert len({n.concept for n in graph.nodes}) == len(graph.nodes)
