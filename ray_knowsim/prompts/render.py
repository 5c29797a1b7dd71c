"""Renderers for the three KnowSim roles of a turn: learner simulator, assistant, signal extractor.

Every renderer is a pure function from session facts to a :class:`ChatRequest` carrying the
messages, the role, the output schema, the role's default temperature and token cap
(:mod:`ray_knowsim.schema.roles`; a run's settings replace them) and ``prompt_version`` ("name@v2"). ``prompts`` picks
the prompt set (default :data:`~ray_knowsim.prompts.templates.DEFAULT_PROMPTS`; "v1" re-renders
the prompts of earlier runs). Each prompt puts its
static instructions first (system message), then per-session facts, then the append-only
transcript, then per-turn facts, and hands the offline test double its facts out of band (``ChatRequest.offline_facts``), so prefix
caches reuse as much as possible.

Judges, baselines and graph extraction have renderers of their own in :mod:`.judges`,
:mod:`.baselines` and :mod:`.graph_extraction`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Iterable, Protocol

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.outputs import SignalReport, UserTurn, shared_signal_report_schema
from ray_knowsim.schema.graph import GraphIndex, IUGraph, build_index
from ray_knowsim.schema.items import Item
from ray_knowsim.schema.states import KNOWS_WELL, PARTIAL, STATE_NAMES, STRUGGLING, UNAWARE
from ray_knowsim.prompts.request import (
    NO_REFERENCE,
    build_request,
    item_facts,
    legacy_reasoning_bound,
    legacy_text_bounds,
    section_or,
    shared_fragments,
    speakers,
)
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS, Template, load_template
from ray_knowsim.prompts.views import (
    ConnectableMode,
    StatesLike,
    Transcript,
    bullet_list,
    bullet_names,
    connectable_unknowns,
    density_line,
    explained_names,
    format_transcript,
    graph_concepts,
    graph_json_dict,
    graph_prompt_json,
    ids_at,
    learner_names,
    state_codes,
    state_json,
    states_by_id,
    transcript_pairs,
)
from ray_knowsim.rules.prerequisites import articulation_mode, density

NO_TRANSCRIPT_USER = "(This is the first exchange; nothing has been said before.)"
NO_TRANSCRIPT_EXTRACTOR = "(This is the first exchange of the conversation.)"

#: articulation mode (spec §5) -> template fragment holding that mode's guidance
_MODE_SECTION = {"Explicit": "mode_explicit", "Vague": "mode_vague", "Compliant": "mode_deferential"}


def _index(graph: IUGraph, index: GraphIndex | None, item: Item) -> GraphIndex:
    return index if index is not None else build_index(graph, item.id)


def _iu_rows(index: GraphIndex, graph: IUGraph, codes: dict[str, int]) -> list[dict]:
    concepts = graph_concepts(graph)
    return [{"id": i, "concept": concepts[i], "state": STATE_NAMES[codes[i]]} for i in index.ids]


@dataclass(frozen=True)
class LearnerOptions:
    """The settings both learner templates take: the opening message and every follow-up."""

    index: GraphIndex | None = None  # the graph's index, when the caller already built it
    seed: int | None = None
    request_id: str = ""
    prompts: str = DEFAULT_PROMPTS  # the prompt set (see templates.PROMPT_SETS)
    connectable: ConnectableMode = "reference"  # which definition of connectable unknowns (spec §12.7)


LEARNER_OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(LearnerOptions))


def _user_sim_request(tpl, values: dict, facts: dict, opts: LearnerOptions) -> ChatRequest:  # noqa: ANN001
    """The simulator's request: static system text, per-session then per-turn user text, the UserTurn
    schema (free text unbounded from v3 on; v1/v2 re-render their character bounds)."""
    return build_request(tpl, values, facts, role="user_sim", seed=opts.seed, request_id=opts.request_id, output=UserTurn,
                         text_bounds=legacy_text_bounds(tpl))


def render_user_first(item: Item, graph: IUGraph, states: StatesLike, **options: Any) -> ChatRequest:
    """The simulator's opening message: the problem and the four state groups (spec §12.3, §12.7;
    v1/v2 also show the density line). From v3 on the opening must put the whole problem to the
    tutor (the text every learner simulator gets, ``common.v3: @@ opening``) and has no length cap.

    ``options``: the fields of :class:`LearnerOptions`.
    """
    opts = LearnerOptions(**options)
    index = _index(graph, opts.index, item)
    codes = state_codes(index, states)
    dens = density(index, codes)
    tpl = load_template("user_first", opts.prompts)
    names = learner_names(index, graph, with_ids=tpl.version == "v1")
    facts = {
        **item_facts(item),
        "turn": 1,
        "density": dens,
        "ius": _iu_rows(index, graph, codes),
        "connectable": connectable_unknowns(index, codes, (), mode=opts.connectable),
        "unaware": ids_at(index, codes, UNAWARE),
        "explained": [],
        "transcript": [],
        "allow_terminate": False,
    }
    values = {
        **shared_fragments(item.task, opts.prompts),
        "problem": item.question,
        "density_line": density_line(dens),
        "known_well": bullet_names(names, ids_at(index, codes, KNOWS_WELL)),
        "partial": bullet_names(names, ids_at(index, codes, PARTIAL)),
        "struggling": bullet_names(names, ids_at(index, codes, STRUGGLING)),
        "unaware": bullet_names(names, ids_at(index, codes, UNAWARE)),
    }
    return _user_sim_request(tpl, values, facts, opts)


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
    **options: Any,
) -> ChatRequest:
    """A follow-up message (spec §12.3, §12.7, §5); ``options``: the fields of :class:`LearnerOptions`.

    ``states`` is the state after the previous turn; ``explained`` the record's
    ``explained_concepts`` (labels). The prompt shows the state as ``{label: state}``, the
    connectable unknowns (``connectable="reference"``: struggling + partial not yet explained;
    ``"paper"``: prerequisites in place but not yet learned), the unaware list, the density line,
    the guidance of the current articulation mode (v2 on) and the explained concepts; the
    transcript calls the speakers what the instructions call them (v3: "You" / "Tutor").
    """
    opts = LearnerOptions(**options)
    connectable = opts.connectable
    index = _index(graph, opts.index, item)
    codes = state_codes(index, states)
    pairs = transcript_pairs(transcript)
    explained_list = sorted(set(explained))
    ready = connectable_unknowns(index, codes, explained_list, mode=connectable)
    unaware = ids_at(index, codes, UNAWARE)
    dens = density(index, codes)
    mode = articulation_mode(dens)
    tpl = load_template("user_turn", opts.prompts)
    names = learner_names(index, graph, with_ids=tpl.version == "v1")
    hints = []
    if stuck_hint:
        hints.append(tpl.section("hint_stuck"))
    if stop_hint:
        hints.append(tpl.section("hint_stop"))
    facts = {
        **item_facts(item),
        "turn": sum(1 for s, _ in pairs if s == "user") + 1,
        "density": dens,
        "articulation_mode": mode,
        "ius": _iu_rows(index, graph, codes),
        "connectable": ready,
        "unaware": unaware,
        "explained": explained_list,
        "transcript": pairs,
        "allow_terminate": allow_terminate,
        "stuck_hint": stuck_hint,
        "stop_hint": stop_hint,
    }
    shared = shared_fragments(item.task, opts.prompts)
    values = {
        **shared,
        "terminate_rule": tpl.fill("terminate_allowed" if allow_terminate else "terminate_forbidden", shared),
        "problem": item.question,
        "transcript": format_transcript(pairs, NO_TRANSCRIPT_USER, speakers(tpl)),
        "density_line": density_line(dens),
        "mode_text": section_or(tpl, _MODE_SECTION[mode], mode),
        "state_json": state_json(index, graph, codes, "label" if tpl.version == "v1" else "concept"),
        "connectable_heading": section_or(tpl, f"connectable_{connectable}", ""),
        "connectable": bullet_names(names, ready),
        "unaware": bullet_names(names, unaware),
        "explained": bullet_list(explained_names(index, names, explained_list)),
        "hints": ("\n" + "\n".join(hints) + "\n") if hints else "",
    }
    return _user_sim_request(tpl, values, facts, opts)


def render_user_sim(
    item: Item, graph: IUGraph, states: StatesLike, transcript: Transcript = (), **kwargs
) -> ChatRequest:
    """Opening template for an empty transcript, follow-up template otherwise."""
    if not transcript:
        kwargs = {k: v for k, v in kwargs.items() if k in LEARNER_OPTIONS}
        return render_user_first(item, graph, states, **kwargs)
    return render_user_turn(item, graph, states, transcript, **kwargs)


class TutorPrompt(Protocol):
    """What the tutor's renderer needs of a strategy (a :class:`ray_knowsim.strategies.TutorStrategy`)."""

    name: str

    def template_for(self, prompts: str | None) -> Template: ...

    def offline_path(self) -> str | None: ...


def render_assistant(
    item: Item,
    strategy: TutorPrompt,
    transcript: Transcript,
    *,
    seed: int | None = None,
    request_id: str = "",
    prompts: str = DEFAULT_PROMPTS,
) -> ChatRequest:
    """The tutor under test: its strategy's system prompt + the chat so far (spec §12.4, §12.7).

    ``strategy`` comes from :data:`ray_knowsim.strategies.STRATEGIES` (``get_strategy(name)``). The
    transcript must end with the learner's message. The tutor sees neither the reference answer
    nor the IU graph nor the learner's state, and is never told it is being assessed; its offline
    facts name only the item and the strategy.
    """
    pairs = transcript_pairs(transcript)
    if not pairs or pairs[-1][0] != "user":
        raise ValueError("the assistant's transcript must end with a user message")
    tpl = strategy.template_for(prompts)
    values = {}
    if "task_intro" in tpl.placeholders("system"):
        values["task_intro"] = tpl.section(f"task_{item.task}")
    facts = {"strategy": strategy.name, "task": item.task, "item_id": item.id, "offline_reply": strategy.offline_path()}
    return build_request(tpl, values, facts, role="assistant", seed=seed, request_id=request_id,
                         chat=({"role": speaker, "content": text} for speaker, text in pairs))


def render_extractor(
    item: Item,
    graph: IUGraph,
    states: StatesLike,
    prior: Transcript,
    user_message: str,
    assistant_message: str,
    *,
    index: GraphIndex | None = None,
    seed: int | None = None,
    request_id: str = "",
    prompts: str = DEFAULT_PROMPTS,
) -> ChatRequest:
    """Per-turn signal extraction (spec §12.5, §12.7).

    ``states`` is the pre-turn state; ``prior`` the conversation before this exchange. (The
    repair round's temperature is the role's ``repair_temperature`` setting, applied by the reader.)
    """
    index = _index(graph, index, item)
    codes = state_codes(index, states)
    pairs = transcript_pairs(prior)
    tpl = load_template("extractor", prompts)
    by_id = states_by_id(index, codes)
    facts = {
        "task": item.task,
        "item_id": item.id,
        "graph": graph_json_dict(graph),
        "state": by_id,
        "transcript": pairs,
        "user_message": user_message,
        "assistant_message": assistant_message,
        "reference_answer": item.reference_answer,
    }
    values = {
        "task_noun": shared_fragments(item.task, prompts)["task_noun"],
        "graph_json": graph_prompt_json(graph),
        "reference_answer": item.reference_answer or section_or(tpl, "no_reference", NO_REFERENCE),
        "transcript": format_transcript(pairs, section_or(tpl, "no_transcript", NO_TRANSCRIPT_EXTRACTOR), speakers(tpl)),
        "state_json": state_json(index, graph, codes, "id"),
        "user_message": user_message,
        "assistant_message": assistant_message,
        "n_concepts": index.size,
    }
    return build_request(tpl, values, facts, role="extractor", seed=seed, request_id=request_id,
                         schema=shared_signal_report_schema(graph, reasoning_max_chars=legacy_reasoning_bound(tpl)),
                         schema_name=SignalReport.__name__)  # strict, per request


__all__ = [
    "LEARNER_OPTIONS",
    "LearnerOptions",
    "TutorPrompt",
    "render_assistant",
    "render_extractor",
    "render_user_first",
    "render_user_sim",
    "render_user_turn",
]
