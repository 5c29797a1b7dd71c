"""Small trajectories through the real rules, for tests of what reads them."""

from __future__ import annotations


def small_trajectory():
    """A two-turn trajectory over a 3-IU graph under the reference rules, and those rules."""
    from ray_knowsim.rules.config import reference_rules
    from ray_knowsim.rules.trajectory import run_trajectory
    from ray_knowsim.schema.graph import IUGraph, build_index
    from ray_knowsim.schema.signals import SignalEntry

    graph = IUGraph.model_validate({"nodes": [{"id": f"IU{k}", "concept": c} for k, c in ((1, "a"), (2, "b"), (3, "c"))],
                                    "edges": [{"from": "IU1", "to": "IU2"}]})
    g = build_index(graph, "x")
    first = [SignalEntry(id="IU1", teaching_quality="well_explained", user_attempt_type="none")]
    turn = [SignalEntry(id="IU1", teaching_quality="well_explained", user_attempt_type="reasoning"),
            SignalEntry(id="IU2", teaching_quality="shallow", user_attempt_type="none")]
    return run_trajectory(g, {"IU1": 2, "IU2": 0, "IU3": 0}, [first, turn], reference_rules()), reference_rules()
