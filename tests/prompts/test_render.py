"""What each role's prompt shows (spec §5, §12.3-§12.6), and the request settings it carries.

These tests pin the v1 prompt set (still loadable, so earlier runs can be re-rendered); the v2
set is checked element by element against spec §12.7 in ``test_elements.py``.
"""

from __future__ import annotations

import json

import pytest

from ray_knowsim.demo import demo_graphs, demo_items
from ray_knowsim.schema.graph import build_index
from ray_knowsim.prompts.graph_extraction import graph_extraction_plan
from functools import partial

from ray_knowsim.prompts import judges
from ray_knowsim.prompts import graph_extraction as G
from ray_knowsim.prompts import render as R
from ray_knowsim.prompts.views import density_line
from ray_knowsim.rules.prerequisites import density
from ray_knowsim import simulators
from ray_knowsim.registry import RegistryError
from ray_knowsim.strategies import get_strategy

render_assistant = partial(R.render_assistant, prompts="v1")
render_baseline_user = partial(simulators.render_baseline_user, prompts="v1")
render_extractor = partial(R.render_extractor, prompts="v1")
render_graph_extraction = partial(G.render_graph_extraction, prompts="v1")
render_rater = partial(judges.render_rater, prompts="v1")
render_termination_judge = partial(judges.render_termination_judge, prompts="v1")
render_user_first = partial(R.render_user_first, prompts="v1")
render_user_sim = partial(R.render_user_sim, prompts="v1")
render_user_turn = partial(R.render_user_turn, prompts="v1")

ITEM = demo_items("math")[0]  # rectangle problem, 14 IUs
GRAPH = demo_graphs("math")[ITEM.id]
INDEX = build_index(GRAPH, ITEM.id)
LABEL = {i: INDEX.label_of(i) for i in INDEX.ids}
#            IU1 IU2 IU3 IU4 IU5 IU6 IU7 IU8 IU9 IU10 ...
STATES = [3, 3, 1, 2, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0]
TRANSCRIPT = [("user", "How do I start?"), ("assistant", "Name the width w.")]


def _section(text: str, heading: str, next_heading: str) -> str:
    return text.split(heading, 1)[1].split(next_heading, 1)[0]


def test_follow_up_prompt_shows_state_lists_as_the_spec_says():
    explained = [LABEL["IU5"]]  # IU5 is partial but already explained: not connectable any more
    req = render_user_turn(ITEM, GRAPH, STATES, TRANSCRIPT, explained=explained)
    user = req.messages[1]["content"]
    state_json = json.loads(_section(user, "Your knowledge state (concept: level):\n", "\n\nReady to work on"))
    assert state_json == {LABEL[i]: name for i, name in zip(INDEX.ids, [
        "knows_well", "knows_well", "struggling", "partial_understanding", "partial_understanding", "unaware",
        "struggling", "unaware", "unaware", "unaware", "unaware", "unaware", "unaware", "unaware"])}
    ready = _section(user, "Ready to work on", "Unaware (never use")
    assert [line[2:] for line in ready.strip().splitlines()[1:]] == [LABEL["IU3"], LABEL["IU4"], LABEL["IU7"]]
    unaware = _section(user, "Unaware (never use or name these):\n", "\n\nAlready explained")
    assert unaware.splitlines() == [f"- {LABEL[i]}" for i in ("IU6", "IU8", "IU9", "IU10", "IU11", "IU12", "IU13", "IU14")]
    assert f"Already explained well by the tutor:\n- {LABEL['IU5']}" in user
    line = density_line(density(INDEX, dict(zip(INDEX.ids, STATES))))
    assert line in user and line.startswith("knowledge_density: LOW (") and "%" in line
    assert req.prompt_version == "user_turn@v1" and req.role == "user_sim" and req.temperature == 0.7
    assert req.json_schema["required"] == ["thought", "message", "attempt_verify", "terminate"]


def test_unaware_concepts_are_never_shown_as_known():
    for states in (STATES, [0] * INDEX.size, [3] + [0] * (INDEX.size - 1)):
        for req in (render_user_first(ITEM, GRAPH, states), render_user_turn(ITEM, GRAPH, states, TRANSCRIPT)):
            user = req.messages[1]["content"]
            unaware = [LABEL[i] for i, s in zip(INDEX.ids, states) if s == 0]
            known_parts = [p for p in user.split("\n\n") if p.startswith(("Concepts you know well", "Concepts you partly", "Ready to work on", "Already explained"))]
            for label in unaware:
                assert all(label not in part for part in known_parts)
            ctx = req.offline_facts
            assert set(ctx["unaware"]) == {i for i, s in zip(INDEX.ids, states) if s == 0}
            assert not set(ctx["unaware"]) & set(ctx["connectable"])


def test_first_prompt_lists_the_four_states_and_the_problem():
    req = render_user_first(ITEM, GRAPH, STATES)
    user = req.messages[1]["content"]
    assert ITEM.question in user
    assert _section(user, "Concepts you know well:\n", "\n\n").splitlines() == [f"- {LABEL['IU1']}", f"- {LABEL['IU2']}"]
    assert _section(user, "Concepts you partly understand:\n", "\n\n").splitlines() == [f"- {LABEL['IU4']}", f"- {LABEL['IU5']}"]
    assert _section(user, "Concepts you are struggling with:\n", "\n\n").splitlines() == [f"- {LABEL['IU3']}", f"- {LABEL['IU7']}"]
    assert req.prompt_version == "user_first@v1"
    assert render_user_sim(ITEM, GRAPH, STATES, (), explained=["x"]).prompt_version == "user_first@v1"
    assert render_user_sim(ITEM, GRAPH, STATES, TRANSCRIPT).prompt_version == "user_turn@v1"


def test_states_are_read_from_a_label_keyed_ks_like_from_ordinals():
    ks = {LABEL[i]: {"state": name} for i, name in zip(INDEX.ids, ["knows_well", "knows_well", "struggling", "partial_understanding", "partial_understanding", "not_introduced", "struggling"])}
    a = render_user_turn(ITEM, GRAPH, ks, TRANSCRIPT).messages
    b = render_user_turn(ITEM, GRAPH, STATES, TRANSCRIPT).messages
    assert a == b  # missing labels and aliases read as unaware (spec §0)
    with pytest.raises(ValueError, match="ordinals"):
        render_user_turn(ITEM, GRAPH, [0, 1], TRANSCRIPT)


def test_static_part_first_and_transcript_before_per_turn_facts():
    a = render_user_turn(ITEM, GRAPH, STATES, TRANSCRIPT)
    b = render_user_turn(demo_items("math")[1], demo_graphs("math")["demo_math_02"], [0] * 11, TRANSCRIPT * 2)
    assert a.messages[0] == b.messages[0]  # one cached system prompt for every session
    user = a.messages[1]["content"]
    order = [user.index(h) for h in ("## The problem", "## Conversation so far", "## What you know now")]
    assert order == sorted(order)
    assert "```json" not in user and "context (json)" not in user  # nothing for the test double in the prompt


def test_offline_facts_repeat_the_prose_facts_out_of_band():
    req = render_user_turn(ITEM, GRAPH, STATES, TRANSCRIPT, explained=[LABEL["IU5"]], allow_terminate=True)
    ctx = req.offline_facts
    assert ctx["template"] == "user_turn" and ctx["role"] == "user_sim" and ctx["turn"] == 2
    assert ctx["transcript"] == [list(t) for t in TRANSCRIPT]
    assert ctx["connectable"] == ["IU3", "IU4", "IU7"] and ctx["explained"] == [LABEL["IU5"]]
    assert [r["state"] for r in ctx["ius"]][:3] == ["knows_well", "knows_well", "struggling"]
    assert ctx["allow_terminate"] is True and "set \"terminate\" to true only when" in req.messages[0]["content"]
    assert "always set \"terminate\" to false" in render_user_turn(ITEM, GRAPH, STATES, TRANSCRIPT).messages[0]["content"]
    hinted = render_user_turn(ITEM, GRAPH, STATES, TRANSCRIPT, stuck_hint=True, stop_hint=True).messages[1]["content"]
    assert "going round in circles" in hinted and "overwhelmed" in hinted


def test_extractor_prompt_carries_graph_state_exchange_and_reference():
    req = render_extractor(ITEM, GRAPH, STATES, TRANSCRIPT, "So w is 8?", "Yes: 6w = 48 gives w = 8.")
    user = req.messages[1]["content"]
    graph_json = json.loads(_section(user, "## Concept graph of the problem\n", "\n\n## Reference answer"))
    assert set(graph_json) == {"concept_areas", "concepts", "prerequisite_pairs"}
    assert [c["id"] for c in graph_json["concepts"]] == list(INDEX.ids)
    assert graph_json["prerequisite_pairs"][0]["from"] == "IU1"
    state = json.loads(_section(user, "(concept id: level)\n", "\n\n## The learner's latest"))
    assert state["IU3"] == "struggling" and state["IU6"] == "unaware"
    assert "- User: How do I start?\n- Assistant: Name the width w." in user
    assert ITEM.reference_answer in user and "So w is 8?" in user and "6w = 48" in user
    assert f"({INDEX.size} in all)" in user
    assert req.temperature == 0.0 and req.prompt_version == "extractor@v1" and req.role == "extractor"
    # the role's defaults, from the one place they are written (a run's settings replace them)
    from ray_knowsim.schema.roles import ROLE_DEFAULTS

    assert (req.temperature, req.max_tokens) == (ROLE_DEFAULTS["extractor"].temperature, ROLE_DEFAULTS["extractor"].max_tokens)
    assert "first exchange" in render_extractor(ITEM, GRAPH, STATES, [], "a", "b").messages[1]["content"]
    ctx = req.offline_facts
    assert ctx["graph"]["nodes"][0]["description"] == GRAPH.nodes[0].description
    assert ctx["user_message"] == "So w is 8?" and ctx["state"]["IU1"] == "knows_well"


@pytest.mark.parametrize("strategy", ["minimal", "socratic", "adaptive", "comprehensive"])
def test_assistant_sees_the_chat_but_not_the_answer_graph_or_state(strategy):
    req = render_assistant(ITEM, get_strategy(strategy), TRANSCRIPT + [("user", "Why 2w + 3?")])
    assert [m["role"] for m in req.messages] == ["system", "user", "assistant", "user"]
    system = req.messages[0]["content"]
    assert "152" not in system and ITEM.reference_answer not in system
    assert GRAPH.nodes[3].description not in system and "IU1" not in system
    assert req.temperature == 0.0 and req.role == "assistant" and req.json_schema is None
    assert req.prompt_version == f"assistant_{strategy}@v1"
    assert req.offline_facts == {
        "template": f"assistant_{strategy}", "version": "v1", "role": "assistant",
        "strategy": "simple" if strategy == "minimal" else strategy,  # an alias resolves to the strategy's name
        "task": "math", "item_id": ITEM.id,
        # how the offline double teaches under this strategy, handed to it out of band
        "offline_reply": f"ray_knowsim.llm.offline.assistant:teach_{'simple' if strategy == 'minimal' else strategy}",
    }
    if strategy != "minimal":
        assert "mathematics tutor" in system
    with pytest.raises(ValueError, match="end with a user"):
        render_assistant(ITEM, get_strategy(strategy), TRANSCRIPT)


def test_an_unknown_strategy_is_refused_by_its_registry():
    with pytest.raises(RegistryError, match="unknown tutor strategy 'lecture'; registered: .*'socratic'"):
        get_strategy("lecture")


def test_judges_and_baselines():
    pairs = TRANSCRIPT + [("user", "Got it, thanks."), ("assistant", "Great.")]
    rater = render_rater(ITEM, pairs, knowledge_level="novice", exchanges=1)
    assert "Got it" not in rater.messages[1]["content"] and "novice" in rater.messages[1]["content"]
    assert rater.role == "judge" and rater.temperature == 0.0 and rater.prompt_version == "rater@v1"
    judge = render_termination_judge(ITEM, pairs)
    assert "[Learner 2] Got it, thanks." in judge.messages[1]["content"]
    assert "problem_completion" in judge.messages[0]["content"] and "comprehension_satisfied" not in judge.messages[0]["content"]
    assert judge.json_schema["properties"]["termination_reason"]["enum"][-1] == "max_turns"
    qa = demo_items("expertqa")[0]
    assert "unproductive_stalling" in render_termination_judge(qa, pairs).messages[0]["content"]
    for method, version in (("zero-shot", "baseline_zero_shot@v1"), ("zero-shot-cot", "baseline_zero_shot_cot@v1")):
        req = render_baseline_user(ITEM, method)
        assert req.prompt_version == version and req.temperature == 0.7 and "opening message" in req.messages[1]["content"]
    prof = render_baseline_user(ITEM, "zero-shot-cot-user-profile", TRANSCRIPT, profile="Shy.", graph=GRAPH, initial_states=STATES)
    assert f'"{LABEL["IU3"]}": "struggling"' in prof.messages[1]["content"] and "Shy." in prof.messages[1]["content"]
    with pytest.raises(ValueError, match="graph"):
        render_baseline_user(ITEM, "zero-shot-cot-user-profile")


def test_graph_extraction_variants_and_retry_ladder():
    math_req = render_graph_extraction(ITEM)
    assert math_req.prompt_version == "graph_math@v1" and math_req.temperature == 0.2 and math_req.role == "graph_extractor"
    assert "0.35" in math_req.messages[0]["content"] and "cycles" in math_req.messages[0]["content"]
    qa = demo_items("expertqa")[2]
    qa_req = render_graph_extraction(qa, attempt="compact")
    assert qa_req.prompt_version == "graph_open@v1" and "Computer Science / Databases" in qa_req.messages[1]["content"]
    assert "at most 12 nodes" in qa_req.messages[1]["content"] and qa_req.temperature == 0.0
    plan = graph_extraction_plan(4096)
    assert plan[0] == ("normal", 0.2, 4096)
    assert plan[1:] == [("json_only", 0.0, 4096), ("json_only", 0.0, 8192), ("json_only", 0.0, 32768),
                        ("compact", 0.0, 4096), ("compact", 0.0, 8192), ("compact", 0.0, 32768)]


def test_learner_prompts_state_the_knowledge_consistency_rules():
    for req in (render_user_first(ITEM, GRAPH, STATES), render_user_turn(ITEM, GRAPH, STATES, TRANSCRIPT)):
        system = req.messages[0]["content"]
        assert "Do not use, name or hint at any concept you are unaware of" in system
        assert "struggling with, either make an error" in system and "hedge openly" in system
        assert "include a plain sign of confusion" in system
