"""Graph density (the learner's prompt and every turn row show it): the mean share of each IU's
neighbours known at least partially, an isolated IU counting 1, summed in the graph's order."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from ray_knowsim.rules.prerequisites import PARTIAL, density
from ray_knowsim.schema.graph import IUGraph, build_index


def _reference_density(g, states) -> float:
    """The definition, written out: neighbour by neighbour."""
    total = 0.0
    for v in g.ids:
        nbrs = g.neighbours[v]
        total += 1.0 if not nbrs else sum(1 for u in nbrs if states.get(u, 0) >= PARTIAL) / len(nbrs)
    return total / len(g.ids) if g.ids else 0.0


@st.composite
def _graph_and_states(draw):
    n = draw(st.integers(1, 12))
    ids = [f"IU{k}" for k in range(1, n + 1)]
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] < e[1]),
                          max_size=3 * n, unique=True))
    graph = IUGraph.model_validate({"nodes": [{"id": i, "concept": f"c{i}"} for i in ids],
                                    "edges": [{"source": ids[a], "target": ids[b]} for a, b in edges]})
    states = draw(st.dictionaries(st.sampled_from(ids + ["IU99"]), st.integers(0, 3)))  # some missing, one stranger
    return build_index(graph), states


@settings(max_examples=300, deadline=None)
@given(_graph_and_states())
def test_density_is_the_definition_to_the_last_bit(case):
    g, states = case
    assert density(g, states) == _reference_density(g, states)


def test_density_of_a_chain_and_of_a_lone_iu():
    chain = build_index(IUGraph.model_validate({"nodes": [{"id": "A", "concept": "a"}, {"id": "B", "concept": "b"},
                                                          {"id": "C", "concept": "c"}],
                                                "edges": [{"source": "A", "target": "B"}, {"source": "B", "target": "C"}]}))
    # A's one neighbour B known, B's two (A known, C not), C's one (B known): (1 + 1/2 + 1) / 3
    assert density(chain, {"A": 3, "B": PARTIAL, "C": 0}) == (1 + 0.5 + 1) / 3
    lone = build_index(IUGraph.model_validate({"nodes": [{"id": "A", "concept": "a"}], "edges": []}))
    assert density(lone, {}) == 1.0
