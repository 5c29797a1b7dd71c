"""A recorded conversation reduced to what re-scoring reads: graph, initial state, per-turn signals.

Why compact signals: a sweep re-scores every conversation thousands of times, and a run's turn
table holds millions of signal entries. Only four facts of an entry drive the rules (id, teaching
quality, attempt type, whether the assistant confirmed an incorrect attempt without explaining),
so we keep those and drop the free text. ``CompactSignal`` exposes the same attributes the rules
and the kernel's packer read from a ``SignalEntry``; ``to_entry`` rebuilds a real one for the
plain-Python rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.signals import (
    ATTEMPT_ARTICULATION,
    ATTEMPT_NONE,
    ATTEMPT_REASONING,
    TQ_NOT_MENTIONED,
    TQ_SHALLOW,
    TQ_WELL,
    SignalEntry,
    normalize_entry,
    raw_entries,
)
from ray_knowsim.rules.final_metrics import KSBasis
from ray_knowsim.rules.update import INCORRECT_NO_EXPLANATION

_TQ_CODES = {"not_mentioned": TQ_NOT_MENTIONED, "shallow": TQ_SHALLOW}
_TQ_NAMES = {TQ_NOT_MENTIONED: "not_mentioned", TQ_SHALLOW: "shallow", TQ_WELL: "well_explained"}
_ATTEMPT_CODES = {"none": ATTEMPT_NONE, "reasoning": ATTEMPT_REASONING, "articulation": ATTEMPT_ARTICULATION}
_ATTEMPT_NAMES = {v: k for k, v in _ATTEMPT_CODES.items()}


class CompactSignal:
    """One IU's signals of one turn, as the rules see them."""

    __slots__ = ("id", "tq_code", "attempt_code", "assistant_response_role")

    def __init__(self, id: str | None, tq_code: int, attempt_code: int, incorrect_no_explanation: bool) -> None:
        self.id = id
        self.tq_code = tq_code
        self.attempt_code = attempt_code
        # the only role value any rule tests for; anything else reads as "not_applicable"
        self.assistant_response_role = INCORRECT_NO_EXPLANATION if incorrect_no_explanation else "not_applicable"

    @property
    def mentioned(self) -> bool:
        return self.id is not None and self.tq_code != TQ_NOT_MENTIONED

    def to_entry(self) -> SignalEntry:
        return SignalEntry(
            id=self.id,
            teaching_quality=_TQ_NAMES[self.tq_code],
            user_attempt_type=_ATTEMPT_NAMES[self.attempt_code],  # type: ignore[arg-type]
            assistant_response_role=self.assistant_response_role,
        )

    def __getstate__(self):
        return (self.id, self.tq_code, self.attempt_code, self.assistant_response_role)

    def __setstate__(self, state) -> None:
        self.id, self.tq_code, self.attempt_code, self.assistant_response_role = state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompactSignal) and self.__getstate__() == other.__getstate__()

    def __repr__(self) -> str:
        return f"CompactSignal({self.id!r}, tq={self.tq_code}, attempt={self.attempt_code}, role={self.assistant_response_role!r})"


def compact_entry(entry: SignalEntry) -> CompactSignal:
    return CompactSignal(entry.id, entry.tq_code, entry.attempt_code, entry.assistant_response_role == INCORRECT_NO_EXPLANATION)


def compact_raw(raw: dict[str, Any]) -> CompactSignal:
    """A raw signal dict -> CompactSignal, exactly as ``normalize_entry`` would read it.

    Entries already in the canonical shape (what our runs write) take a fast path; anything else
    (drifted field names, arrow-encoded labels, legacy attempt flags) goes through
    ``normalize_entry`` itself.
    """
    tq = raw.get("teaching_quality")
    attempt = raw.get("user_attempt_type")
    if isinstance(tq, str) and isinstance(attempt, str) and attempt in _ATTEMPT_CODES and "assistant_response_role" in raw:
        raw_id = raw.get("id")
        entry_id = None if not raw_id else (raw_id if isinstance(raw_id, str) else str(raw_id))
        role = raw["assistant_response_role"]
        return CompactSignal(entry_id, _TQ_CODES.get(tq, TQ_WELL), _ATTEMPT_CODES[attempt], role == INCORRECT_NO_EXPLANATION)
    return compact_entry(normalize_entry(raw))


def compact_turn(raw: Any) -> list[CompactSignal]:
    """A turn's raw signal list (or ``{"iu_analysis": [...]}``), non-dicts dropped (spec §1.5)."""
    return [compact_raw(e) for e in raw_entries(raw)]


#: conversation columns every source provides (strings; "" when the source lacks one)
META_COLUMNS: tuple[str, ...] = (
    "session_id",
    "task",
    "item_id",
    "knowledge_level",
    "condition",
    "assistant_model",
    "assistant_strategy",
)


@dataclass
class Conversation:
    position: int  # index in the source (stable: rows refer to it)
    key: str  # unique and stable (session id, or file:index:problem id); seeds re-sampling
    graph: GraphIndex  # shared by conversations of the same graph (the kernel packs it once)
    initial: dict[str, int]  # graph id -> state
    carries: dict[str, float] | None  # graph id -> fractional carry at t = 0 (None: zeros)
    turns: list[list[CompactSignal]]
    max_turns: int  # temporal-decay horizon
    meta: dict[str, str] = field(default_factory=dict)
    recorded: dict[str, Any] = field(default_factory=dict)  # the source's metrics, our row names
    #: the recorded initial KS's labels the KG normalisations sum over (spec §9.1); None = all nodes
    basis: KSBasis | None = None

    def entries(self) -> list[list[SignalEntry]]:
        return [[s.to_entry() for s in turn] for turn in self.turns]


def chunks(items: list[Conversation], size: int) -> Iterable[list[Conversation]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


__all__ = ["META_COLUMNS", "CompactSignal", "Conversation", "chunks", "compact_entry", "compact_raw", "compact_turn"]
