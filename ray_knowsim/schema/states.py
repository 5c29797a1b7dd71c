"""Knowledge-state vocabulary: the four ordinal states and their aliases (spec §0)."""

from __future__ import annotations

from typing import Any, Iterable, Literal

UNAWARE, STRUGGLING, PARTIAL, KNOWS_WELL = 0, 1, 2, 3

STATE_NAMES: tuple[str, str, str, str] = ("unaware", "struggling", "partial_understanding", "knows_well")
StateName = Literal["unaware", "struggling", "partial_understanding", "knows_well"]
KNOWLEDGE_LEVELS: tuple[str, str, str] = ("novice", "intermediate", "advanced")


def level_order(levels: Iterable[str]) -> list[str]:
    """The distinct ``levels`` in the paper's order (novice, intermediate, advanced), any others after, sorted."""
    return sorted(set(levels), key=lambda v: (KNOWLEDGE_LEVELS.index(v) if v in KNOWLEDGE_LEVELS else len(KNOWLEDGE_LEVELS), v))

KnowledgeLevel = Literal["novice", "intermediate", "advanced"]

_ALIASES = {"unknown_unknown": UNAWARE, "not_introduced": UNAWARE}
_BY_NAME = {name: i for i, name in enumerate(STATE_NAMES)} | _ALIASES


def state_value(name: Any) -> int:
    """Ordinal of a state name; anything missing or unrecognised reads as unaware (spec §0)."""
    if isinstance(name, str):
        return _BY_NAME.get(name, UNAWARE)
    return UNAWARE


def state_name(value: int) -> str:
    return STATE_NAMES[int(value)]
