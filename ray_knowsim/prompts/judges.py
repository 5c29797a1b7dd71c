"""Renderers for the judges: the Interaction Quality rater and the baselines' termination judge.

Both ask with the judge role's settings (temperature 0 unless the config says otherwise, spec §12.6) for JSON. The rater can be given a truncated
conversation (the first ``exchanges`` user/assistant pairs) for the at-early-stop judgement.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping, Sequence

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.outputs import InteractionRating, TerminationJudgement, termination_reasons
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import Item
from ray_knowsim.prompts.request import NO_LEVEL, NO_REFERENCE, build_request, item_facts, speakers
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS, load_template
from ray_knowsim.prompts.views import NUMBERED_SPEAKERS, Transcript, format_numbered_transcript, format_transcript, transcript_pairs


def truncate_exchanges(pairs: list[list[str]], exchanges: int | None) -> list[list[str]]:
    """The first ``exchanges`` user+assistant pairs (``2 * exchanges`` messages); None keeps all."""
    if exchanges is None:
        return pairs
    if exchanges < 1:
        raise ValueError(f"exchanges must be >= 1, got {exchanges}")
    return pairs[: 2 * exchanges]


#: both judges ask with the judge role's settings (schema/roles.py) for one JSON object
_judge_request = partial(build_request, role="judge")


def render_rater(
    item: Item,
    transcript: Transcript,
    *,
    knowledge_level: str | None = None,
    exchanges: int | None = None,
    seed: int | None = None,
    request_id: str = "",
    prompts: str = DEFAULT_PROMPTS,
) -> ChatRequest:
    """Interaction Quality: calibration, overload, quality 1-10, perceived learning 1-10 + rationales."""
    pairs = truncate_exchanges(transcript_pairs(transcript), exchanges)
    if not pairs:
        raise ValueError("the rater needs a non-empty conversation")
    tpl = load_template("rater", prompts)
    facts = {
        **item_facts(item),
        "knowledge_level": knowledge_level,
        "transcript": pairs,
    }
    values = {
        "problem": item.question,
        "knowledge_level": knowledge_level or NO_LEVEL,
        "transcript": format_transcript(pairs, "", speakers(tpl)),
    }
    return _judge_request(tpl, values, facts, seed=seed, request_id=request_id, output=InteractionRating)


def render_termination_judge(
    item: Item,
    transcript: Transcript,
    *,
    seed: int | None = None,
    request_id: str = "",
    prompts: str = DEFAULT_PROMPTS,
) -> ChatRequest:
    """Where a baseline learner would have stopped, with the task's reason list (spec §8.1)."""
    pairs = transcript_pairs(transcript)
    tpl = load_template("termination_judge", prompts)
    numbered, n_turns = format_numbered_transcript(pairs, speakers(tpl, NUMBERED_SPEAKERS))
    if n_turns == 0:
        raise ValueError("the termination judge needs at least one learner message")
    facts = {
        **item_facts(item),
        "n_turns": n_turns,
        "reasons": list(termination_reasons(item.task)),
        "transcript": pairs,
    }
    values = {
        "reasons": tpl.section(f"reasons_{item.task}"),
        "problem": item.question,
        "n_turns": n_turns,
        "numbered_transcript": numbered,
    }
    schema = TerminationJudgement.json_schema_for(item.task)
    return _judge_request(
        tpl, values, facts, seed=seed, request_id=request_id, schema=schema, schema_name="TerminationJudgement"
    )


def render_simulator_review(
    item: Item,
    graph: IUGraph | None,
    exchanges: Sequence[Mapping[str, Any]],
    *,
    seed: int | None = None,
    request_id: str = "",
    prompts: str = DEFAULT_PROMPTS,
) -> ChatRequest:
    """The LLM review of the simulator (schema/review.py). ``exchanges``, one per turn:
    ``user`` and ``assistant`` (the learner's message, the tutor's reply: "" when the conversation
    ended on the learner), ``states`` ({IU id: state name} before the turn; None for a learner
    without a record) and ``labels`` ({IU id: (teaching quality, attempt type)}; None when nothing
    labelled the reply). The model sees the ideas, the states and the labels as text; the same
    facts travel to the offline double out of band."""
    from ray_knowsim.schema.review import REVIEW_KINDS, SEVERITIES, SimulatorReview

    if not exchanges:
        raise ValueError("the simulator review needs at least one exchange")
    tpl = load_template("simulator_review", prompts)
    names = speakers(tpl)
    nodes = list(graph.nodes) if graph is not None else []
    blocks = []
    for k, ex in enumerate(exchanges, 1):
        lines = [f"### Exchange {k}"]
        states = ex.get("states")
        lines.append("Student's record before it: " + (", ".join(f"{i} {s}" for i, s in states.items()) if states else tpl.section("no_state")))
        lines.append(f"{names['user']}: {ex.get('user') or ''}")
        lines.append(f"{names['assistant']}: {ex.get('assistant') or '(no reply: the conversation ended here)'}")
        labels = ex.get("labels")
        lines.append("Labeler's marks: " + ("; ".join(f"{i} {q} (student: {a})" for i, (q, a) in labels.items()) if labels else tpl.section("no_labels")))
        blocks.append("\n".join(lines))
    values = {
        "kinds": "\n".join(f"- {kind} ({party}): {what}" for kind, (party, what) in REVIEW_KINDS.items()),
        "severities": "\n".join(f"- {name}: {what}" for name, what in SEVERITIES.items()),
        "problem": item.question,
        "reference_answer": item.reference_answer or NO_REFERENCE,
        "ideas": "\n".join(f"- {n.id}: {n.concept}. {n.description}" for n in nodes) or "(no idea list recorded)",
        "exchanges": "\n\n".join(blocks),
    }
    facts = {
        **item_facts(item),
        "reference_answer": item.reference_answer,
        "graph": graph.to_json_dict() if graph is not None else None,
        "exchanges": [{"user": ex.get("user") or "", "assistant": ex.get("assistant") or "", "states": ex.get("states"),
                       "labels": ex.get("labels")} for ex in exchanges],
    }
    return _judge_request(tpl, values, facts, seed=seed, request_id=request_id, output=SimulatorReview)
