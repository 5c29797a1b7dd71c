"""The prompt views' fast paths write exactly what their defining expressions write."""

from __future__ import annotations

import itertools

from ray_knowsim.demo import demo_graphs
from ray_knowsim.prompts.views import learner_names, pretty_json, state_json, states_by_id, states_by_name
from ray_knowsim.schema.graph import IUGraph, build_index


def _graphs():
    for task in ("math", "expertqa"):
        yield from demo_graphs(task).values()
    # two IUs with one concept name (the learner's object keeps one key), and a non-ASCII name
    yield IUGraph.model_validate({"nodes": [{"id": "IU1", "concept": "Same"}, {"id": "IU2", "concept": "Same"},
                                            {"id": "IU3", "concept": "caf\u00e9 \"q\" \\ \u2014"}], "edges": []})


def test_state_json_is_pretty_json_of_the_state_object_for_every_naming():
    for graph in _graphs():
        index = build_index(graph, "x")
        for k, shown_as in itertools.product(range(4), ("id", "concept", "label")):
            codes = {i: (k + j) % 4 for j, i in enumerate(index.ids)}
            if shown_as == "id":
                want = pretty_json(states_by_id(index, codes))
            else:
                want = pretty_json(states_by_name(index, learner_names(index, graph, with_ids=shown_as == "label"), codes))
            assert state_json(index, graph, codes, shown_as) == want
