"""Spec §6.8: math_003, novice, turn 1 — the recorded values, computed by hand in the spec."""

import json
import math

import pytest

from ray_knowsim.schema.graph import build_index, check_graph, parse_graph
from ray_knowsim.schema.signals import normalize_signals
from ray_knowsim.rules.config import reference_rules
from ray_knowsim.rules.reference_record import initial_from_ks
from ray_knowsim.rules.turn_metrics import turn_metrics
from ray_knowsim.rules.update import apply_turn


@pytest.fixture(scope="module")
def turn_one(shared_ref):
    records = json.loads((shared_ref / "examples/mathqa_structured_adaptive_novice.json").read_text())
    record = next(r for r in records if r["problem_id"] == "math_003")
    graphs = json.loads((shared_ref / "iu_cache/math.json").read_text())
    g = build_index(check_graph(parse_graph(graphs["math_003"], "math_003"), "math_003", "reference"))
    pre, carries = initial_from_ks(g, record["initial_knowledge_state"])
    entries = normalize_signals(record["iu_analysis_history"][0])
    update = apply_turn(g, pre, carries, entries, tau=8, turn=1, rules=reference_rules())
    return g, pre, entries, update


def test_capacity_and_loads(turn_one):
    g, pre, entries, update = turn_one
    assert g.size == 15
    assert update.comprehension_load == pytest.approx(11.7, abs=1e-12)
    assert update.attempt_load == pytest.approx(5.6, abs=1e-12)
    assert update.effective_load == pytest.approx(17.3, abs=1e-12)
    assert update.overload is True


def test_eta_and_hinge(turn_one):
    _, _, _, update = turn_one
    x = (update.effective_load - 8) / (8 * 1.3)
    assert update.eta == pytest.approx(1 / (1 + x * x), abs=0)
    assert update.eta == pytest.approx(0.55566, abs=1e-5)
    # hinge N = 2: the two shallowest unaware mentions absorb at eta, the rest at eta/2
    assert update.efficiency["IU4"] == update.eta and update.efficiency["IU5"] == update.eta
    assert update.efficiency["IU7"] == 0.5 * update.eta and update.efficiency["IU8"] == 0.5 * update.eta


def test_carries_and_no_transition(turn_one):
    g, pre, entries, update = turn_one
    assert update.post == pre  # all four dropoff totals stay below 1
    assert math.isclose(update.carries["IU4"], 0.5557, abs_tol=5e-5)
    assert update.carries["IU4"] == update.carries["IU5"] == update.eta
    assert update.carries["IU7"] == update.carries["IU8"] == 0.5 * update.eta
    assert all(update.carries[v] == 0.0 for v in g.ids if v not in {"IU4", "IU5", "IU7", "IU8"})
    metrics = turn_metrics(g, pre, entries, update, 8)
    assert metrics.n_upward_transitions == 0
    assert (metrics.ic_numerator, metrics.ic_denominator, metrics.zpd_size) == (1, 10, 1)
