"""Every element of spec §12.7 and §12.8 is in the prompt set v3 request that should carry it
(one check per element; the baselines' checks also cover what they must NOT carry).

Each check renders real requests with the renderers the loop uses (prompt set v3, demo items, turn
1 and a later turn) and fails when the rendered prompt loses the element. ``docs/prompts.md`` maps
the same element ids to template sections; the last test keeps the table and these checks in step.
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from functools import partial
from pathlib import Path
from typing import Callable

import pytest

from ray_knowsim.demo import demo_graphs, demo_items
from ray_knowsim.schema.graph import build_index
from ray_knowsim.prompts import judges as J
from ray_knowsim.prompts import render as R
from ray_knowsim.prompts.views import connectable_unknowns, state_codes
from ray_knowsim.rules.prerequisites import density
from ray_knowsim import simulators
from ray_knowsim.simulators.profiles import level_profile
from ray_knowsim.strategies import get_strategy

V3 = "v3"
render_user_first = partial(R.render_user_first, prompts=V3)
render_user_turn = partial(R.render_user_turn, prompts=V3)
render_extractor = partial(R.render_extractor, prompts=V3)
render_assistant = partial(R.render_assistant, prompts=V3)
render_baseline_user = partial(simulators.render_baseline_user, prompts=V3)
render_rater = partial(J.render_rater, prompts=V3)
render_termination_judge = partial(J.render_termination_judge, prompts=V3)

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
MID = [3] * 6 + [1] * 8  # 0.3 <= density < 0.6
TRANSCRIPT = [["user", "How do I start?"], ["assistant", "Name the width w."]]
IU_ID = re.compile(r"\bIU\d+\b")
EVALUATION_WORDS = re.compile(r"evaluat|benchmark|simulat|assess|being tested|test double|offline|bookkeeping", re.I)
STRATEGIES = ("simple", "socratic", "adaptive", "comprehensive")
BASELINES = ("zero-shot", "zero-shot-cot", "zero-shot-cot-user-profile")


def text(req) -> str:
    return "\n\n".join(m["content"] for m in req.messages)


def turn(states=LOW, transcript=TRANSCRIPT, item=ITEM, graph=GRAPH, **kw):
    explained = [LABEL["IU5"]] if item is ITEM else []
    return render_user_turn(item, graph, states if item is ITEM else [0] * len(graph.nodes), transcript,
                            explained=explained, **kw)  # fmt: skip


def first(states=LOW, item=ITEM, graph=GRAPH):
    return render_user_first(item, graph, states if item is ITEM else [0] * len(graph.nodes))


def extractor(reference: bool = True, prior=TRANSCRIPT):
    item = ITEM if reference else ITEM.model_copy(update={"reference_answer": ""})
    return render_extractor(item, GRAPH, LOW, prior, "So w is 8?", "Yes: 6w = 48 gives w = 8.")


def tutor(strategy: str, item=ITEM):
    return render_assistant(item, get_strategy(strategy), TRANSCRIPT + [["user", "Why 2w + 3?"]])


def baseline(method: str, transcript=TRANSCRIPT, item=ITEM, level="novice"):
    graph = GRAPH if item is ITEM else QA_GRAPH
    states = LOW if item is ITEM else [0] * len(graph.nodes)
    return render_baseline_user(item, method, transcript, profile=level_profile(level, 7), graph=graph,
                                initial_states=states, knowledge_level=level)  # fmt: skip


def system(req) -> str:
    return req.messages[0]["content"]


def between(body: str, start: str, end: str) -> str:
    return body.split(start, 1)[1].split(end, 1)[0]


def names(ids) -> list[str]:
    return [CONCEPT[i] for i in ids]


def bullets(body: str, heading_start: str, next_heading: str) -> list[str]:
    block = between(body, heading_start, next_heading)
    return [line[2:] for line in block.strip().splitlines()[1:] if line.startswith("- ")]


def has_all(body: str, *phrases: str) -> None:
    missing = [p for p in phrases if p not in body]
    assert not missing, missing


def schema_text(req) -> str:
    return json.dumps(req.json_schema)


# ---- learner simulator, follow-up turns ----------------------------------------------------------


def learner_transcript():
    user = turn().messages[1]["content"]
    assert "## The chat so far\n- You: How do I start?\n- Tutor: Name the width w.\n\n## Where you stand" in user


def learner_problem():
    assert ITEM.question in turn().messages[1]["content"]
    assert "## The question\n" + QA.question in turn(item=QA, graph=QA_GRAPH).messages[1]["content"]


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


def learner_role():
    intro = system(turn()).split("\n\n")[0]
    has_all(intro, "You are role-playing a learner partway through a chat with an AI tutor", "you never take the tutor's part",
            "The tutor knows the problem from your first message, so do not restate it",
            "already reflects everything the tutor has said so far")
    assert "How to behave:\nR1." in system(turn())


def learner_rule_state():
    rule = between(system(turn()), "R1.", "R2.")
    has_all(rule, "Your state decides how you talk", "knows_well: proper terms, said with confidence",
            "partial_understanding: a rough paraphrase with muddled details and hedges",
            "struggling: the word is familiar but the idea has not clicked", "natural slip",
            "unaware: it never comes to mind", "uninformed guess", "does not count as an attempt")


def learner_rule_curiosity():
    rule = between(system(turn()), "R2.", "R3.")
    has_all(rule, "Concepts within reach (listed below) make you curious, not capable", "wonder aloud",
            "whenever you try to apply one, it comes out wrong")


def learner_rule_try_check():
    rule = between(system(turn()), "R3.", "R4.")
    has_all(rule, "Have a go, then ask to be checked", "right, half right or slightly off",
            "struggling or within-reach concept carries a natural slip",
            "never attempt a concept you are unaware of, not even right after the tutor has explained it",
            'set "attempt_verify" to true')


def learner_rule_mode():
    low, mid, high = text(turn()), text(turn(MID)), text(turn(HIGH))
    assert "R4. How much you take the lead depends on your articulation mode" in system(turn())
    assert "Articulation mode: Deferential. You hang back" in low and "Explicit" not in low and "Vague" not in low
    assert "Articulation mode: Vague. You take only a partial part" in mid and "Explicit" not in mid and "Deferential" not in mid
    assert "Articulation mode: Explicit. You take an active part" in high and "Deferential" not in high and "Vague" not in high


def learner_rule_questions():
    rule = between(system(turn()), "R5.", "Limits:")
    for kind in ("- Diagnostic (", "- Verification (", "- Guiding (", "- About a concept you are unaware of:"):
        assert kind in rule
    has_all(rule, "low knowledge density may think they know more", "prerequisites are solid for you",
            "with high density, answer with substance or steer", "which is not an attempt")


def learner_constraints():
    limits = between(system(turn()), "Limits:", "Ending the chat")
    has_all(limits, "Do not return to concepts the tutor has already explained well, unless you are still struggling",
            "Never mention a concept you are unaware of.", "If a hint appears")
    hinted = turn(stuck_hint=True, stop_hint=True).messages[1]["content"]
    assert "circling the same point" in hinted and "swamped" in hinted
    assert "circling" not in turn().messages[1]["content"]


def learner_output():
    body = system(turn())
    has_all(body, '"thought": private, never shown to the tutor; all your planning, remarks about your state and any commentary',
            '"message": what the tutor reads: plain chat text of one or two sentences, without lists',
            '"terminate" is always false')
    has_all(body, "Reply with one JSON object and nothing else:",
            '"attempt_verify": true only when your message offers your own attempt and asks the tutor to check it',
            '"terminate": as the rule on ending the chat above says')
    assert 'set "terminate" to true only once you have solved the problem' in system(turn(allow_terminate=True))
    req = turn()
    assert req.json_schema["required"] == ["thought", "message", "attempt_verify", "terminate"]
    assert "maxLength" not in schema_text(req)  # "one or two sentences" is an instruction, not a decoding cut


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
    assert other.messages[0] == t2.messages[0]  # one static system prompt for every session of a task


# ---- learner simulator, first turn ---------------------------------------------------------------


def first_groups():
    user = first().messages[1]["content"]
    assert ITEM.question in user
    assert between(user, "Concepts you know well (knows_well):\n", "\n\n").splitlines() == [f"- {CONCEPT['IU1']}", f"- {CONCEPT['IU2']}"]
    assert between(user, "(partial_understanding):\n", "\n\n").splitlines() == [f"- {CONCEPT['IU4']}", f"- {CONCEPT['IU5']}"]
    assert between(user, "(struggling):\n", "\n\n").splitlines() == [f"- {CONCEPT['IU3']}", f"- {CONCEPT['IU7']}"]
    unaware = between(user, "(unaware; never use or name them):\n", "\n\n").splitlines()
    assert unaware == [f"- {n}" for n in names(["IU6", "IU8", "IU9", "IU10", "IU11", "IU12", "IU13", "IU14"])]


def first_output():
    fmt = system(first()).split("Reply with one JSON object and nothing else:")[1]
    has_all(fmt, '"thought": private, never shown to the tutor; all your planning, remarks about your knowledge',
            '"message": what the tutor reads: plain chat text, without lists and without any talk about planning',
            '"attempt_verify": false', '"terminate": false')
    assert first().json_schema["required"] == ["thought", "message", "attempt_verify", "terminate"]
    assert first().messages[1]["content"].endswith("Write your opening message to the tutor as the JSON object described above.")


def first_behaviour():
    groups = between(system(first()), "sorted into one of four groups", "Planning and writing")
    has_all(groups, "knows_well: you use its proper terms with confidence",
            "partial_understanding: your picture of it is rough", "struggling: the word is familiar",
            "a natural slip comes along", "unaware: it does not occur to you", "cannot carry it out correctly",
            "guess, ask something vague about what you see, or leave that part out")


def first_rules():
    rules = between(system(first()), "Planning and writing the opening:", "Reply with")
    has_all(rules, "make a real attempt from where you start", "Draw only on concepts you know well or partly understand",
            "Never name, hint at or allude to a concept from your unaware group",
            "Do not put forward a working method that rests on concepts you have not learned",
            "mostly struggling and unaware, talk instead about what you notice", "where you lose the thread",
            "natural")


def first_opening_states_problem():
    """§12.8: the tutor never sees the problem, so the opening puts all of it; no short cap anywhere."""
    req = first()
    body = system(req)
    has_all(body, "The tutor has never been shown the problem", "telling the tutor the whole problem",
            "with nothing left out", "A short summary the tutor could not work from is not enough",
            "This first message has no sentence limit")
    assert "one or two sentences" not in body and "maxLength" not in schema_text(req)
    assert "The tutor has never been shown the question" in system(first(item=QA, graph=QA_GRAPH))


def first_thought_plans():
    rules = between(system(first()), "Planning and writing the opening:", "Reply with")
    has_all(rules, 'Plan first, inside "thought"', "which of your concepts you are able to touch",
            "what a learner at your level would naturally want to ask first")


def opening_told_the_same():
    """§12.8: structured and baseline learners get the same words about stating the problem."""
    for item, graph in ((ITEM, GRAPH), (QA, QA_GRAPH)):
        structured = system(first(item=item, graph=graph))
        rule = structured.split("\n\n")[1]
        assert rule.startswith("The tutor has never been shown the") and "whole" in rule
        for method in BASELINES:
            assert rule in system(baseline(method, [], item=item)), method
            assert rule in system(baseline(method, TRANSCRIPT, item=item)), method  # a static system prompt
            opening = baseline(method, [], item=item).messages[1]["content"]
            assert "## The chat so far\n(No messages yet: this is your opening message.)" in opening, method


# ---- signal extractor ---------------------------------------------------------------------------


def extractor_inputs():
    intro = system(extractor()).split("\n\n")[0]
    has_all(intro, "You are an analyst who reads tutoring chats", "one exchange at a time",
            "label it concept by concept, using the prerequisite graph of the problem")
    user = extractor().messages[1]["content"]
    graph = json.loads(between(user, "## Prerequisite graph of the problem\n", "\n\n## Reference answer"))
    assert [c["id"] for c in graph["concepts"]] == list(INDEX.ids)
    state = json.loads(between(user, "(concept id: level)\n", "\n\n## The student's newest"))
    assert state["IU3"] == "struggling"
    assert "## The student's newest message\nSo w is 8?" in user and "## The tutor's newest reply\nYes: 6w = 48" in user


def extractor_prior_for_attempts_only():
    user = extractor().messages[1]["content"]
    assert "## Earlier conversation (context for step 2 only)\n- Student: How do I start?\n- Tutor: Name" in user
    assert "The earlier conversation is there for this step only" in between(system(extractor()), "Step 2:", "The reference")
    first_turn = extractor(prior=[]).messages[1]["content"]
    assert "## Earlier conversation (context for step 2 only)\n(Nothing: this is the first exchange" in first_turn


def extractor_reference_analyst_only():
    req = extractor()
    assert "## Reference answer (for you alone; the student and the tutor never see it)" in req.messages[1]["content"]
    assert ITEM.reference_answer in text(req)
    has_all(system(req), "Use it only to check the tutor's substantive statements for correctness",
            "it is not something the tutor said", "When none is given, do not make up a standard answer")
    assert "Do not make one up" in extractor(reference=False).messages[1]["content"]


def extractor_step1():
    step = between(system(extractor()), "Step 1:", "Step 2:")
    has_all(step, "judged from the tutor's NEWEST reply alone", 'leaves out is "not_mentioned", however well it was covered before',
            "this reply by itself teaches the concept", "a direct explanation", "why or how it works",
            "stating a definition is not enough", "guided questioning that is aimed at a particular gap",
            "starts from what the student has shown", "makes the student spell the substance out",
            '"shallow": the concept comes up in the reply but is not properly taught',
            '"not_mentioned": the concept does not come up')


def extractor_disqualifiers():
    caps = between(system(extractor()), 'keeps a concept at "shallow" at best:', "\n")
    has_all(caps, "only names or labels it", "a single sentence without any derivation, justification or example",
            "merely repeats what the student said", "promises, generic questions or hints that point nowhere",
            "something factually wrong")


def extractor_tie_break():
    """§12.8: "when unsure, shallow" only between well_explained and shallow; shallow vs
    not_mentioned is decided on whether the concept appears."""
    rule = between(system(extractor()), "Close calls.", "\n")
    has_all(rule, 'Between "well_explained" and "shallow", pick "shallow" when you are unsure',
            'Between "shallow" and "not_mentioned", decide only on whether the concept appears',
            "Do not count a concept as present just to be safe")
    assert "between two labels" not in system(extractor())  # v2's blanket tie-break


def extractor_labels_only():
    body = system(extractor())
    has_all(body, "Labelling is your whole job", "knowledge changes is computed elsewhere from your labels",
            "from lowest to highest: unaware, struggling, partial_understanding, knows_well")


def extractor_rationale_first():
    req = extractor()
    has_all(system(req), 'write your rationale in "teaching_quality_reasoning" first, then give the label',
            'rationale in "user_attempt_reasoning" before the label')
    slot = req.json_schema["properties"]["iu_analysis"]["prefixItems"][0]["properties"]
    order = list(slot)
    assert order.index("teaching_quality_reasoning") < order.index("teaching_quality")
    assert order.index("user_attempt_reasoning") < order.index("user_attempt_type")
    assert "maxLength" not in schema_text(req)  # a rationale is never cut mid-thought


def extractor_step2():
    step = between(system(extractor()), "Step 2:", "The reference")
    has_all(step, "the student's NEWEST message, concept by concept", '"reasoning": the message adds something of its own',
            "no earlier tutor reply contains", "even when it is wrong", '"articulation": the message puts into words',
            '"none": the message only acknowledges, asks a clarifying question', '"assistant_response_role"')


def extractor_one_entry_per_iu():
    req = extractor()
    assert "exactly one entry for every concept of the graph, in graph order" in system(req)
    assert f"each of the {INDEX.size} concepts" in req.messages[1]["content"]


# ---- tutors ---------------------------------------------------------------------------------------


def tutor_sees_nothing_hidden():
    for strategy in STRATEGIES:
        for item in (ITEM, QA):
            req = tutor(strategy, item)
            assert not EVALUATION_WORDS.search(text(req)), (strategy, EVALUATION_WORDS.search(text(req)))
            body = system(req)
            assert item.reference_answer not in body and not IU_ID.search(body)
            assert "knows_well" not in body and GRAPH.nodes[3].description not in body
            assert item.question not in text(req)  # the problem reaches the tutor only through the learner


def tutor_simple():
    body = system(tutor("simple"))
    has_all(body, "come to understand the material; reaching the answer is not the point", "Hold back the full solution in your first reply",
            "their particular questions, confusions and attempts", "how much they appear to grasp",
            "plain language, with concrete examples")
    assert tutor("minimal").messages[0] == tutor("simple").messages[0]  # "minimal" is its old name
    assert tutor("minimal").prompt_version == "assistant_simple@v3"
    assert "Rules for every reply" not in body  # the fixed prompt of the model arm has no strategy rules


def tutor_base():
    """§12.8: the three strategies open with the same base for a task: math framing, ExpertQA base."""
    for item, start in ((ITEM, "You are a math tutor. What matters is that the learner comes to understand how to solve"),
                        (QA, "You are an expert question-and-answer assistant.")):
        bases = {system(tutor(s, item)).split("\n\n")[0] for s in ("socratic", "adaptive", "comprehensive")}
        assert len(bases) == 1 and next(iter(bases)).startswith(start), bases
    has_all(system(tutor("socratic", QA)).split("\n\n")[0], "correctly and clearly", "be exact",
            "organise your explanation well", "open about what is uncertain")


def tutor_socratic():
    body = system(tutor("socratic"))
    has_all(body, "Exactly one move per reply: a single question; or a hint of one sentence followed by a single question",
            "still stuck after several tries, a minimal clarification", "At most two or three short sentences",
            "No lists, no headings, no step-by-step walkthroughs", "Never hand over the complete answer, not even when asked")


def tutor_socratic_kinds():
    body = system(tutor("socratic"))
    has_all(between(body, "Questions you must not ask", "\n"), "memory or a quick look-up answers them",
            '"list all the ..."', '"what is the name of ..."', '"what do studies show about ..."')
    has_all(between(body, "Questions to ask instead", "\n"), "why this matters in this case", "what a particular sign or result implies",
            "what would happen if something were missing", "how two factors act on each other", "before seeing the evidence")
    assert "complete set of factors, cases or options" in body


def tutor_socratic_checks():
    body = system(tutor("socratic"))
    has_all(body, "grasp why each piece holds and how the pieces fit together",
            "Finding facts is something the learner does on their own between turns",
            "Hard rules (they outrank everything else here, and anything the learner asks for)",
            "am I stating the very thing the learner should reason their way to? If so, turn it into a question",
            "asks you to explain everything, give only the next insight", "a question that shows whether it landed")


def tutor_socratic_contrast():
    body = system(tutor("socratic"))
    contrast = between(body, "The difference, on one example", "Rules for every reply")
    has_all(contrast, "(the learner asks what makes a reaction speed up)", "Recall-level, not allowed:", "Reasoning-level, allowed:")


def tutor_adaptive():
    body = system(tutor("adaptive"))
    has_all(body, "Your approach is adaptive: you fit each reply to the learner's current level", "Judge the level again on every turn", "If you cannot tell, treat the learner as a novice",
            "Novice: one concept or one definition", "three or four plain sentences", "Never bring in two new concepts at once",
            "teach one new element, then point to what to do next", "up to two units", "four or five sentences in all",
            "no numbered lists", "one sub-topic per reply", "do not give them the complete answer")


def tutor_adaptive_cues():
    cues = between(system(tutor("adaptive")), "Judge the level again", "The unit you teach")
    has_all(cues, "Novice: the question is hazy or confused and uses none of the field's vocabulary",
            "Intermediate: partial grasp, a few of the field's terms, and an attempt at reasoning",
            "Advanced: the field's terms used accurately, and most of the reasoning already on the page",
            "move them up a level and cut back how much you explain")


def tutor_adaptive_units():
    body = system(tutor("adaptive"))
    has_all(body, "A longer chain of reasoning is spread over several turns", "Build the idea first; you may close with one question",
            "do not start a reply with a question while the learner still has nothing to reason from",
            "one logical step (a short chain is fine if every link serves the same purpose)",
            "and pin down any misconception", "whatever clears up the exact point they are stuck on",
            "moves forward by default", "only to fix a misconception, to settle a subtle point, or when the learner explicitly asks why",
            "confirms and directs but has no teaching sentence is incomplete",
            "Hard rules (they outrank explicit requests from the learner)", "The unit you teach in one reply, by level:\n- Novice")


def tutor_adaptive_contrasts():
    contrasts = between(system(tutor("adaptive")), "Two contrasts:", "Rules for every reply")
    has_all(contrasts, "the rest of the solution in five steps", "explain the one next move",
            "A stuck novice", "technical terms", "the key idea in plain words")


def tutor_comprehensive():
    body = system(tutor("comprehensive"))
    has_all(body, "First reply: complete and self-contained, covering the full answer together with its prerequisites and connections",
            "Never restate what an earlier reply already said", "Keep each reply to 10 sentences or fewer")
    later = between(body, "Later replies, by case:", "Never restate")
    has_all(later, "explain that part and link it to something you have not shown yet",
            "confirm or correct it, explain why, then widen the picture", "open a new facet, an example or an analogy")


def tutor_comprehensive_scope():
    body = system(tutor("comprehensive"))
    has_all(body, "Treat each question as a way into the whole area around it", "what it rests on",
            "how it links to other ideas", "the questions the learner is likely to ask next, which you answer before they come up",
            "When unsure how much context to give, give more")


def tutor_comprehensive_new_ground():
    body = system(tutor("comprehensive"))
    has_all(body, "If nothing new is left to add, tell the learner so plainly and suggest a new direction",
            "Make every sentence carry something", "lead with whichever new idea matters most")


def tutor_comprehensive_contrast():
    body = system(tutor("comprehensive"))
    contrast = between(body, "A contrast, for a learner who writes", "Rules for every reply")
    has_all(contrast, "I still don't get it", "Repeating, not allowed:", "Expanding:")


def tutor_all_strategies():
    rules = {system(tutor(s)).split("Rules for every reply:")[1] for s in ("socratic", "adaptive", "comprehensive")}
    assert len(rules) == 1, rules  # one shared text
    has_all(next(iter(rules)), "keep to this approach and stay consistent with your earlier replies",
            "do not invent facts, sources, citations or calculations", "still hold when the learner asks for more")


# ---- baselines -------------------------------------------------------------------------------------


def baseline_zs_level():
    for level, phrase in (("novice", "one fifth and one third"), ("intermediate", "half to two thirds"), ("advanced", "four fifths")):
        req = baseline("zero-shot", level=level)
        assert phrase in between(req.messages[1]["content"], "## Your knowledge level\n", "\n\n")
    req = baseline("zero-shot")
    has_all(between(req.messages[1]["content"], "## Your knowledge level\n", "\n\n"), "need a good deal of guidance",
            "ask broad and basic questions", "often unsure")
    user = req.messages[1]["content"]
    assert ITEM.question in user and "- Tutor: Name the width w." in user
    has_all(system(req), "Write only your next message to the tutor",
            "Play the student at the knowledge level given below: it says how much of what the problem needs you already know",
            'Reply with one JSON object and nothing else: {"message":')
    assert "thought" not in req.json_schema["properties"]


def baseline_guidelines():
    """§12.8: the paper's student guidelines 2-5, in every baseline."""
    for method in BASELINES:
        guide = between(system(baseline(method)), "How to play the student:", "Notes:")
        has_all(guide, "Every message asks or claims something, so that it shows what you understand, what confuses you, or how you are reasoning",
                "Respond to what the tutor gives you (explanations, hints, questions), and let your progress show",
                "You may get things wrong in the ways real students do", "being able to solve the problem yourself")
        assert "understanding the answer to the question" in system(baseline(method, item=QA))


def baseline_notes():
    for method in BASELINES:
        body = system(baseline(method))
        notes = between(body, "Notes:", "In the chat below")
        has_all(notes, "Do not ask about simple arithmetic or basic steps", "Do not ask for a new problem, not even once this one is done")
        assert "From then on the tutor knows the problem, so later messages do not repeat it" in body


def baseline_not_knowsim():
    """§12.8: what the baselines must NOT carry: KnowSim's knowledge-consistency rules (they are the
    method under validation) and any push for brevity beyond the paper's."""
    consistency = re.compile(r"stay consistent with it|unaware of until|never use|do not use ideas|uncertainty with|"
                             r"natural slip|within reach|articulation mode|knowledge_density|connectable|"
                             r"cannot (use|apply)|struggl", re.I)
    brevity = re.compile(r"\bshort\b(?! summary)|\bbrief|concise|one or two sentences|\bterse|keep (it|your message)s? ", re.I)
    for method in BASELINES:
        for transcript in ([], TRANSCRIPT):
            body = system(baseline(method, transcript))
            assert not consistency.search(body), (method, consistency.search(body))
            assert not brevity.search(body), (method, brevity.search(body))
            assert "maxLength" not in schema_text(baseline(method, transcript))


def baseline_cot():
    for method in ("zero-shot-cot", "zero-shot-cot-user-profile"):
        req = baseline(method)
        assert "## Your knowledge level" not in text(req) and ITEM.question in req.messages[1]["content"]
        body = system(req)
        steps = between(body, 'Thinking first: before the message, think it through as the student, in "thought":',
                        'Only "message" reaches the tutor.')
        has_all(steps, "1. what you understand so far;", "2. which gaps or uncertainties remain;",
                "3. what the tutor's last message did (explained, asked, corrected, hinted);",
                "4. what would help you make progress now;", "5. what you need the tutor to clarify;",
                "6. whether you are ready to take the next step yourself")
        assert 'Reply with one JSON object and nothing else: {"thought": "<your thinking, as the student>", "message":' in body
        assert '6. whether you are ready to take the next step yourself' in body and '\nOnly "message" reaches the tutor.\n' in body
        assert req.json_schema["required"][:2] == ["thought", "message"]


def baseline_profile():
    profile = level_profile("novice", 7)
    req = baseline("zero-shot-cot-user-profile")
    user = req.messages[1]["content"]
    assert profile in user and "novice" in profile and profile == level_profile("novice", 7)
    assert level_profile("advanced", 7) != profile
    state = json.loads(between(user, "## Your starting knowledge (concept: level)\n", "\n\n## "))
    assert state[CONCEPT["IU3"]] == "struggling" and not IU_ID.search(text(req))
    has_all(system(req), "Keep the characteristics of the profile in every message",
            "The starting knowledge lists the concepts involved and how well you knew each one before the chat began",
            "7. how a student with your profile would put all this into words")


def baseline_expertqa_wording():
    for method in BASELINES:
        qa, math = baseline(method, item=QA), baseline(method)
        assert "## The question\n" in qa.messages[1]["content"] and "with a question." in system(qa)
        assert "## The problem\n" in math.messages[1]["content"] and "with a problem." in system(math)


def baseline_termination():
    for method in BASELINES:
        body = system(baseline(method))
        assert ('set "terminate" to true when the problem is solved, when it has been fully explained to you, '
                "or when carrying on is getting you nowhere") in body
        held = render_baseline_user(ITEM, method, TRANSCRIPT, graph=GRAPH, initial_states=LOW, allow_terminate=False)
        assert 'Ending the chat: "terminate" is always false.' in system(held)


# ---- judges ------------------------------------------------------------------------------------


def judge_interaction_quality():
    """§12.8: IQ is the quality of the interaction as a person would rate it, on five bands; not learning."""
    pairs = TRANSCRIPT + [["user", "Got it, thanks."], ["assistant", "Great."]]
    rater = render_rater(ITEM, pairs, knowledge_level="novice")
    body = system(rater)
    iq = between(body, '"quality_score" (1 to 10):', '- "perceived_learning"')
    has_all(iq, "the overall quality of the student's interaction with the tutor", "1-2: unhelpful, confusing or frustrating",
            "3-4: offers little guidance of any use", "5-6: adequate, though thin or not always clear",
            "7-8: clear, responsive and helpful", "9-10: excellent",
            "Rate the interaction itself, not its outcome", "how much they learned, is no part of this score")
    assert "moved the student forward" not in body  # v2 folded progress into quality
    has_all(body, "Give four ratings:", '"information_calibration" (0 to 1)', '"perceived_overload" (0 to 1)',
            '- "perceived_learning" (1 to 10): how much the student would feel they learned by the end',
            '"ic_reasoning", "po_reasoning", "quality_reasoning", "pl_reasoning"',
            "Reply with one JSON object and nothing else, with the eight fields above.")
    user = rater.messages[1]["content"]
    assert "## The student's level\nnovice" in user and ITEM.question in user and rater.prompt_version == "rater@v3"


def judge_termination():
    pairs = TRANSCRIPT + [["user", "Got it, thanks."], ["assistant", "Great."]]
    judge = render_termination_judge(ITEM, pairs)
    user, body = judge.messages[1]["content"], system(judge)
    assert "[Student 2] Got it, thanks." in user and ITEM.question in user and "(2 student messages)" in user
    has_all(body, "For each one, give a one-sentence summary", '"improving", "stalled" or "regressing"',
            '- "problem_completion": the student has reached the answer', '- "problem_shift": the student has moved on',
            '- "circular_queries": the student keeps asking the same thing', 'the reason is "max_turns"',
            'Reply with one JSON object and nothing else: {"turn_analysis":')
    qa = system(render_termination_judge(QA, pairs))
    has_all(qa, '- "comprehension_satisfied": the student says or shows', '- "unproductive_stalling": the chat goes round')
    assert "problem_completion" not in qa


# ---- every role -------------------------------------------------------------------------------------


def transcript_labels_match_instructions():
    """§12.8: a transcript calls the speakers what the instructions of the role reading it call them."""
    cases = [(turn(), '"You" are the learner and "Tutor" is the tutor', "- You: How do I start?\n- Tutor: Name"),
             (extractor(), '"Student" is the student and "Tutor" is the tutor', "- Student: How do I start?\n- Tutor: Name"),
             (render_rater(ITEM, TRANSCRIPT), '"Student" is the student and "Tutor" is the tutor', "- Student: How do I start?\n- Tutor: Name"),
             (render_termination_judge(ITEM, TRANSCRIPT), 'labelled "[Student n]"', "[Student 1] How do I start?\n[Tutor] Name")]
    cases += [(baseline(m), '"You" are the student and "Tutor" is the tutor', "- You: How do I start?\n- Tutor: Name") for m in BASELINES]
    for req, named, shown in cases:
        assert named in system(req), req.prompt_version
        assert shown in req.messages[1]["content"], req.prompt_version
        assert "- User:" not in text(req) and "- Assistant:" not in text(req)


def no_schema_cuts():
    """§12.8 / issue 22.3: no v3 decoding schema bounds free text; cost is bounded by max_tokens."""
    reqs = [first(), turn(), extractor(), render_rater(ITEM, TRANSCRIPT), render_termination_judge(ITEM, TRANSCRIPT),
            *(baseline(m, t) for m in BASELINES for t in ([], TRANSCRIPT))]
    for req in reqs:
        assert req.json_schema is not None and "maxLength" not in schema_text(req), req.prompt_version
        assert req.max_tokens >= 3000, req.prompt_version


def json_only():
    """Every structured role is asked for one JSON object and nothing else, and its prompt closes by asking for it."""
    closing = {"user_first": "Write your opening message to the tutor as the JSON object described above.",
               "user_turn": "Write your next message to the tutor as the JSON object described above.",
               "extractor": "as the JSON object described above.",
               "rater": "Rate this chat as the JSON object described above.",
               "termination_judge": "Decide the ending turn as the JSON object described above."}
    closing.update({f"baseline_{m}": "Write your next message to the tutor as the JSON object described above."
                    for m in ("zero_shot", "zero_shot_cot", "cot_profile")})
    reqs = [first(), turn(), extractor(), render_rater(ITEM, TRANSCRIPT), render_termination_judge(ITEM, TRANSCRIPT),
            *(baseline(m) for m in BASELINES)]
    for req in reqs:
        name = req.prompt_version.split("@")[0]
        assert "Reply with one JSON object and nothing else" in system(req), name
        assert req.messages[-1]["content"].endswith(closing[name]), name


def no_context_block():
    reqs = [first(), turn(), extractor(), *(tutor(s) for s in STRATEGIES), render_rater(ITEM, TRANSCRIPT),
            render_termination_judge(ITEM, TRANSCRIPT), *(baseline(m) for m in BASELINES)]
    for req in reqs:
        assert req.prompt_version.endswith("@" + V3), req.prompt_version
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
    "L-role": learner_role,
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
    "F-output": first_output,
    "F-opening": first_opening_states_problem,
    "F-plan": first_thought_plans,
    "O-same-opening": opening_told_the_same,
    "X-inputs": extractor_inputs,
    "X-prior": extractor_prior_for_attempts_only,
    "X-reference": extractor_reference_analyst_only,
    "X-step1": extractor_step1,
    "X-disqualifiers": extractor_disqualifiers,
    "X-tie-break": extractor_tie_break,
    "X-labels-only": extractor_labels_only,
    "X-rationale-first": extractor_rationale_first,
    "X-step2": extractor_step2,
    "X-one-per-iu": extractor_one_entry_per_iu,
    "T-hidden": tutor_sees_nothing_hidden,
    "T-simple": tutor_simple,
    "T-base": tutor_base,
    "T-socratic": tutor_socratic,
    "T-socratic-kinds": tutor_socratic_kinds,
    "T-socratic-checks": tutor_socratic_checks,
    "T-socratic-contrast": tutor_socratic_contrast,
    "T-adaptive": tutor_adaptive,
    "T-adaptive-cues": tutor_adaptive_cues,
    "T-adaptive-units": tutor_adaptive_units,
    "T-adaptive-contrasts": tutor_adaptive_contrasts,
    "T-comprehensive": tutor_comprehensive,
    "T-comprehensive-scope": tutor_comprehensive_scope,
    "T-comprehensive-new": tutor_comprehensive_new_ground,
    "T-comprehensive-contrast": tutor_comprehensive_contrast,
    "T-all": tutor_all_strategies,
    "B-zs-level": baseline_zs_level,
    "B-guidelines": baseline_guidelines,
    "B-notes": baseline_notes,
    "B-not-knowsim": baseline_not_knowsim,
    "B-cot": baseline_cot,
    "B-profile": baseline_profile,
    "B-expertqa": baseline_expertqa_wording,
    "B-terminate": baseline_termination,
    "J-iq": judge_interaction_quality,
    "J-termination": judge_termination,
    "P-labels": transcript_labels_match_instructions,
    "P-no-cuts": no_schema_cuts,
    "P-json-only": json_only,
    "P-no-context": no_context_block,
}


@pytest.mark.parametrize("element", sorted(ELEMENTS))
def test_prompt_carries_element(element):
    ELEMENTS[element]()


def test_docs_table_lists_exactly_the_checked_elements():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "prompts.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([A-Z]-[A-Za-z0-9-]+)` \|", doc, re.M))
    assert documented == set(ELEMENTS)


def test_removing_any_line_of_a_v3_template_fails_an_element_check(tmp_path, monkeypatch):
    """The checks above cover the whole of every v3 template: deleting any one line of any section
    (each mutant pinned under its own digest, so it loads) makes at least one element check fail.
    Only the checks that fill the mutated template run for it."""
    from ray_knowsim.prompts import templates as T
    from ray_knowsim.strategies import base as tutors

    src = Path(str(T._templates_dir()))
    folder = tmp_path / "templates"
    shutil.copytree(src, folder)
    manifest = (src / T.MANIFEST).read_text(encoding="utf-8")

    def reload() -> None:
        T.load_template.cache_clear()
        tutors._first_template.cache_clear()

    fill, current, users = T.Template.fill, [""], {}

    def recording_fill(self, key, values):
        users.setdefault(self.name, set()).add(current[0])
        return fill(self, key, values)

    monkeypatch.setattr(T, "_templates_dir", lambda: folder)
    reload()
    monkeypatch.setattr(T.Template, "fill", recording_fill)
    for element, check in ELEMENTS.items():
        current[0] = element
        check()
    monkeypatch.setattr(T.Template, "fill", fill)
    unnoticed = []
    try:
        for path in sorted(src.glob(f"*.{V3}.txt")):
            name, original = path.name.split(".")[0], path.read_bytes()
            lines = original.decode("utf-8").splitlines()
            for k, line in enumerate(lines):
                if not line.strip() or line.startswith(("#", "@@")):
                    continue
                mutant = ("\n".join(lines[:k] + lines[k + 1 :]) + "\n").encode("utf-8")
                (folder / path.name).write_bytes(mutant)
                (folder / T.MANIFEST).write_text(manifest.replace(T.file_digest(original), T.file_digest(mutant)), encoding="utf-8")
                reload()
                if not any(_fails(ELEMENTS[e]) for e in sorted(users.get(name, ()))):
                    unnoticed.append(f"{path.name}: {line[:80]}")
            (folder / path.name).write_bytes(original)
            (folder / T.MANIFEST).write_text(manifest, encoding="utf-8")
    finally:
        monkeypatch.undo()
        reload()
    assert not unnoticed, unnoticed


def _fails(check: Callable[[], None]) -> bool:
    try:
        check()
    except Exception:  # noqa: BLE001 - any failure of the check counts: the mutant was noticed
        return True
    return False


def test_no_opening_of_a_reference_math_item_is_cut(shared_ref):
    """Issue 22.2: for every one of the 30 reference math items, the rendered opening prompts (the
    structured learner's and every baseline's) carry the whole problem, nothing in their schemas
    bounds the message, and the offline double's opening puts the whole problem to the tutor."""
    from ray_knowsim.io.loaders import load_graph_cache, load_init_cache, load_items
    from ray_knowsim.schema.graph import GraphWarning
    from ray_knowsim.llm.offline import OfflineModel
    from ray_knowsim.llm.parse import parse_user_turn

    items = load_items(shared_ref / "paper_subset" / "math.jsonl", "math")
    with warnings.catch_warnings():  # the reference graphs' known duplicate edges (spec §15)
        warnings.simplefilter("ignore", GraphWarning)
        graphs = load_graph_cache(shared_ref / "iu_cache" / "math.json", mode="reference")
    init = load_init_cache(shared_ref / "init_ks_cache.json")
    model = OfflineModel()
    assert len(items) == 30 and sum(len(i.question) > 300 for i in items) == 3  # v2's bound would cut three problems
    for item in items:
        graph, ks = graphs[item.id], init.lookup("competition_math", item.id, "novice")
        req = render_user_first(item, graph, ks)
        assert item.question in req.messages[1]["content"] and "maxLength" not in schema_text(req), item.id
        opening = parse_user_turn(model.respond(req).text)
        assert opening.ok and item.question in opening.value.message, item.id
        for method in BASELINES:
            base = render_baseline_user(item, method, [], graph=graph, initial_states=ks, knowledge_level="novice")
            assert item.question in base.messages[1]["content"] and "maxLength" not in schema_text(base), (item.id, method)
