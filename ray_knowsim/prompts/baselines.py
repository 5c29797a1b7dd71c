"""Renderers for the baseline learner simulators (no knowledge state is tracked).

Which baselines exist is the simulator registry's business (:mod:`ray_knowsim.simulators`): each
baseline module registers a simulator with a :class:`BaselinePrompt` saying which template it uses
and what the template is given, and renders through :func:`render_baseline` (by name:
:func:`ray_knowsim.simulators.render_baseline_user`). ZS: a learner at a stated knowledge level. ZS-CoT: no level, a
thought-process section and a private ``thought``. ZS-CoT-Prof: ZS-CoT plus a level-matched
learner profile and the starting knowledge (spec §1.6, §12.7). Baselines may end the conversation
themselves; a judge later places the stop (spec §8.1).
"""

from __future__ import annotations

from dataclasses import dataclass

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.outputs import BaselineCoTTurn, BaselineTurn
from ray_knowsim.schema.graph import GraphIndex, IUGraph, build_index
from ray_knowsim.schema.items import Item
from ray_knowsim.prompts.request import (
    NO_LEVEL,
    build_request,
    item_facts,
    legacy_text_bounds,
    section_or,
    shared_fragments,
    speakers,
)
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS, load_template
from ray_knowsim.prompts.views import (
    StatesLike,
    Transcript,
    format_transcript,
    pretty_json,
    learner_names,
    state_codes,
    states_by_name,
    transcript_pairs,
)

#: the empty transcript of prompt sets v1/v2 (v3: the template's ``no_transcript``; the opening's
#: instructions are the shared ``common.v3: @@ opening`` text in its system message)
NO_TRANSCRIPT = "(No messages yet: write the learner's opening message, which must state the problem.)"
NO_PROFILE = "(No particular profile.)"


@dataclass(frozen=True)
class BaselinePrompt:
    """What a baseline simulator's template is given."""

    template: str  # template name in the manifest
    thinks: bool  # the reply carries a private "thought" (BaselineCoTTurn) before the message
    with_profile: bool = False  # a learner profile and the starting knowledge state


def render_baseline(
    item: Item,
    spec: BaselinePrompt,
    transcript: Transcript = (),
    *,
    method: str = "",
    profile: str = "",
    graph: IUGraph | None = None,
    initial_states: StatesLike | None = None,
    knowledge_level: str | None = None,
    allow_terminate: bool = True,
    index: GraphIndex | None = None,
    seed: int | None = None,
    request_id: str = "",
    prompts: str = DEFAULT_PROMPTS,
) -> ChatRequest:
    pairs = transcript_pairs(transcript)
    tpl = load_template(spec.template, prompts)
    facts = {
        "method": method,
        "thinks": spec.thinks,
        **item_facts(item),
        "turn": sum(1 for s, _ in pairs if s == "user") + 1,
        "transcript": pairs,
        "allow_terminate": allow_terminate,
        "knowledge_level": knowledge_level,
    }
    shared = shared_fragments(item.task, prompts)
    values = {
        **shared,
        "terminate_rule": tpl.fill("terminate_allowed" if allow_terminate else "terminate_forbidden", shared),
        "goal": section_or(tpl, f"goal_{item.task}", ""),
        "problem": item.question,
        "transcript": format_transcript(pairs, section_or(tpl, "no_transcript", NO_TRANSCRIPT), speakers(tpl)),
        "task_heading": section_or(tpl, f"heading_{item.task}", "Problem"),
        "level_descriptor": section_or(tpl, f"level_{knowledge_level}", NO_LEVEL),
    }
    if spec.with_profile:
        if graph is None or initial_states is None:
            raise ValueError("the user-profile baseline needs the IU graph and the initial knowledge state")
        index = index if index is not None else build_index(graph, item.id)
        names = learner_names(index, graph, with_ids=tpl.version == "v1")  # v2 on: no IU ids
        by_label = states_by_name(index, names, state_codes(index, initial_states))
        values["profile"] = profile or NO_PROFILE
        values["state_json"] = pretty_json(by_label)
        facts["profile"] = profile
        facts["initial_state"] = by_label
    return build_request(tpl, values, facts, role="user_sim", seed=seed, request_id=request_id,
                         output=BaselineCoTTurn if spec.thinks else BaselineTurn, text_bounds=legacy_text_bounds(tpl))


__all__ = ["BaselinePrompt", "render_baseline"]
