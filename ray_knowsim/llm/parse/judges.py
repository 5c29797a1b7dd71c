"""The judges' replies: the Interaction Quality rating and the baselines' termination judgement."""

from __future__ import annotations

from typing import TypeVar

from pydantic import ValidationError

from ray_knowsim.llm.parse.json_extract import extract_json
from ray_knowsim.llm.parse.result import ParseResult, fail, rename, validation_detail
from ray_knowsim.llm.parse.scores import read_scores
from ray_knowsim.schema.outputs import InteractionRating, TerminationJudgement, termination_reasons

T = TypeVar("T", InteractionRating, TerminationJudgement)


def _json_object(text: str | None, role: str) -> tuple[dict, list[str]] | ParseResult:
    """The reply as a JSON object with the repairs made to read it, or the failure saying why not.

    Both judges start the same way; only what they rename and check afterwards differs.
    """
    ext = extract_json(text)
    if ext.error is not None or not isinstance(ext.value, dict):
        kind = "empty" if not (text or "").strip() else "invalid_json"
        return fail(role, kind, ext.error or "the reply is not a JSON object", ext.repairs)
    return dict(ext.value), list(ext.repairs)


def _validated(model: type[T], data: dict, repairs: list[str], role: str) -> ParseResult[T]:
    """``data`` read as ``model``, or ``<role>_invalid_output`` with what is wrong: scores off their
    scale first (:mod:`.scores`: read as meant, never rescaled by guessing), then the schema's own
    complaints."""
    complaints = read_scores(data, model, repairs)
    try:
        value = model.model_validate(data)
    except ValidationError as exc:
        rest = validation_detail(exc, skip=complaints)
        return fail(role, "invalid_output", "; ".join([*complaints.values(), *([rest] if rest else [])]), repairs, data)
    if complaints:
        return fail(role, "invalid_output", "; ".join(complaints.values()), repairs, data)
    return ParseResult(value=value, repairs=tuple(repairs), raw=data)


def parse_rating(text: str | None, *, role: str = "judge") -> ParseResult[InteractionRating]:
    decoded = _json_object(text, role)
    if isinstance(decoded, ParseResult):
        return decoded
    data, repairs = decoded
    rename(data, "quality_score", ("interaction_quality", "quality", "iq"), repairs)
    return _validated(InteractionRating, data, repairs, role)


def parse_termination(
    text: str | None, task: str, n_turns: int, *, role: str = "judge"
) -> ParseResult[TerminationJudgement]:
    """The baselines' stop point; an ending turn past the last learner message reads as the last."""
    decoded = _json_object(text, role)
    if isinstance(decoded, ParseResult):
        return decoded
    data, repairs = decoded
    rename(data, "ending_turn", ("end_turn", "judged_end_turn", "stop_turn"), repairs)
    rename(data, "termination_reason", ("reason", "judged_termination_reason"), repairs)
    checked = _validated(TerminationJudgement, data, repairs, role)
    if not checked.ok:
        return checked
    judgement = checked.value
    allowed = termination_reasons(task)
    if judgement.termination_reason not in allowed:
        detail = f"termination_reason {judgement.termination_reason!r} is not one of {', '.join(allowed)}"
        return fail(role, "invalid_output", detail, repairs, data)
    warnings: list[str] = []
    if judgement.ending_turn > n_turns:
        warnings.append(f"ending_turn {judgement.ending_turn} > {n_turns} learner messages; read as {n_turns}")
        judgement = judgement.model_copy(update={"ending_turn": n_turns})
    return ParseResult(value=judgement, repairs=tuple(repairs), warnings=tuple(warnings), raw=data)
