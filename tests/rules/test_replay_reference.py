"""Replaying the authors' recorded conversations reproduces every recorded value (floats to 1e-9)."""

import json
import warnings

import pytest

from ray_knowsim.schema.graph import GraphWarning, build_index, check_graph, parse_graph
from ray_knowsim.rules.config import paper_rules, reference_rules
from ray_knowsim.rules.record_diff import differences, record_differences
from ray_knowsim.rules.reference_record import replay_record
from ray_knowsim.rules.termination import early_stop

@pytest.fixture(scope="module")
def recorded(shared_ref):
    records = json.loads((shared_ref / "examples/mathqa_structured_adaptive_novice.json").read_text())
    graphs = json.loads((shared_ref / "iu_cache/math.json").read_text())
    out = []
    for r in records:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GraphWarning)
            g = build_index(check_graph(parse_graph(graphs[r["problem_id"]], r["problem_id"]), r["problem_id"], "reference"))
        out.append((r, g))
    return out


def test_every_recorded_value_reproduced(recorded):
    assert len(recorded) == 2
    total_checked = 0
    for record, g in recorded:
        _, ours = replay_record(record, g, reference_rules())
        diffs = record_differences(record, ours)
        assert not diffs, f"{record['problem_id']}: {diffs[:5]}"
        total_checked += len(record["knowledge_state_history"]) * g.size
    assert total_checked == 2 * 16 * 15 - 16  # math_004 has 14 IUs


def test_recorded_early_stops(recorded):
    stops = {r["problem_id"]: replay_record(r, g, reference_rules())[1] for r, g in recorded}
    assert stops["math_003"]["virtual_early_stop_turn"] == 9
    assert stops["math_004"]["virtual_early_stop_turn"] == 11
    assert {s["virtual_early_stop_reason"] for s in stops.values()} == {"cognitive_overload"}


def test_paper_rules_change_the_trajectory(recorded):
    """The paper preset is a different model: the recorded traces must NOT replay under it."""
    record, g = recorded[0]
    _, ours = replay_record(record, g, paper_rules())
    assert differences(record["knowledge_state_history"], ours["knowledge_state_history"])


def test_paper_termination_never_fires_on_recorded_trajectories(recorded):
    """Spec §8.2: on the recorded trajectories the paper's 5-turn rule never fires."""
    for record, g in recorded:
        traj, _ = replay_record(record, g, reference_rules())
        assert early_stop(traj.stop_signals(), paper_rules().termination) is None


def test_cyclic_graph_replays_with_a_warning(shared_ref):
    graphs = json.loads((shared_ref / "iu_cache/math.json").read_text())
    with pytest.warns(GraphWarning, match="math_004"):
        check_graph(parse_graph(graphs["math_004"], "math_004"), "math_004", "reference")
