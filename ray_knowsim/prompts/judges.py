"""Renderers for the judges: the Interaction Quality rater and the baselines' termination judge.

Both ask with the judge role's settings (temperature 0 unless the config says otherwise, spec §12.6) for JSON. The rater can be given a truncated
conversation (the first ``exchanges`` user/assistant pairs) for the at-early-stop judgement.
"""

from __future__ import annotations

from functools import partial

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.outputs import InteractionRating, TerminationJudgement, termination_reasons
from ray_knowsim.schema.items import Item
from ray_knowsim.prompts.request import NO_LEVEL, build_request, item_facts, speakers
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
