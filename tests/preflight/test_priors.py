"""The dry run's completion priors are the lengths real models wrote, not guesses: they are
re-measured here on the KnowSim authors' recorded conversations (real-model answers)."""

from __future__ import annotations

import json

import pytest

from ray_knowsim.backends.registry import TYPICAL_COMPLETION
from ray_knowsim.preflight.priors import answer_samples, learner_answer, measured_priors

EXAMPLES = ("mathqa_structured_adaptive_novice.json", "mathqa_baseline_zero-shot-cot_novice.json")


def reference_records(shared_ref):
    return [rec for name in EXAMPLES for rec in json.loads((shared_ref / "examples" / name).read_text(encoding="utf-8"))]


def test_the_shipped_priors_are_within_10_percent_of_real_answers(shared_ref):
    measured = measured_priors(reference_records(shared_ref))
    for role in ("user_sim", "extractor_per_iu", "judge", "judge_termination"):
        assert TYPICAL_COMPLETION[role] == pytest.approx(measured[role], rel=0.10), (role, measured[role])


def test_the_measure_counts_every_recorded_answer(shared_ref):
    """4 conversations: 39 learner messages, 435 IU entries over 30 extractor turns, a rating at
    the end and at the virtual early stop of each, a termination verdict per baseline."""
    samples = answer_samples(reference_records(shared_ref))
    assert samples["user_sim"][1] == 39
    assert samples["extractor_per_iu"][1] == 15 * 15 + 15 * 14
    assert samples["judge"][1] == 8
    assert samples["judge_termination"][1] == 2
    assert samples["assistant:adaptive"][1] == 37


def test_the_extractor_prior_counts_the_fields_it_is_asked_to_write():
    entry = {"id": "IU1", "concept": "c", "teaching_quality_reasoning": "r" * 200, "teaching_quality": "shallow",
             "user_attempt_reasoning": "", "user_attempt_type": "none", "assistant_response_role": "none",
             "label": "IU1: c " + "x" * 400}  # a field the release adds, the extractor never writes
    got = measured_priors([{"iu_analysis_history": [[entry, entry]]}])
    one = json.dumps({"iu_analysis": [{k: v for k, v in entry.items() if k != "label"}] * 2})
    assert got["extractor_per_iu"] == pytest.approx(-(-len(one) // 4) / 2)


def test_the_learner_prior_adds_a_thought_as_long_as_the_message():
    answer = learner_answer("m" * 100)
    assert len(answer["thought"]) == 100
    assert measured_priors([{"conversation": [["user", "m" * 100]]}])["user_sim"] == -(-len(json.dumps(answer)) // 4)
