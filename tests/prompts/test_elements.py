"""Every element of spec §12.7 is in the v2 prompt that should carry it (one check per element).

Each check renders the role with the default prompt set and fails when the rendered prompt loses
the element. ``docs/prompts.md`` maps the same element ids to template sections; the last test
keeps the table and these checks in step.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import pytest

from ray_knowsim.demo import demo_graphs, demo_items
from ray_knowsim.model.graph import build_index
from ray_knowsim.prompts.baselines import render_baseline_user
from ray_knowsim.prompts.judges import render_rater, render_termination_judge
from ray_knowsim.prompts.render import render_assistant, render_extractor, render_user_first, render_user_turn
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS
from ray_knowsim.prompts.views import connectable_unknowns, state_codes
from ray_knowsim.rules.prerequisites import density
from ray_knowsim.simulators.profiles import level_profile

ITEM = demo_items("math")[0]  # 14 IUs
GRAPH = demo_graphs("math")[ITEM.id]
INDEX = build_index(GRAPH, ITEM.id)
QA = demo_items("expertqa")[0]
QA_GRAPH = demo_graphs("expertqa")[QA.id]
CONCEPT = {n.id: n.concept for n in GRAPH.nodes}
LABEL = {i: INDEX.label_of(i) for i in INDEX.ids}
#            IU1 IU2 IU3 IU4 IU5 IU6 IU7 IU8 ...
LOW = [3, 3, 1, 2, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0]  # density < 0.3
HIGH = [3] * 10 + [2, 1, 0, 0]  # density >= 0.6
TRANSCRIPT = [["user", "How do I start?"], ["assistant", "Name the width w."]]
IU_ID = re.compile(r"\bIU\d+\b")
EVALUATION_WORDS = re.compile(r"evaluat|benchmark|simulat|assess|being tested|test double|offline|bookkeeping", re.I)
STRATEGIES = ("simple", "socratic", "adaptive", "comprehensive")


def text(req) -> str:
    return "\n\n".join(m["content"] for m in req.messages)


def turn(states=LOW, transcript=TRANSCRIPT, **kw):
    return render_user_turn(ITEM, GRAPH, states, transcript, explained=[LABEL["IU5"]], **kw)


def first(states=LOW):
    return render_user_first(ITEM, GRAPH, states)


def extractor(reference: bool = True, prior=TRANSCRIPT):
    item = ITEM if reference else ITEM.model_copy(update={"reference_answer": ""})
    return render_extractor(item, GRAPH, LOW, prior, "So w is 8?", "Yes: 6w = 48 gives w = 8.")


def tutor(strategy: str, item=ITEM):
    return render_assistant(item, strategy, TRANSCRIPT + [["user", "Why 2w + 3?"]])


def between(body: str, start: str, end: str) -> str:
    return body.split(start, 1)[1].split(end, 1)[0]


def names(ids) -> list[str]:
    return [CONCEPT[i] for i in ids]


def bullets(body: str, heading_start: str, next_heading: str) -> list[str]:
    block = between(body, heading_start, next_heading)
    return [line[2:] for line in block.strip().splitlines()[1:] if line.startswith("- ")]


# ---- learner simulator, follow-up turns ----------------------------------------------------------


def learner_transcript():
    user = turn().messages[1]["content"]
    assert "## Conversation so far\n- User: How do I start?\n- Assistant: Name the width w." in user


def learner_problem():
    assert ITEM.question in turn().messages[1]["content"]


def learner_density():
    user = turn().messages[1]["content"]
    pct = round(100 * density(INDEX, dict(zip(INDEX.ids, LOW))))
    assert re.search(rf"knowledge_density: LOW \({pct}%", user)
    assert "knowledge_density: HIGH (" in turn(HIGH).messages[1]["content"]


def learner_state():
    user = turn().messages[1]["content"]
    state = json.loads(between(user, "Your knowledge state (concept: level):\n", "\n\nWithin reach"))
    assert list(state) == names(INDEX.ids)
    assert state[CONCEPT["IU3"]] == "struggling" and state[CONCEPT["IU1"]] == "knows_well"


def learner_connectable():
    user = turn().messages[1]["content"]
    assert bullets(user, "Within reach", "\n\nUnaware") == names(["IU3", "IU4", "IU7"])  # IU5: partial but explained


def learner_connectable_paper():
    user = turn(connectable="paper").messages[1]["content"]
    codes = state_codes(INDEX, LOW)
    expected = connectable_unknowns(INDEX, codes, (), mode="paper")
    assert bullets(user, "Within reach", "\n\nUnaware") == names(expected)
    assert "prerequisites you already have" in user
    assert all(codes[i] in (1, 2) for i in expected)


def learner_unaware():
    user = turn().messages[1]["content"]
    assert between(user, "\nUnaware (never use or name these):\n", "\n\nAlready explained").splitlines() == [f"- {n}" for n in names(
        ["IU6", "IU8", "IU9", "IU10", "IU11", "IU12", "IU13", "IU14"]
    )]


def learner_explained():
    user = turn().messages[1]["content"]
    assert f"Already explained well by the tutor:\n- {CONCEPT['IU5']}" in user


def learner_rule_state():
    system = turn().messages[0]["content"]
    assert "R1. Talk from your state." in system
    for level in ("knows_well:", "partial_understanding:", "struggling:", "unaware:"):
        assert level in system
    assert "natural mistake" in system and "uninformed guess" in system and "not an attempt" in system


def learner_rule_curiosity():
    assert "R2. Concepts within reach make you curious, not competent." in turn().messages[0]["content"]


def learner_rule_try_check():
    system = turn().messages[0]["content"]
    assert "R3. Try, then ask for a check." in system and '"attempt_verify" to true' in system
    assert "never attempted, even just after the tutor explained them" in system


def learner_rule_mode():
    low, high = text(turn()), text(turn(HIGH))
    assert "R4." in turn().messages[0]["content"]
    assert "Articulation mode: Deferential." in low and "Explicit" not in low and "Vague" not in low
    assert "Articulation mode: Explicit." in high and "Deferential" not in high and "Vague" not in high


def learner_rule_questions():
    system = turn().messages[0]["content"]
    assert "R5." in system
    for kind in ("diagnostic question", "verification question", "guiding question", "concept you are unaware of"):
        assert kind in system


def learner_constraints():
    system = turn().messages[0]["content"]
    assert "Do not go back over concepts the tutor has already explained well unless you are still struggling" in system
    assert "Never mention concepts you are unaware of." in system
    hinted = turn(stuck_hint=True, stop_hint=True).messages[1]["content"]
    assert "going in circles" in hinted and "overwhelmed" in hinted
    assert "going in circles" not in turn().messages[1]["content"]


def learner_output():
    system = turn().messages[0]["content"]
    assert "one or two sentences, no lists, no planning language" in system
    assert '"thought": private notes' in system and '"terminate" is always false' in system
    assert turn().json_schema["required"] == ["thought", "message", "attempt_verify", "terminate"]


def learner_no_ids():
    for states in (LOW, HIGH, [0] * INDEX.size):
        for req in (first(states), turn(states), turn(states, connectable="paper")):
            assert not IU_ID.search(text(req)), IU_ID.search(text(req))


def learner_prefix_stable():
    t2 = turn()
    longer = TRANSCRIPT + [["user", "So 2w + 3 is the length?"], ["assistant", "Yes. What is the perimeter?"]]
    t3 = turn(HIGH, longer)
    assert t2.messages[0] == t3.messages[0]
    u2, u3 = t2.messages[1]["content"], t3.messages[1]["content"]
    stable = u2[: u2.index("\n\n## Where you stand now")]
    assert u3.startswith(stable)  # problem + transcript so far: a prefix of the next turn's prompt
    other = render_user_turn(demo_items("math")[1], demo_graphs("math")["demo_math_02"], [0] * 11, TRANSCRIPT)
    assert other.messages[0] == t2.messages[0]  # one static system prompt for every session


# ---- learner simulator, first turn ---------------------------------------------------------------


def first_groups():
    user = first().messages[1]["content"]
    assert ITEM.question in user
    assert between(user, "Concepts you know well (knows_well):\n", "\n\n").splitlines() == [f"- {CONCEPT['IU1']}", f"- {CONCEPT['IU2']}"]
    assert between(user, "(partial_understanding):\n", "\n\n").splitlines() == [f"- {CONCEPT['IU4']}", f"- {CONCEPT['IU5']}"]
    assert between(user, "(struggling):\n", "\n\n").splitlines() == [f"- {CONCEPT['IU3']}", f"- {CONCEPT['IU7']}"]
    assert "(unaware; never use or name them)" in user


def first_behaviour():
    system = first().messages[0]["content"]
    for level in ("knows_well:", "partial_understanding:", "struggling:", "unaware:"):
        assert level in system
    assert "cannot use it, name it, hint at it or carry it out correctly" in system


def first_rules():
    system = first().messages[0]["content"]
    assert "genuine attempt" in system
    assert "Refer only to concepts you know well or partly understand" in system
    assert "Never name or allude to anything you are unaware of" in system
    assert "Do not propose a correct strategy" in system and "describe what you notice" in system
    assert "natural and concise" in system
    assert '"attempt_verify": false' in system and '"terminate": false' in system
    assert "one or two sentences" in system


# ---- signal extractor ---------------------------------------------------------------------------


def extractor_inputs():
    user = extractor().messages[1]["content"]
    graph = json.loads(between(user, "## Prerequisite graph of the problem\n", "\n\n## Reference answer"))
    assert [c["id"] for c in graph["concepts"]] == list(INDEX.ids)
    state = json.loads(between(user, "(concept id: level)\n", "\n\n## The student's latest"))
    assert state["IU3"] == "struggling"
    assert "## The student's latest message\nSo w is 8?" in user and "## The tutor's latest reply\nYes: 6w = 48" in user


def extractor_prior_for_attempts_only():
    user = extractor().messages[1]["content"]
    assert "## Earlier conversation (context for step 2 only)\n- User: How do I start?" in user
    assert "Use the earlier conversation only for this step" in extractor().messages[0]["content"]


def extractor_reference_analyst_only():
    req = extractor()
    assert "## Reference answer (for the analyst only" in req.messages[1]["content"] and ITEM.reference_answer in text(req)
    assert "use it only to check whether the tutor's substantive claims are correct" in req.messages[0]["content"]
    none = extractor(reference=False)
    assert "Do not invent one" in none.messages[1]["content"] and "do not invent a gold standard" in none.messages[0]["content"]


def extractor_step1():
    system = extractor().messages[0]["content"]
    assert "Step 1: teaching quality, from the tutor's LATEST reply only." in system
    assert "is \"not_mentioned\", however well it was taught before" in system
    assert "a bare definition is not enough" in system and "scaffolded questioning" in system
    assert 'When unsure between two labels, choose "shallow"' in system


def extractor_disqualifiers():
    system = extractor().messages[0]["content"]
    caps = between(system, 'caps the concept at "shallow":', "\n")
    for d in ("only named or labelled", "single sentence with no derivation, justification or example",
              "only echoes the student", "promises, generic questions or hints with no direction",
              "anything factually wrong"):
        assert d in caps


def extractor_step2():
    system = extractor().messages[0]["content"]
    assert "Step 2: the student's LATEST message" in system
    for label in ('"reasoning"', '"articulation"', '"none"', "even if it is wrong"):
        assert label in system
    assert '"assistant_response_role"' in system


def extractor_one_entry_per_iu():
    req = extractor()
    assert "exactly one entry per concept of the graph" in req.messages[0]["content"]
    assert f"each of the {INDEX.size} concepts" in req.messages[1]["content"]


# ---- tutors ---------------------------------------------------------------------------------------


def tutor_sees_nothing_hidden():
    for strategy in STRATEGIES:
        for item in (ITEM, QA):
            req = tutor(strategy, item)
            system = req.messages[0]["content"]
            assert not EVALUATION_WORDS.search(text(req)), (strategy, EVALUATION_WORDS.search(text(req)))
            assert item.reference_answer not in system and not IU_ID.search(system)
            assert "knows_well" not in system and GRAPH.nodes[3].description not in system


def tutor_simple():
    system = tutor("simple").messages[0]["content"]
    for phrase in ("understands, not just that they get the answer", "complete answer in your first reply",
                   "specific questions, confusions and attempts", "how much the student seems to understand",
                   "concrete examples"):
        assert phrase in system
    assert tutor("minimal").messages[0] == tutor("simple").messages[0]  # "minimal" is its old name
    assert tutor("minimal").prompt_version == "assistant_simple@v2"


def tutor_socratic():
    system = tutor("socratic").messages[0]["content"]
    for phrase in ("Never ask them to recall a fact", "exactly one move per reply", "No lists, no headings",
                   "two or three short sentences", "Never give the full answer, even when the student asks"):
        assert phrase in system


def tutor_adaptive():
    system = tutor("adaptive").messages[0]["content"]
    for phrase in ("judge the student's level again", "treat them as a novice", "one concept per reply",
                   "three or four plain sentences", "never introduce two new concepts", "The teaching part is required",
                   "up to two new elements; four or five sentences", "numbered walkthrough", "one sub-topic",
                   "do not hand them the complete answer"):
        assert phrase in system


def tutor_comprehensive():
    system = tutor("comprehensive").messages[0]["content"]
    assert "At most 10 sentences per reply." in system
    for phrase in ("cover the whole answer together with the prerequisites", "always cover new ground", "Never repeat"):
        assert phrase in system


def tutor_all_strategies():
    for strategy in ("socratic", "adaptive", "comprehensive"):
        system = tutor(strategy).messages[0]["content"]
        assert "never make up facts, sources or calculations" in system
        assert "hold even when the student asks for more" in system and "coherent" in system
    assert "never make up facts, sources or calculations" in tutor("simple").messages[0]["content"]


# ---- baselines -------------------------------------------------------------------------------------


def baseline_zs_level():
    for level, phrase in (("novice", "a fifth to a third"), ("intermediate", "half to two thirds"), ("advanced", "four fifths")):
        req = render_baseline_user(ITEM, "zero-shot", TRANSCRIPT, knowledge_level=level)
        assert phrase in between(req.messages[1]["content"], "## Knowledge level\n", "\n\n")
    req = render_baseline_user(ITEM, "zero-shot", TRANSCRIPT, knowledge_level="novice")
    system, user = req.messages[0]["content"], req.messages[1]["content"]
    assert ITEM.question in user and "- Assistant: Name the width w." in user
    for note in ("already has the task", "trivial arithmetic", "new or different task", "Write only the student's next message"):
        assert note in system
    assert "thought" not in req.json_schema["properties"]


def baseline_cot():
    req = render_baseline_user(ITEM, "zero-shot-cot", TRANSCRIPT, knowledge_level="novice")
    assert "## Knowledge level" not in text(req)
    system = req.messages[0]["content"]
    for step in ("what you currently understand", "what gaps or confusions remain", "what the tutor's last reply did",
                 "what would help you most next"):
        assert step in system
    assert req.json_schema["required"][:2] == ["thought", "message"]


def baseline_profile():
    profile = level_profile("novice", 7)
    req = render_baseline_user(ITEM, "zero-shot-cot-user-profile", TRANSCRIPT, profile=profile, graph=GRAPH,
                               initial_states=LOW, knowledge_level="novice")
    user = req.messages[1]["content"]
    assert profile in user and "novice" in profile and profile == level_profile("novice", 7)
    assert level_profile("advanced", 7) != profile
    state = json.loads(between(user, "## Starting knowledge (concept: level)\n", "\n\n## "))
    assert state[CONCEPT["IU3"]] == "struggling" and not IU_ID.search(text(req))
    assert "Keep the characteristics of the profile" in req.messages[0]["content"]


def baseline_expertqa_wording():
    for method in ("zero-shot", "zero-shot-cot"):
        assert "## Question\n" in render_baseline_user(QA, method, knowledge_level="novice").messages[1]["content"]
        assert "## Math problem\n" in render_baseline_user(ITEM, method, knowledge_level="novice").messages[1]["content"]


def baseline_termination():
    for method in ("zero-shot", "zero-shot-cot", "zero-shot-cot-user-profile"):
        req = render_baseline_user(ITEM, method, graph=GRAPH, initial_states=LOW, knowledge_level="novice")
        assert 'setting "terminate" to true when the task is solved' in req.messages[0]["content"]


# ---- judges ------------------------------------------------------------------------------------


def judges_v2():
    pairs = TRANSCRIPT + [["user", "Got it, thanks."], ["assistant", "Great."]]
    rater = render_rater(ITEM, pairs, knowledge_level="novice")
    for field in ("information_calibration", "perceived_overload", "quality_score", "perceived_learning", "ic_reasoning"):
        assert field in rater.messages[0]["content"]
    assert "novice" in rater.messages[1]["content"] and rater.prompt_version == "rater@v2"
    judge = render_termination_judge(ITEM, pairs)
    assert "[Learner 2] Got it, thanks." in judge.messages[1]["content"] and "problem_completion" in judge.messages[0]["content"]
    assert "unproductive_stalling" in render_termination_judge(QA, pairs).messages[0]["content"]


def no_context_block():
    reqs = [first(), turn(), extractor(), *(tutor(s) for s in STRATEGIES), render_rater(ITEM, TRANSCRIPT),
            render_termination_judge(ITEM, TRANSCRIPT),
            *(render_baseline_user(ITEM, m, graph=GRAPH, initial_states=LOW, knowledge_level="novice")
              for m in ("zero-shot", "zero-shot-cot", "zero-shot-cot-user-profile"))]
    for req in reqs:
        assert req.prompt_version.endswith("@" + DEFAULT_PROMPTS)
        body = text(req)
        assert "### context (json)" not in body and "```json" not in body and "bookkeeping" not in body
        assert req.offline_facts and req.offline_facts["template"] == req.prompt_version.split("@")[0]


ELEMENTS: dict[str, Callable[[], None]] = {
    "L-transcript": learner_transcript,
    "L-problem": learner_problem,
    "L-density": learner_density,
    "L-state": learner_state,
    "L-connectable": learner_connectable,
    "L-connectable-paper": learner_connectable_paper,
    "L-unaware": learner_unaware,
    "L-explained": learner_explained,
    "L-R1": learner_rule_state,
    "L-R2": learner_rule_curiosity,
    "L-R3": learner_rule_try_check,
    "L-R4": learner_rule_mode,
    "L-R5": learner_rule_questions,
    "L-constraints": learner_constraints,
    "L-output": learner_output,
    "L-no-ids": learner_no_ids,
    "L-prefix": learner_prefix_stable,
    "F-groups": first_groups,
    "F-behaviour": first_behaviour,
    "F-rules": first_rules,
    "X-inputs": extractor_inputs,
    "X-prior": extractor_prior_for_attempts_only,
    "X-reference": extractor_reference_analyst_only,
    "X-step1": extractor_step1,
    "X-disqualifiers": extractor_disqualifiers,
    "X-step2": extractor_step2,
    "X-one-per-iu": extractor_one_entry_per_iu,
    "T-hidden": tutor_sees_nothing_hidden,
    "T-simple": tutor_simple,
    "T-socratic": tutor_socratic,
    "T-adaptive": tutor_adaptive,
    "T-comprehensive": tutor_comprehensive,
    "T-all": tutor_all_strategies,
    "B-zs-level": baseline_zs_level,
    "B-cot": baseline_cot,
    "B-profile": baseline_profile,
    "B-expertqa": baseline_expertqa_wording,
    "B-terminate": baseline_termination,
    "J-judges": judges_v2,
    "P-no-context": no_context_block,
}


@pytest.mark.parametrize("element", sorted(ELEMENTS))
def test_prompt_carries_element(element):
    ELEMENTS[element]()


def test_docs_table_lists_exactly_the_checked_elements():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "prompts.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([A-Z]-[a-z0-9-]+|[A-Z]-R\d)` \|", doc, re.M))
    assert documented == set(ELEMENTS)
