import pytest

from ray_knowsim.rules.final_metrics import paper_metrics, reference_metrics
from ray_knowsim.rules.turn_metrics import TurnMetrics


def tm(num, den, zpd, absorbed, up, gain, po, cap, eng=0.0):
    return TurnMetrics(num, den, zpd, absorbed, absorbed, up, gain, 0, 0, 0.0, 0.0, eng, po, cap)


def test_definitions_on_a_hand_computed_case():
    turns = [tm(2, 4, 4, 1, 1, 1.0, 0.5, 1.0), tm(1, 2, 2, 1, 2, 2.0, 0.0, 0.5)]
    initial = {"a": 0, "b": 1, "c": 3}
    final = {"a": 2, "b": 2, "c": 3}
    m = paper_metrics(turns, initial, final)
    assert m["kg"] == 3.0
    assert m["nkg"] == pytest.approx(3 / 5)  # headroom 3 + 2
    assert m["ic_precision"] == pytest.approx(3 / 6) and m["ic_recall"] == pytest.approx(3 / 6)
    assert m["ic"] == pytest.approx(0.5)
    assert m["dc_precision"] == pytest.approx(2 / 6) and m["dc_recall"] == pytest.approx(2 / 6)
    assert m["co"] == pytest.approx(0.75) and m["po"] == pytest.approx(0.25)
    ref = reference_metrics(turns, initial, final)
    assert ref["raw_state_progress"] == 3 and ref["normalized_knowledge_gain_3N"] == pytest.approx(3 / 9)
    assert ref["learning_experience"] == pytest.approx((0.75 + 0.5 + 0.0) / 3)


def test_degenerate_denominators():
    m = paper_metrics([tm(0, 0, 0, 0, 0, 0.0, 0.0, 0.0)], {"a": 3}, {"a": 3})
    assert m["nkg"] == 0.0 and m["ic_precision"] == 0.0 and m["ic_recall"] == 1.0 and m["ic"] == 0.0
    ref = reference_metrics([], {"a": 1}, {"a": 1})
    assert ref["engagement_mean"] is None and ref["perceived_overload"] == 0.0
