"""Knowledge states as stored (spec §1.3, §1.4) and the initial-state cache."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel


class IUStateEntry(BaseModel):
    """One IU's entry in a knowledge state; unknown extra keys are kept (spec §1.4)."""

    model_config = ConfigDict(extra="allow")
    state: str | None = None
    evidence: str | None = None
    fractional_progress: float | None = None


class KnowledgeState(RootModel[dict[str, IUStateEntry]]):
    """``{"IUk: concept": {"state": ...}}``."""

    def states(self) -> dict[str, str | None]:
        return {label: entry.state for label, entry in self.root.items()}


class InitCache(BaseModel):
    """``{task_key: {item_id: {level: KS}}}`` plus ``_meta``."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    meta: dict[str, Any] = Field(default_factory=dict, alias="_meta")

    def tasks(self) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
        return {k: v for k, v in (self.model_extra or {}).items()}

    def lookup(self, task_key: str, item_id: str, level: str) -> dict[str, Any] | None:
        return (self.model_extra or {}).get(task_key, {}).get(item_id, {}).get(level)
