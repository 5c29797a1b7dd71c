"""The simulator's sanity checks: a broken extractor and judge (SmolLM2's behaviour, planted in a
synthetic run) are named, a working one is not, and each threshold holds where it says."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pytest

from ray_knowsim.io.rundir import RunReader
from ray_knowsim.tables import sanity
from ray_knowsim.tables.sanity import SanityInputs, SessionSignals, check_run, checks, uniform_label
from ray_knowsim.tables.outcome_tables import final_line_parts, sanity_table
from tests.doubles.broken import broken_simulator
from tests.doubles.rundirs import committed_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sanity")
    return {
        "healthy": committed_run(root, "healthy", n_sessions=24, max_turns=3, seed=7),
        "broken": committed_run(root, "broken", n_sessions=24, max_turns=3, seed=7, edit=broken_simulator),
    }


def test_a_broken_simulator_is_named_and_severe(runs):
    report = check_run(RunReader.open(runs["broken"]))
    by = {(w.check, w.scope): w for w in report.warnings}
    answers = report.to_dict()["extractor_answers"]
    assert answers == 24 * 3  # every turn of every (structured, ok) session is an extractor answer
    uniform = by[("uniform_labels", "run")]
    assert uniform.severe and f"{answers} of {answers} answers" in uniform.text and "'well_explained'" in uniform.text
    frozen = by[("frozen_states", "run")]  # every condition: one warning, the simulator's
    conditions = set(RunReader.open(runs["broken"]).sessions.read(["condition"]).column("condition").to_pylist())
    assert frozen.severe and f"any of the {len(conditions)} conditions" in frozen.text and all(c in frozen.text for c in conditions)
    assert [w.check for w in report.warnings].count("frozen_states") == 1
    judge = by[("constant_judge", "run")]
    assert judge.severe and "IQ 1 to every one of 24 judged conversations" in judge.text


def test_a_working_simulator_gets_no_warning(runs):
    report = check_run(RunReader.open(runs["healthy"]))
    assert report.warnings == [] and report.to_dict()["extractor_answers"] == 72


def _inputs(per_condition: dict[str, tuple[int, int, int]], judged: dict[float, int] | None = None) -> SanityInputs:
    """condition -> (answers, uniform answers, upward transitions), one session per condition."""
    inputs = SanityInputs()
    for c, (answers, uniform, up) in per_condition.items():
        inputs.per_session[c + "/0"] = SessionSignals(answers, uniform, up)
        inputs.condition_of[c + "/0"] = c
    if judged:
        inputs.judge["iq"] = Counter(judged)
    return inputs


def test_thresholds():
    n = sanity.SHARE_MIN_ANSWERS
    # below the fewest answers any check speaks from nothing is judged
    assert checks(_inputs({"a": (sanity.MIN_ANSWERS - 1, sanity.MIN_ANSWERS - 1, 0)})) == []
    # one frozen condition among moving ones: a warning, not severe (it may be a tutor that teaches nothing)
    got = checks(_inputs({"a": (n, 0, 0), "b": (n, 0, 3)}))
    assert [(w.check, w.scope, w.severe) for w in got] == [("frozen_states", "a", False)]
    # uniform share: warned from UNIFORM_WARN_SHARE, severe from UNIFORM_SEVERE_SHARE
    total = 100
    warn = round(total * sanity.UNIFORM_WARN_SHARE)
    assert checks(_inputs({"a": (total, warn - 1, 5)})) == []
    got = checks(_inputs({"a": (total, warn, 5)}))
    assert [(w.check, w.severe) for w in got] == [("uniform_labels", False)]
    got = checks(_inputs({"a": (total, round(total * sanity.UNIFORM_SEVERE_SHARE), 5)}))
    assert [(w.check, w.severe) for w in got] == [("uniform_labels", True)]
    # a constant judge: from JUDGE_MIN_SCORED, severe from JUDGE_SEVERE_SCORED; two values: no warning
    moving = {"a": (n, 0, 3)}
    assert checks(_inputs(moving, {7.0: sanity.JUDGE_MIN_SCORED - 1})) == []
    assert checks(_inputs(moving, {7.0: sanity.JUDGE_MIN_SCORED, 8.0: 1})) == []
    got = checks(_inputs(moving, {7.0: sanity.JUDGE_MIN_SCORED}))
    assert [(w.check, w.severe) for w in got] == [("constant_judge", False)]
    got = checks(_inputs(moving, {1.0: sanity.JUDGE_SEVERE_SCORED}))
    assert [(w.check, w.severe) for w in got] == [("constant_judge", True)]


def test_a_small_run_is_warned_with_the_evidence_it_has():
    # the 2-session smoke run: 2 of 2 extractor answers gave one label to every IU
    [got] = checks(_inputs({"a": (1, 1, 0), "b": (1, 1, 0)}))
    assert (got.check, got.severe, got.component) == ("uniform_labels", False, "extractor")
    assert "in 2 of 2 answers" in got.text and "only 2 answers" in got.text
    # below SHARE_MIN_ANSWERS only "all of them" speaks: one of two is what a working extractor does too
    assert checks(_inputs({"a": (2, 1, 0)})) == []
    assert [w.severe for w in checks(_inputs({"a": (sanity.SHARE_MIN_ANSWERS, sanity.SHARE_MIN_ANSWERS, 3)}))] == [True]


def test_a_small_run_with_every_condition_frozen_or_a_judge_constant_on_every_scale_is_warned():
    m = sanity.MIN_ANSWERS
    # two conditions, a few answers each, no state moved in either: the simulator, said with its evidence
    [got] = checks(_inputs({"a": (m, 0, 0), "b": (m + 1, 0, 0)}))
    assert (got.check, got.severe, got.scope, got.component) == ("frozen_states", False, "run", "simulator")
    assert f"only {2 * m + 1} answers" in got.text
    # one small condition, or one that moved: too little to blame anyone
    assert checks(_inputs({"a": (m, 0, 0)})) == []
    assert checks(_inputs({"a": (m, 0, 0), "b": (m, 0, 1)})) == []
    assert checks(_inputs({"a": (m - 1, 0, 0), "b": (m, 0, 0)})) == []
    # a judge: one value on every scale over JUDGE_SMALL_SCORED conversations warns; one scale alone does not
    k = sanity.JUDGE_SMALL_SCORED
    moving = {"a": (m, 0, 1)}
    inputs = _inputs(moving, {1.0: k})
    inputs.judge["judge_perceived_overload"] = Counter({0.5: k})
    [got] = checks(inputs)
    assert (got.check, got.severe, got.component) == ("constant_judge", False, "judge")
    assert f"every one of {k} judged" in got.text and "IQ 1" in got.text and "perceived overload 0.5" in got.text
    assert checks(_inputs(moving, {1.0: k})) == []
    inputs.judge["judge_perceived_overload"] = Counter({0.5: k - 1, 0.7: 1})
    assert checks(inputs) == []
    fewer = _inputs(moving, {1.0: k - 1})
    fewer.judge["judge_perceived_overload"] = Counter({0.5: k - 1})
    assert checks(fewer) == []


def _echo_tutor(sessions, turns):
    """The tutor replies with the learner's own message in every turn (the recipe's echo stand-in)."""
    users = turns.column("user_message").to_pylist()
    i = turns.schema.get_field_index("assistant_message")
    return sessions, turns.set_column(i, "assistant_message", pa.array(users, turns.schema.field(i).type))


def test_an_echoing_tutor_is_named_not_the_simulator(tmp_path):
    def echo_and_nothing_taught(sessions, turns):
        sessions, turns = broken_simulator(sessions, turns, label="not_mentioned", iq=3.0)
        return _echo_tutor(sessions, turns)

    run = committed_run(tmp_path, "echo", n_sessions=24, max_turns=3, seed=7, edit=echo_and_nothing_taught)
    report = check_run(RunReader.open(run))
    by = {(w.check, w.scope): w for w in report.warnings}
    tutors = [w for w in report.warnings if w.check == "degenerate_tutor"]
    assert tutors and all(w.component == "tutor" and "echoes of the learner's message" in w.text for w in tutors)
    frozen = by[("frozen_states", "run")]
    assert frozen.component == "tutor" and "the tutors, not the simulator" in frozen.text and "the simulator, not the tutors" not in frozen.text
    assert by[("uniform_labels", "run")].component == "tutor"  # not_mentioned is the right label for an echo
    assert report.heading() == "The tutor may not be working."  # the report's banner
    parts = final_line_parts({"sanity": sanity_table(report)})
    assert parts[0].startswith("TUTOR NOT WORKING? ") and not any("SIMULATOR" in p for p in parts), parts
    # the same broken extractor beside a tutor that teaches: the simulator is named
    broken = committed_run(tmp_path, "broken", n_sessions=24, max_turns=3, seed=7, edit=broken_simulator)
    report = check_run(RunReader.open(broken))
    assert report.heading() == "The simulator may not be working."
    parts = final_line_parts({"sanity": sanity_table(report)})
    assert parts[0].startswith("SIMULATOR NOT WORKING? ") and not any("TUTOR" in p for p in parts)


def test_one_label_answers():
    entry = lambda i, tq: {"id": f"IU{i}", "teaching_quality": tq}  # noqa: E731
    assert uniform_label(json.dumps([entry(1, "shallow"), entry(2, "shallow")])) == "shallow"
    assert uniform_label(json.dumps([entry(1, "shallow"), entry(2, "not_mentioned")])) is None
    assert uniform_label(json.dumps([entry(1, "shallow")])) is None  # one IU says nothing about "every IU"
    assert uniform_label("[]") is None and uniform_label("not json") is None


def test_the_turn_rows_read_are_capped(runs):
    report = check_run(RunReader.open(runs["broken"]), max_turn_rows=10)
    assert report.inputs.capped and report.inputs.turn_rows == 10
    assert any("of the first 10 turn rows" in w.text for w in report.warnings if w.check == "uniform_labels")


def test_one_reply_to_one_items_first_turn_is_not_a_constant_tutor():
    from ray_knowsim.tables.sanity import TutorReplies

    same_turn = TutorReplies()
    for level in ("novice", "intermediate"):  # the smoke run: a deterministic tutor, one item, one turn
        same_turn.add(f"a question from a {level}", "Add the numerators.", ("math/frac-1", 1))
    assert same_turn.degenerate() is None
    same_turn.add("and now?", "Add the numerators.", ("math/frac-1", 2))  # the same text in another turn
    assert same_turn.degenerate() == "one and the same text"
    echo = TutorReplies()
    for msg in ("what is 3/4?", "why 8?"):
        echo.add(msg, f"You said: {msg}", ("math/frac-1", 1))
    assert echo.degenerate() == "echoes of the learner's message"
