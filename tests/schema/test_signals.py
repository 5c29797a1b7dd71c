from ray_knowsim.schema.signals import normalize_signals


def test_field_name_drift_is_repaired_only_when_canonical_key_absent():
    [e] = normalize_signals([{"id": "IU1", "teaching_quality": "shallow", "assistant_role": "ignored", "user_attempt": "articulation"}])
    assert e.assistant_response_role == "ignored"
    assert e.user_attempt_type == "articulation"
    [e] = normalize_signals(
        [{"id": "IU1", "assistant_response_role": "confirmed_correct", "assistant_role": "ignored"}]
    )
    assert e.assistant_response_role == "confirmed_correct"


def test_missing_teaching_quality_read_from_arrow_in_reasoning():
    [a, b, c] = normalize_signals(
        [
            {"id": "IU1", "teaching_quality_reasoning": "Defined and motivated → WELL_EXPLAINED"},
            {"id": "IU2", "teaching_quality_reasoning": "only named -> shallow"},
            {"id": "IU3", "teaching_quality_reasoning": "no label here"},
        ]
    )
    assert (a.teaching_quality, b.teaching_quality, c.teaching_quality) == ("well_explained", "shallow", "not_mentioned")


def test_legacy_attempt_flag_and_unknown_attempt_values():
    [a, b, c] = normalize_signals(
        [
            {"id": "IU1", "attempted_by_user": True},
            {"id": "IU2", "user_attempt_type": "guessing", "attempted_by_user": False},
            {"id": "IU3", "user_attempt_type": "articulation", "attempted_by_user": True},
        ]
    )
    assert (a.user_attempt_type, b.user_attempt_type, c.user_attempt_type) == ("reasoning", "none", "articulation")


def test_non_dicts_dropped_and_idless_entries_kept_without_id():
    entries = normalize_signals({"iu_analysis": [3, "x", {"id": "", "user_attempt_type": "reasoning"}, None]})
    assert len(entries) == 1
    assert entries[0].id is None and not entries[0].mentioned and entries[0].user_attempt_type == "reasoning"


def test_unrecognised_teaching_label_acts_as_well_explained():
    [e] = normalize_signals([{"id": "IU1", "teaching_quality": "excellent"}])
    assert e.mentioned and e.tq_code == 2
    assert e.teaching_quality == "excellent"  # the raw label is kept for the record
