"""The audit's checks on hand-written turns of a demo item: each error kind is flagged with its
evidence, and the look-alikes that are not errors (confusion, a quoted problem, a known IU, an
answer the tutor gave first) are not."""

from __future__ import annotations

import json

import pytest

from ray_knowsim.audit.checks import SessionFacts, TurnFacts, audit_session, final_answer
from ray_knowsim.demo import demo_graphs
from ray_knowsim.schema.states import KNOWS_WELL, PARTIAL, STRUGGLING, UNAWARE

GRAPH = demo_graphs("math")["demo_math_01"]
IDS = [n.id for n in GRAPH.nodes]
PROBLEM = ("The length of a rectangle is 3 cm more than twice its width, and its perimeter is 54 cm. "
           "What is the area of the rectangle, in square centimetres?")
SOLUTION = "Let the width be $w$ cm. ... The length is $2\\cdot 8+3=19$, and the area is $19\\cdot 8=\\boxed{152}$ square centimetres."


def states(**given: int) -> list[int]:
    """Every IU unaware but those given (IU1=3, ...)."""
    return [given.get(i, UNAWARE) for i in IDS]


def labels(**given: str) -> list[dict]:
    return [{"id": i, "teaching_quality": given.get(i, "not_mentioned"), "teaching_quality_reasoning": "r"} for i in IDS]


def session(*turns: TurnFacts, initial: list[int] | None = None, structured: bool = True) -> SessionFacts:
    return SessionFacts("s/1", GRAPH, initial or states(IU1=KNOWS_WELL), structured, PROBLEM, SOLUTION, turns)


def turn(k: int, user: str, reply: str = "Let us look at the problem together.", signals=(), post=None, overload=False) -> TurnFacts:
    return TurnFacts(k, user, reply, list(signals), post or [], overload)


def kinds(flags) -> list[tuple[str, str]]:
    return [(f.kind, f.iu) for f in flags]


@pytest.mark.parametrize("sentence", [
    "I already understand the perimeter of a rectangle, so that part is clear to me.",
    "The perimeter of a rectangle makes sense to me.",
])
def test_a_claim_about_an_unaware_iu_is_flagged_with_its_sentence(sentence):
    flags = audit_session(session(turn(1, f"Can you help with this? {sentence}")))
    assert kinds(flags) == [("learner_claims_unaware", "IU2")]
    assert flags[0].evidence == sentence and flags[0].state == "unaware" and flags[0].party == "learner"


def test_using_an_unaware_iu_by_its_description_is_flagged():
    # IU2's description, without its name: the learner works with it though its state holds it unaware
    msg = "Two lengths plus two widths give the total boundary, so P = 2(l + w) here."
    assert kinds(audit_session(session(turn(1, msg)))) == [("learner_uses_unaware", "IU2")]


@pytest.mark.parametrize("msg", [
    "I'm confused about the perimeter of a rectangle; what does it mean?",  # confusion: what the rules require
    "Is the perimeter of a rectangle the distance around it?",  # a question
    PROBLEM,  # the learner quotes the question
    "I'm comfortable with variables for unknown quantities.",  # IU1 is known
])
def test_confusion_questions_quotes_and_known_ius_are_not_flagged(msg):
    assert audit_session(session(turn(1, msg))) == []


def test_the_state_before_the_turn_is_the_one_checked():
    # after turn 1 the state holds IU2 partly understood: the same claim in turn 2 is no error
    claim = "I already understand the perimeter of a rectangle."
    first = turn(1, "Hello.", post=states(IU1=KNOWS_WELL, IU2=PARTIAL))
    assert audit_session(session(first, turn(2, claim))) == []
    assert kinds(audit_session(session(turn(1, claim)))) == [("learner_claims_unaware", "IU2")]


def test_the_answer_before_the_tutor_gave_it_is_flagged():
    assert final_answer(SOLUTION) == "152" and final_answer("so $\\boxed{\\frac{7}{18}}$.") == "7/18"
    flags = audit_session(session(turn(1, "I think the area is 152 square centimetres.")))
    assert [f.kind for f in flags] == ["learner_reveals_answer"] and "'152'" in flags[0].why
    told = turn(1, "Hi.", reply="The area comes out as 152 in the end, but let us see why.")
    assert audit_session(session(told, turn(2, "Why is it 152?"))) == []
    # a learner whose state holds every IU may reach it
    assert audit_session(session(turn(1, "The area is 152."), initial=[KNOWS_WELL] * len(IDS))) == []
    # 8 words of the reference solution the question does not hold
    flags = audit_session(session(turn(1, "Hmm, the length is 2 cdot 8 3 19 and the area, right")))
    assert [f.kind for f in flags] == ["learner_reveals_answer"]


def test_a_learner_done_while_its_state_is_behind_is_flagged():
    flags = audit_session(session(turn(1, "Thanks, I've got it now and can finish on my own.")))
    assert [f.kind for f in flags] == ["learner_stop_contradicts_state"] and "13 IU(s)" in flags[0].why
    done = [KNOWS_WELL] * len(IDS)
    assert audit_session(session(turn(1, "Thanks, I've got it now."), initial=done)) == []
    # overwhelmed with no overloaded turn before: flagged; after an overloaded turn: not
    calm = turn(1, "Hello.", post=states(IU1=KNOWS_WELL))
    assert [f.kind for f in audit_session(session(calm, turn(2, "This is too much, I'd like to stop.")))] == ["learner_stop_contradicts_state"]
    heavy = turn(1, "Hello.", post=states(IU1=KNOWS_WELL), overload=True)
    assert audit_session(session(heavy, turn(2, "This is too much, I'd like to stop."))) == []


REPLY = ("The perimeter of a rectangle is the total length of its boundary: two lengths plus two widths, "
         "so P = 2(l + w). It measures the distance around the shape, not the space inside it.")


def test_extractor_labels_against_the_reply():
    ok = audit_session(session(turn(1, "Hello.", REPLY, labels(IU2="well_explained"))))
    assert ok == []
    # a well_explained IU the reply never touches
    flags = audit_session(session(turn(1, "Hello.", REPLY, labels(IU2="well_explained", IU11="well_explained"))))
    assert kinds(flags) == [("extractor_unsupported_label", "IU11")] and flags[0].label == "well_explained"
    # an IU the reply covers at length, labelled not_mentioned; the evidence is the reply's sentence
    flags = audit_session(session(turn(1, "Hello.", REPLY, labels())))
    assert kinds(flags)[0] == ("extractor_ignores_covered", "IU2") and flags[0].evidence in REPLY and "100%" in flags[0].why
    # ... and, as every IU got that one label while the reply teaches IU2 and leaves others untouched, the answer as a whole
    assert kinds(flags)[1:] == [("extractor_constant_labels", "IU2")] and "every one of the 14 IUs" in flags[1].why
    # baselines carry no extractor answers and no state: nothing is checked but the answer
    assert audit_session(session(turn(1, "I already understand the perimeter of a rectangle.", REPLY), structured=False)) == []


def test_labels_that_do_not_follow_the_text_are_flagged_once():
    other = "Subtracting 6 from both sides gives 6w = 48, and dividing by 6 gives w = 8, so the width is 8 cm."
    same = labels(IU2="shallow", IU11="shallow")
    turns = [turn(1, "Hello.", REPLY, same), turn(2, "Ok.", other, same), turn(3, "Ok.", REPLY, same)]
    flags = [f for f in audit_session(session(*turns)) if f.kind == "extractor_constant_labels"]
    assert len(flags) == 1 and flags[0].turn == 3 and "all 3 answers" in flags[0].why
    moving = [turn(1, "Hello.", REPLY, labels(IU2="well_explained")), turn(2, "Ok.", other, labels(IU11="well_explained")),
              turn(3, "Ok.", REPLY, labels(IU2="well_explained"))]
    assert audit_session(session(*moving)) == []


def test_flags_are_json_rows():
    flags = audit_session(session(turn(1, "I already understand the perimeter of a rectangle.")))
    row = json.loads(flags[0].model_dump_json())
    assert set(row) >= {"session_id", "turn", "kind", "party", "iu", "evidence", "why"}


def test_fractions_and_decimals_meet_by_value_not_as_written():
    """A tutor writes the rain's chance as 1/10, the graph as 0.1 (docs/audit.md, the recorded
    conversations): both are one evidence feature; a whole number is left to the words."""
    from ray_knowsim.audit.wording import content_words, number_values

    assert number_values("p = 1/10") == number_values("a chance of 0.1") == number_values(r"\frac{1}{10}") == {"#0.1"}
    assert number_values("(9/10)^28 and 0.9") == {"#0.9"}
    assert number_values("54 = 6w + 6, x/2 and 3/0") == frozenset()
    assert "#0.1" in content_words("multiply by (1/10)^1") & content_words("the term (0.1)^1")
