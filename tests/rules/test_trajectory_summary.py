"""Trajectory.summary's at-early-stop columns are the metrics of the conversation up to the stop:
computed once when it did not stop early, from the prefix when it did (both cases, each checked
against paper_metrics of the prefix itself)."""

from __future__ import annotations

import random

from ray_knowsim.schema.graph import IUGraph, build_index
from ray_knowsim.schema.metrics import BUILTIN_METRICS
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import reference_rules
from ray_knowsim.rules.final_metrics import paper_metrics
from ray_knowsim.rules.trajectory import run_trajectory

NODES = [f"N{k}" for k in range(8)]
GRAPH = IUGraph.model_validate({"nodes": [{"id": v, "concept": v.lower()} for v in NODES],
                                "edges": [{"from": "N0", "to": "N1"}, {"from": "N1", "to": "N2"}, {"from": "N3", "to": "N4"}]})
G = build_index(GRAPH, "t")
TQ = ("not_mentioned", "shallow", "well_explained")
ATTEMPTS = ("none", "reasoning", "articulation")


def _turn(rng: random.Random) -> list[SignalEntry]:
    return [SignalEntry(id=v, teaching_quality=rng.choice(TQ), user_attempt_type=rng.choice(ATTEMPTS)) for v in NODES]


def test_at_early_stop_columns_are_the_prefix_metrics_with_and_without_a_stop():
    rules = reference_rules()
    stopped = whole = 0
    for seed in range(60):
        rng = random.Random(seed)
        initial = {v: rng.randrange(3) for v in NODES}
        turns = [_turn(rng) for _ in range(rng.randrange(0, 9))]
        traj = run_trajectory(G, initial, turns, rules, max_turns=8)
        summary = traj.summary(rules)
        stop = traj.early_stop(rules)
        k = stop.turn if stop else len(traj.metrics)
        stopped += k < len(traj.metrics)
        whole += k == len(traj.metrics)
        prefix = paper_metrics(traj.metrics[:k], traj.initial, traj.states[k], traj.basis)
        final = paper_metrics(traj.metrics, traj.initial, traj.final, traj.basis)
        for m in BUILTIN_METRICS:
            if m.source == "state" and m.es_name:
                assert summary[m.es_name] == prefix[m.name], (seed, m.es_name)
        for name, value in final.items():
            assert summary[name] == value, (seed, name)
    assert stopped and whole  # both branches were taken
