"""Renderers for the three baseline learner simulators (no knowledge state is tracked).

``zero-shot``: act as a learner. ``zero-shot-cot``: think first, then write. ``zero-shot-cot-user-
profile``: also given a learner profile and the starting knowledge (spec §1.6 baseline records).
Baselines may end the conversation themselves; a judge later places the stop (spec §8.1).
"""

from __future__ import annotations

from typing import Literal

from ray_knowsim.model.chat import ChatRequest
from ray_knowsim.model.outputs import BaselineCoTTurn, BaselineTurn
from ray_knowsim.model.graph import GraphIndex, IUGraph, build_index
from ray_knowsim.model.items import Item
from ray_knowsim.prompts.templates import load_template
from ray_knowsim.prompts.views import (
    StatesLike,
    Transcript,
    format_transcript,
    pretty_json,
    state_codes,
    states_by_label,
    transcript_pairs,
)

BaselineMethod = Literal["zero-shot", "zero-shot-cot", "zero-shot-cot-user-profile"]
BASELINE_METHODS: dict[str, str] = {
    "zero-shot": "baseline_zero_shot",
    "zero-shot-cot": "baseline_zero_shot_cot",
    "zero-shot-cot-user-profile": "baseline_cot_profile",
}
BASELINE_TEMPERATURE = 0.7
BASELINE_MAX_TOKENS = 3000
NO_TRANSCRIPT = "(No messages yet: write the learner's opening message, which must state the problem.)"
NO_PROFILE = "(No particular profile.)"


def render_baseline_user(
    item: Item,
    method: str,
    transcript: Transcript = (),
    *,
    profile: str = "",
    graph: IUGraph | None = None,
    initial_states: StatesLike | None = None,
    allow_terminate: bool = True,
    index: GraphIndex | None = None,
    seed: int | None = None,
    request_id: str = "",
) -> ChatRequest:
    """The baseline learner's next message. The profile method needs ``graph`` and ``initial_states``."""
    if method not in BASELINE_METHODS:
        raise ValueError(f"unknown baseline method {method!r}; choose one of {sorted(BASELINE_METHODS)}")
    pairs = transcript_pairs(transcript)
    tpl = load_template(BASELINE_METHODS[method])
    facts = {
        "template": tpl.name,
        "version": tpl.version,
        "role": "user_sim",
        "method": method,
        "task": item.task,
        "item_id": item.id,
        "problem": item.question,
        "turn": sum(1 for s, _ in pairs if s == "user") + 1,
        "transcript": pairs,
        "allow_terminate": allow_terminate,
    }
    values = {
        "terminate_rule": tpl.section("terminate_allowed" if allow_terminate else "terminate_forbidden"),
        "problem": item.question,
        "transcript": format_transcript(pairs, NO_TRANSCRIPT),
    }
    if method == "zero-shot-cot-user-profile":
        if graph is None or initial_states is None:
            raise ValueError("the user-profile baseline needs the IU graph and the initial knowledge state")
        index = index if index is not None else build_index(graph, item.id)
        by_label = states_by_label(index, state_codes(index, initial_states))
        values["profile"] = profile or NO_PROFILE
        values["state_json"] = pretty_json(by_label)
        facts["profile"] = profile
        facts["initial_state"] = by_label
    values["context"] = ""  # v1 templates keep the slot; the facts travel out of band
    schema_model = BaselineTurn if method == "zero-shot" else BaselineCoTTurn
    return ChatRequest(
        messages=(
            {"role": "system", "content": tpl.fill("system", values)},
            {"role": "user", "content": tpl.fill("user", values)},
        ),
        role="user_sim",
        temperature=BASELINE_TEMPERATURE,
        max_tokens=BASELINE_MAX_TOKENS,
        seed=seed,
        json_schema=schema_model.json_schema(),
        schema_name=schema_model.__name__,
        prompt_version=tpl.prompt_version,
        request_id=request_id,
        offline_facts=facts,
    )
