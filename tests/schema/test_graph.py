import pytest

from ray_knowsim.schema.graph import GraphError, GraphWarning, build_index, capacity, check_graph, hinge_size, iu_label, parse_graph


def graph(nodes, edges):
    return parse_graph(
        {"nodes": [{"id": n, "concept": f"c{n}"} for n in nodes], "edges": [{"from": a, "to": b} for a, b in edges]},
        "item_x",
    )


def test_cycle_is_an_error_naming_item_and_nodes():
    g = graph(["A", "B", "C", "D"], [("A", "B"), ("B", "C"), ("C", "B"), ("C", "D")])
    with pytest.raises(GraphError, match=r"item_x.*cycle.*B, C"):
        check_graph(g, "item_x")


def test_cycle_tolerated_in_reference_mode_with_warning():
    g = graph(["A", "B"], [("A", "B"), ("B", "A")])
    with pytest.warns(GraphWarning, match="item_x"):
        check_graph(g, "item_x", "reference")


def test_dangling_edge_is_an_error():
    g = graph(["A", "B"], [("A", "B"), ("Z", "B")])
    with pytest.raises(GraphError, match=r"item_x.*unknown nodes: Z->B"):
        check_graph(g, "item_x")


def test_duplicate_edges_dropped_with_warning_in_strict_mode_kept_in_reference():
    g = graph(["A", "B"], [("A", "B"), ("A", "B")])
    with pytest.warns(GraphWarning, match="duplicate"):
        strict = check_graph(g, "item_x")
    assert len(strict.edges) == 1
    with pytest.warns(GraphWarning, match="duplicate edges kept"):
        assert len(check_graph(g, "item_x", "reference").edges) == 2


def test_duplicate_node_ids_rejected():
    with pytest.raises(GraphError, match="repeats node ids: A"):
        check_graph(graph(["A", "A"], []), "item_x")


def test_malformed_graph_names_item():
    with pytest.raises(GraphError, match="item_y"):
        parse_graph({"nodes": [{"concept": "no id"}]}, "item_y")


def test_depth_and_update_order_follow_longest_chain_with_stable_ties():
    g = build_index(graph(["D", "A", "B", "C"], [("A", "B"), ("B", "D"), ("A", "D"), ("A", "C")]))
    assert g.depth == {"A": 0, "B": 1, "C": 1, "D": 2}
    assert g.update_order == ("A", "B", "C", "D")


def test_cyclic_depth_depends_on_visiting_order_as_the_reference_walk():
    # A <- B <- A (cycle): walk from A meets A again on its path -> 0 without memoising
    g = build_index(graph(["A", "B"], [("B", "A"), ("A", "B")]))
    assert g.depth == {"A": 2, "B": 1}


def test_capacity_and_hinge_tables_use_half_to_even_rounding():
    # spec §3 table
    assert [capacity(n) for n in (6, 9, 10, 11, 15, 20, 21, 24, 30)] == [3, 5, 6, 6, 8, 11, 12, 13, 16]
    assert [hinge_size(n) for n in (10, 11, 17, 18, 24, 25)] == [1, 2, 2, 3, 3, 4]


def test_labels():
    assert iu_label("IU1", "Sets") == "IU1: Sets"
    assert iu_label("IU1", "") == "IU1" and iu_label("", "Sets") == "Sets"
