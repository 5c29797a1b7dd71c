"""Per-turn signal-extraction output (spec §1.5) and its deterministic normalisation."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

TeachingQuality = Literal["well_explained", "shallow", "not_mentioned"]
AttemptType = Literal["reasoning", "articulation", "none"]
ResponseRole = Literal[
    "confirmed_correct",
    "confirmed_incorrect_no_explanation",
    "confirmed_incorrect_with_explanation",
    "ignored",
    "not_applicable",
]

TQ_NOT_MENTIONED, TQ_SHALLOW, TQ_WELL = 0, 1, 2
ATTEMPT_NONE, ATTEMPT_REASONING, ATTEMPT_ARTICULATION = 0, 1, 2
ROLE_OTHER, ROLE_INCORRECT_NO_EXPLANATION = 0, 1

#: field names drifted extractors use for ``assistant_response_role``
ROLE_ALIASES = ("assistant_reasoning_role", "assistant_reason_role", "assistant_role", "assistant_response")
#: an arrow, optional white space, then a label that ends at a word boundary (``-> shallowly`` is no match)
ARROW_LABEL = re.compile(r"(?:->|→)\s*(well_explained|shallow|not_mentioned)\b")
_ATTEMPTS = ("reasoning", "articulation", "none")


#: a user_attempt_type's kernel code (SignalEntry.attempt_code)
_ATTEMPT_CODES = {"none": ATTEMPT_NONE, "reasoning": ATTEMPT_REASONING, "articulation": ATTEMPT_ARTICULATION}


class SignalEntry(BaseModel):
    """One IU's signals for one turn, after normalisation.

    ``teaching_quality`` keeps the raw label (any value other than ``not_mentioned`` and
    ``shallow`` acts as well_explained); ``id`` is None for entries without a usable id.
    """

    model_config = ConfigDict(extra="allow")
    id: str | None = None
    concept: str = ""
    teaching_quality_reasoning: str = ""
    teaching_quality: str = "not_mentioned"
    user_attempt_reasoning: str = ""
    user_attempt_type: AttemptType = "none"
    assistant_response_role: str = "not_applicable"

    @property
    def tq_code(self) -> int:
        if self.teaching_quality == "not_mentioned":
            return TQ_NOT_MENTIONED
        if self.teaching_quality == "shallow":
            return TQ_SHALLOW
        return TQ_WELL

    @property
    def attempt_code(self) -> int:
        return _ATTEMPT_CODES[self.user_attempt_type]

    @property
    def mentioned(self) -> bool:
        return self.id is not None and self.teaching_quality != "not_mentioned"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def normalize_entry(raw: dict[str, Any]) -> SignalEntry:
    """Apply spec §1.5's repairs: field-name drift, arrow-encoded labels, legacy attempt flags."""
    data = dict(raw)
    if "assistant_response_role" not in data:
        for alias in ROLE_ALIASES:
            if alias in data:
                data["assistant_response_role"] = data[alias]
                break
    if "user_attempt_type" not in data and "user_attempt" in data:
        data["user_attempt_type"] = data["user_attempt"]

    reasoning = _text(data.get("teaching_quality_reasoning"))
    if "teaching_quality" in data:
        # present, even as null: kept as it is (null reads as well_explained in the update)
        tq = data["teaching_quality"]
    else:
        match = ARROW_LABEL.search(reasoning.lower())
        tq = match.group(1) if match else "not_mentioned"
    attempt = data.get("user_attempt_type")
    if attempt not in _ATTEMPTS:
        attempt = "reasoning" if data.get("attempted_by_user") else "none"
    raw_id = data.get("id")
    entry_id = None if not raw_id else (raw_id if isinstance(raw_id, str) else str(raw_id))

    extras = {k: v for k, v in data.items() if k not in _CANONICAL}
    return SignalEntry(
        id=entry_id,
        concept=_text(data.get("concept")),
        teaching_quality_reasoning=reasoning,
        teaching_quality=_text(tq),
        user_attempt_reasoning=_text(data.get("user_attempt_reasoning")),
        user_attempt_type=attempt,
        assistant_response_role=_text(data.get("assistant_response_role", "not_applicable")),
        **extras,
    )


_CANONICAL = {
    "id",
    "concept",
    "teaching_quality_reasoning",
    "teaching_quality",
    "user_attempt_reasoning",
    "user_attempt_type",
    "assistant_response_role",
}


_ENTRY_TUPLE = TypeAdapter(tuple[SignalEntry, ...])


def canonical_entries(entries: list[dict[str, Any]]) -> tuple[SignalEntry, ...]:
    """SignalEntry objects for entries already in canonical form: every field present with its
    canonical value (a string id, string texts, an attempt type of the three; other keys are extras).
    :func:`normalize_entry` would return each as it is, so they are validated as they stand, all
    in one call: the live parser (:mod:`ray_knowsim.llm.parse.signals`) does this once per turn and
    its per-entry Python was most of the report's parsing time (issue 30)."""
    return _ENTRY_TUPLE.validate_python(entries)


def raw_entries(raw: Any) -> list[dict]:
    """A turn's raw signal entries: ``{"iu_analysis": [...]}`` or the list itself; non-dicts dropped."""
    if isinstance(raw, dict):
        raw = raw.get("iu_analysis", [])
    if not isinstance(raw, list):
        return []
    return [e for e in raw if isinstance(e, dict)]


def normalize_signals(raw: Any) -> list[SignalEntry]:
    """A turn's signal list, each entry normalised (spec §1.5)."""
    return [normalize_entry(e) for e in raw_entries(raw)]
