"""Recorded conversations (spec §1.6): the fields we read; everything else is kept as extras.

Recorded files are JSON lists of these. Structured records (``run_type`` "KS-based",
``simulation_method`` "structured") carry the state trajectory; baseline records have an
empty-string ``initial_knowledge_state`` and empty histories.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ConversationRecord(BaseModel):
    model_config = ConfigDict(extra="allow")

    # identity
    problem_id: str = Field(min_length=1)
    task: str | None = None
    knowledge_level: str | None = None
    assistant_strategy: str | None = None
    run_type: str | None = None
    simulation_method: str | None = None
    # rules used
    absorption_mode: str | None = None
    absorption_config: dict[str, Any] | None = None
    initial_overload_threshold: int | None = None
    # state trajectory (structured records only)
    initial_knowledge_state: dict[str, dict[str, Any]] | str = ""
    knowledge_state: dict[str, dict[str, Any]] | None = None
    knowledge_state_history: list[dict[str, dict[str, Any]]] = Field(default_factory=list)
    iu_analysis_history: list[Any] = Field(default_factory=list)  # per turn: list of (raw) signal entries
    turn_metrics_history: list[dict[str, Any]] = Field(default_factory=list)
    engagement_score_history: list[dict[str, Any]] = Field(default_factory=list)
    # outcomes
    metrics: dict[str, Any] = Field(default_factory=dict)
    metrics_at_early_stop: dict[str, Any] | None = None
    virtual_early_stop_turn: int | None = None
    virtual_early_stop_reason: str | None = None
    virtual_mastery_turn: int | None = None
    # loop bookkeeping and transcript
    turns: int | None = None
    stop_reason: str | None = None
    stop_details: dict[str, Any] | None = None
    conversation: list[list[Any]] = Field(default_factory=list)  # [role, text] pairs

    @property
    def claims_structured(self) -> bool:
        return self.run_type == "KS-based" or self.simulation_method == "structured"

    @property
    def is_structured(self) -> bool:
        """True for knowledge-state records (the ones a replay can use)."""
        return self.claims_structured and isinstance(self.initial_knowledge_state, dict)

    @model_validator(mode="after")
    def _consistent(self) -> "ConversationRecord":
        ks = self.initial_knowledge_state
        if isinstance(ks, str) and ks != "":
            raise ValueError("initial_knowledge_state must be a knowledge-state object or the empty string")
        if self.claims_structured and not (isinstance(ks, dict) and ks):
            raise ValueError(
                f"record says run_type={self.run_type!r}, simulation_method={self.simulation_method!r} "
                "but has no initial_knowledge_state"
            )
        return self


__all__ = ["ConversationRecord"]
