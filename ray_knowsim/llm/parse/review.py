"""The simulator review's reply (schema/review.py): read strictly, with its evidence checked.

A reply that is not JSON, or not the schema (an unknown kind, a missing severity), is a named
failure (``judge_invalid_json`` / ``judge_invalid_output``): the attempt is asked again within the
judge's attempts, and past them the session's score row names the failure and is judged again on
the next pass; nothing else of the session is touched. A finding whose turn is past the
conversation is refused the same way. A finding whose evidence is not words of its turn (the
quote, white space and case aside, is not in that exchange's learner message or tutor reply) is
kept, marked ``quoted: false``, and warned about: a reader should see that the model paraphrased.
"""

from __future__ import annotations

import re
from typing import Sequence

from pydantic import ValidationError

from ray_knowsim.llm.parse.json_extract import extract_json
from ray_knowsim.llm.parse.result import ParseResult, fail, rename, validation_detail
from ray_knowsim.schema.review import SimulatorReview


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower().strip(" .\"'“”")


def quoted_in(evidence: str, texts: Sequence[str]) -> bool:
    """Whether ``evidence`` (white space, case and surrounding quotes aside) is in one of ``texts``."""
    needle = _norm(evidence)
    return bool(needle) and any(needle in _norm(t) for t in texts)


def parse_review(text: str | None, exchanges: Sequence[tuple[str, str]], *, role: str = "judge") -> ParseResult[SimulatorReview]:
    """``exchanges``: (learner message, tutor reply) per turn, in order (the last reply may be "")."""
    ext = extract_json(text)
    if ext.error is not None or not isinstance(ext.value, dict):
        kind = "empty" if not (text or "").strip() else "invalid_json"
        return fail(role, kind, ext.error or "the reply is not a JSON object", ext.repairs)
    data, repairs = dict(ext.value), list(ext.repairs)
    rename(data, "findings", ("errors", "issues"), repairs)
    try:
        review = SimulatorReview.model_validate(data)
    except ValidationError as exc:
        return fail(role, "invalid_output", validation_detail(exc), repairs, data)
    late = [f.turn for f in review.findings if f.turn > len(exchanges)]
    if late:
        return fail(role, "invalid_output", f"finding(s) at turn {', '.join(map(str, late))}, but the conversation has "
                    f"{len(exchanges)} exchange(s)", repairs, data)
    warnings = []
    for k, f in enumerate(review.findings, 1):
        if not quoted_in(f.evidence, exchanges[f.turn - 1]):
            warnings.append(f"finding {k} ({f.kind}, turn {f.turn}): its evidence is not words of that exchange")
    return ParseResult(value=review, repairs=tuple(repairs), warnings=tuple(warnings), raw=data)


__all__ = ["parse_review", "quoted_in"]
