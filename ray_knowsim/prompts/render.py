"""Renderers for the three KnowSim roles of a turn: learner simulator, assistant, signal extractor.

Every renderer is a pure function from session facts to a :class:`ChatRequest` carrying the
messages, the role, the output schema, the sampling temperature of the spec (user simulator 0.7,
assistant 0, extractor 0 / 0.4 on retry) and ``prompt_version`` ("name@v1"). Each prompt puts its
static instructions first (system message), then per-session facts, then the append-only
transcript, then per-turn facts, and hands the offline test double its facts out of band (``ChatRequest.offline_facts``), so prefix
caches reuse as much as possible.

Judges, baselines and graph extraction live in :mod:`.judges`, :mod:`.baselines` and
:mod:`.graph_extraction`; they are re-exported here.
"""

from __future__ import annotations

import json
from typing import Iterable, Literal

from ray_knowsim.model.chat import ChatRequest
from ray_knowsim.model.outputs import SignalReport, UserTurn, signal_report_schema
from ray_knowsim.model.graph import GraphIndex, IUGraph, build_index
from ray_knowsim.model.items import Item
from ray_knowsim.model.states import KNOWS_WELL, PARTIAL, STRUGGLING, UNAWARE
from ray_knowsim.prompts.templates import load_template
from ray_knowsim.prompts.views import (
    StatesLike,
    Transcript,
    bullet_labels,
    bullet_list,
    connectable_unknowns,
    density_line,
    format_transcript,
    graph_for_prompt,
    ids_at,
    pretty_json,
    state_codes,
    states_by_id,
    states_by_label,
    transcript_pairs,
)
from ray_knowsim.rules.prerequisites import density

Strategy = Literal["minimal", "socratic", "adaptive", "comprehensive"]
STRATEGIES: tuple[str, ...] = ("minimal", "socratic", "adaptive", "comprehensive")

USER_SIM_TEMPERATURE = 0.7
ASSISTANT_TEMPERATURE = 0.0
EXTRACTOR_TEMPERATURE = 0.0
EXTRACTOR_RETRY_TEMPERATURE = 0.4
USER_SIM_MAX_TOKENS = 3000
ASSISTANT_MAX_TOKENS = 3000
#: the reference allowed 128 000; a 30-IU report is ~4k tokens, and most servers cap max_tokens at
#: their context length, so we ask for less
EXTRACTOR_MAX_TOKENS = 16384

NO_TRANSCRIPT_USER = "(This is the first exchange; nothing has been said before.)"
NO_TRANSCRIPT_EXTRACTOR = "(This is the first exchange of the conversation.)"
NO_REFERENCE = "(No reference answer provided.)"


def _index(graph: IUGraph, index: GraphIndex | None, item: Item) -> GraphIndex:
    return index if index is not None else build_index(graph, item.id)


def _schema(model) -> tuple[dict, str]:
    return model.json_schema(), model.__name__


def _iu_rows(index: GraphIndex, graph: IUGraph, codes: dict[str, int]) -> list[dict]:
    concepts = {n.id: n.concept for n in graph.nodes}
    names = states_by_id(index, codes)
    return [{"id": i, "concept": concepts[i], "state": names[i]} for i in index.ids]


def _user_sim_request(tpl, values: dict, facts: dict, seed: int | None, request_id: str) -> ChatRequest:  # noqa: ANN001
    """The simulator's request: static system text, per-turn user text, the UserTurn schema."""
    schema, name = _schema(UserTurn)
    return ChatRequest(
        messages=(
            {"role": "system", "content": tpl.fill("system", values)},
            {"role": "user", "content": tpl.fill("user", values)},
        ),
        role="user_sim",
        temperature=USER_SIM_TEMPERATURE,
        max_tokens=USER_SIM_MAX_TOKENS,
        seed=seed,
        json_schema=schema,
        schema_name=name,
        prompt_version=tpl.prompt_version,
        request_id=request_id,
        offline_facts=facts,
    )


def render_user_first(
    item: Item,
    graph: IUGraph,
    states: StatesLike,
    *,
    index: GraphIndex | None = None,
    seed: int | None = None,
    request_id: str = "",
) -> ChatRequest:
    """The simulator's opening message: the four state lists and the density line (spec §12.3)."""
    index = _index(graph, index, item)
    codes = state_codes(index, states)
    dens = density(index, codes)
    tpl = load_template("user_first")
    facts = {
        "template": tpl.name,
        "version": tpl.version,
        "role": "user_sim",
        "task": item.task,
        "item_id": item.id,
        "problem": item.question,
        "turn": 1,
        "density": dens,
        "ius": _iu_rows(index, graph, codes),
        "connectable": connectable_unknowns(index, codes, ()),
        "unaware": ids_at(index, codes, UNAWARE),
        "explained": [],
        "transcript": [],
        "allow_terminate": False,
    }
    values = {
        "problem": item.question,
        "density_line": density_line(dens),
        "known_well": bullet_labels(index, ids_at(index, codes, KNOWS_WELL)),
        "partial": bullet_labels(index, ids_at(index, codes, PARTIAL)),
        "struggling": bullet_labels(index, ids_at(index, codes, STRUGGLING)),
        "unaware": bullet_labels(index, ids_at(index, codes, UNAWARE)),
        "context": "",  # v1 slot of the old in-prompt block; facts travel out of band
    }
    return _user_sim_request(tpl, values, facts, seed, request_id)


def render_user_turn(
    item: Item,
    graph: IUGraph,
    states: StatesLike,
    transcript: Transcript,
    *,
    explained: Iterable[str] = (),
    allow_terminate: bool = False,
    stuck_hint: bool = False,
    stop_hint: bool = False,
    index: GraphIndex | None = None,
    seed: int | None = None,
    request_id: str = "",
) -> ChatRequest:
    """A follow-up message (spec §12.3, §5).

    ``states`` is the state after the previous turn; ``explained`` the record's
    ``explained_concepts`` (labels). The prompt shows the state as ``{label: state}``, the
    connectable unknowns (struggling + partial not yet explained), the unaware list, the density
    line and the explained concepts.
    """
    index = _index(graph, index, item)
    codes = state_codes(index, states)
    pairs = transcript_pairs(transcript)
    explained_list = sorted(set(explained))
    connectable = connectable_unknowns(index, codes, explained_list)
    unaware = ids_at(index, codes, UNAWARE)
    dens = density(index, codes)
    tpl = load_template("user_turn")
    hints = []
    if stuck_hint:
        hints.append(tpl.section("hint_stuck"))
    if stop_hint:
        hints.append(tpl.section("hint_stop"))
    facts = {
        "template": tpl.name,
        "version": tpl.version,
        "role": "user_sim",
        "task": item.task,
        "item_id": item.id,
        "problem": item.question,
        "turn": sum(1 for s, _ in pairs if s == "user") + 1,
        "density": dens,
        "ius": _iu_rows(index, graph, codes),
        "connectable": connectable,
        "unaware": unaware,
        "explained": explained_list,
        "transcript": pairs,
        "allow_terminate": allow_terminate,
        "stuck_hint": stuck_hint,
        "stop_hint": stop_hint,
    }
    values = {
        "terminate_rule": tpl.section("terminate_allowed" if allow_terminate else "terminate_forbidden"),
        "problem": item.question,
        "transcript": format_transcript(pairs, NO_TRANSCRIPT_USER),
        "density_line": density_line(dens),
        "state_json": pretty_json(states_by_label(index, codes)),
        "connectable": bullet_labels(index, connectable),
        "unaware": bullet_labels(index, unaware),
        "explained": bullet_list(explained_list),
        "hints": ("\n" + "\n".join(hints) + "\n") if hints else "",
        "context": "",  # v1 slot of the old in-prompt block; facts travel out of band
    }
    return _user_sim_request(tpl, values, facts, seed, request_id)


def render_user_sim(
    item: Item, graph: IUGraph, states: StatesLike, transcript: Transcript = (), **kwargs
) -> ChatRequest:
    """Opening template for an empty transcript, follow-up template otherwise."""
    if not transcript:
        kwargs = {k: v for k, v in kwargs.items() if k in ("index", "seed", "request_id")}
        return render_user_first(item, graph, states, **kwargs)
    return render_user_turn(item, graph, states, transcript, **kwargs)


def render_assistant(
    item: Item,
    strategy: str,
    transcript: Transcript,
    *,
    seed: int | None = None,
    request_id: str = "",
) -> ChatRequest:
    """The assistant under evaluation: strategy system prompt + the chat so far (spec §12.4).

    The transcript must end with the learner's message. The assistant sees neither the reference
    answer nor the IU graph nor the learner's state; its offline facts name only the item.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown assistant strategy {strategy!r}; choose one of {STRATEGIES}")
    pairs = transcript_pairs(transcript)
    if not pairs or pairs[-1][0] != "user":
        raise ValueError("the assistant's transcript must end with a user message")
    tpl = load_template(f"assistant_{strategy}")
    facts = {
        "template": tpl.name,
        "version": tpl.version,
        "role": "assistant",
        "strategy": strategy,
        "task": item.task,
        "item_id": item.id,
    }
    values = {"context": ""}  # v1 slot of the old in-prompt block; facts travel out of band
    if "task_intro" in tpl.placeholders("system"):
        values["task_intro"] = tpl.section(f"task_{item.task}")
    messages = [{"role": "system", "content": tpl.fill("system", values)}]
    messages.extend({"role": speaker, "content": text} for speaker, text in pairs)
    return ChatRequest(
        messages=tuple(messages),
        role="assistant",
        temperature=ASSISTANT_TEMPERATURE,
        max_tokens=ASSISTANT_MAX_TOKENS,
        seed=seed,
        prompt_version=tpl.prompt_version,
        request_id=request_id,
        offline_facts=facts,
    )


def render_extractor(
    item: Item,
    graph: IUGraph,
    states: StatesLike,
    prior: Transcript,
    user_message: str,
    assistant_message: str,
    *,
    retry: int = 0,
    index: GraphIndex | None = None,
    seed: int | None = None,
    request_id: str = "",
) -> ChatRequest:
    """Per-turn signal extraction (spec §12.5).

    ``states`` is the pre-turn state; ``prior`` the conversation before this exchange;
    ``retry`` > 0 asks again at the retry temperature (the spec retries only on an empty list).
    """
    index = _index(graph, index, item)
    codes = state_codes(index, states)
    pairs = transcript_pairs(prior)
    tpl = load_template("extractor")
    facts = {
        "template": tpl.name,
        "version": tpl.version,
        "role": "extractor",
        "task": item.task,
        "item_id": item.id,
        "graph": graph.to_json_dict(),
        "state": states_by_id(index, codes),
        "transcript": pairs,
        "user_message": user_message,
        "assistant_message": assistant_message,
        "reference_answer": item.reference_answer,
    }
    values = {
        "graph_json": json.dumps(graph_for_prompt(graph), ensure_ascii=False, indent=1),
        "reference_answer": item.reference_answer or NO_REFERENCE,
        "transcript": format_transcript(pairs, NO_TRANSCRIPT_EXTRACTOR),
        "state_json": pretty_json(states_by_id(index, codes)),
        "user_message": user_message,
        "assistant_message": assistant_message,
        "n_concepts": index.size,
        "context": "",  # v1 slot of the old in-prompt block; facts travel out of band
    }
    schema, name = signal_report_schema(graph), SignalReport.__name__  # strict, per request
    return ChatRequest(
        messages=(
            {"role": "system", "content": tpl.fill("system", values)},
            {"role": "user", "content": tpl.fill("user", values)},
        ),
        role="extractor",
        temperature=EXTRACTOR_RETRY_TEMPERATURE if retry > 0 else EXTRACTOR_TEMPERATURE,
        max_tokens=EXTRACTOR_MAX_TOKENS,
        seed=seed,
        json_schema=schema,
        schema_name=name,
        prompt_version=tpl.prompt_version,
        request_id=request_id,
        offline_facts=facts,
    )


from ray_knowsim.prompts.baselines import render_baseline_user  # noqa: E402  (re-export)
from ray_knowsim.prompts.graph_extraction import render_graph_extraction  # noqa: E402
from ray_knowsim.prompts.judges import render_rater, render_termination_judge  # noqa: E402

__all__ = [
    "ASSISTANT_TEMPERATURE",
    "EXTRACTOR_RETRY_TEMPERATURE",
    "EXTRACTOR_TEMPERATURE",
    "STRATEGIES",
    "USER_SIM_TEMPERATURE",
    "render_assistant",
    "render_baseline_user",
    "render_extractor",
    "render_graph_extraction",
    "render_rater",
    "render_termination_judge",
    "render_user_first",
    "render_user_sim",
    "render_user_turn",
]
