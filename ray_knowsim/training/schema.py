"""The training environment's data formats: what a trainer sends (reset, action) and gets back.

Every format forbids unknown fields, so a malformed action is refused with the field it got
wrong instead of being half-read.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

KnowledgeLevel = Literal["novice", "intermediate", "advanced"]
EarlyStop = Literal["stop", "virtual"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnvironmentConfig(_Strict):
    """How episodes run. ``run_config`` names a benchmark run config (YAML): its items, graphs,
    models (learner simulator and extractor), role settings, rules and prompt set are the
    environment's, so an episode is scored exactly as that benchmark scores a session. The
    fields below override the run config's episode length and stopping."""

    run_config: str | None = Field(None, description="benchmark run config; None: the packaged demo (offline model)")
    overrides: list[str] = Field(default_factory=list, description="KEY=VALUE assignments applied to the run config")
    max_turns: int | None = Field(None, ge=1, le=200, description="tutor turns at most (None: the run config's)")
    min_turns: int = Field(1, ge=1, description="the early stop never ends an episode before this many turns")
    early_stop: EarlyStop = Field("stop", description="stop: end at the method's early stop; virtual: only record it")
    strategy: str = Field("minimal", description="tutor prompt framing the observation's prompt_messages carry")
    max_message_chars: int = Field(16_000, ge=1, description="a longer tutor message is refused")
    episode_ttl_s: float = Field(1800.0, gt=0, description="an episode idle this long expires")
    max_episodes: int = Field(4096, ge=1, description="open episodes at most (reset refuses more)")


class ResetRequest(_Strict):
    """One episode: a benchmark item at a knowledge level, learned by ``simulator``."""

    task: str
    item_id: str
    level: KnowledgeLevel = "novice"
    seed: int = Field(0, ge=0, description="the learner's and extractor's sampling seeds derive from it")
    init_seed: int | None = Field(None, ge=0, description="seed of the initial knowledge state (None: from seed)")
    simulator: str = "structured"
    strategy: str | None = Field(None, description="tutor prompt framing (None: the environment's)")
    initial_states: dict[str, str] | None = Field(None, description="IU label -> state name (None: sampled)")
    episode_id: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:@+=-]+$")
    session_id: str | None = Field(None, min_length=1, description="the benchmark session id to reuse (replays)")


class TutorAction(_Strict):
    """The policy's tutor turn."""

    message: str

    @field_validator("message")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the tutor message is empty")
        return value


class TurnReward(_Strict):
    """What one tutor turn did to the learner's knowledge state (the rules' own per-turn counters)."""

    gain: float = Field(description="absorbed knowledge gain of the turn; the episode's turn gains sum to its KG")
    overload: bool = Field(description="the turn's cognitive load reached the learner's capacity")
    capacity_load: float = Field(description="min(1, load / capacity): the turn's share of CO")
    perceived_overload: float = Field(description="max(0, load - capacity) / load")
    redundant: int = Field(description="IUs the turn explained that the learner already knew well")
    upward: int = Field(description="IUs whose state rose")
    failure_modes: dict[str, int] = Field(description="explained IUs by failure mode (redundant, prereq_blocked, ...)")


class EpisodeReward(_Strict):
    """The episode's benchmark metrics (:meth:`Trajectory.summary`): kg, nkg, dc, ic, co, po,
    engagement, learning_experience, the same at the early stop (``*_es``), early_stop_turn."""

    metrics: dict[str, Any]


class Rewards(_Strict):
    turn: TurnReward | None = None  # None: the step ended before a state update (a failure)
    episode: EpisodeReward | None = None  # only on the last step of a scored episode


class EpisodeMetadata(_Strict):
    episode_id: str
    session_id: str
    task: str
    item_id: str
    level: str
    simulator: str
    simulator_structured: bool
    strategy: str
    rules_preset: str
    rules_hash: str
    prompts: str
    seed: int
    init_seed: int
    models: dict[str, str]  # role -> model name
    states: dict[str, str]  # IU label -> state name after the last turn
    initial_states: dict[str, str]
    carries: dict[str, float]  # IU label -> fractional carry after the last turn
    signals: list[dict[str, Any]]  # the extractor's entries of the last turn
    capacity: int
    stop_reason: str | None = None  # mastery | cognitive_overload | max_turns | user_terminated | error
    error: str | None = None  # <role>_<reason> when the episode is unscorable
    error_detail: str | None = None


class Observation(_Strict):
    """What reset and step return. ``reward``: the step's scalar reward, the turn's knowledge
    gain (0.0 on reset); None when the episode ended unscorable, never 0 for "unknown"."""

    episode_id: str
    turn: int  # tutor turns taken so far
    learner_message: str | None  # the learner's next message (None when the episode is over)
    prompt_messages: list[dict[str, str]]  # the benchmark's tutor prompt for the next reply ([] when done)
    done: bool
    reward: float | None
    rewards: Rewards
    metadata: EpisodeMetadata


__all__ = [
    "EarlyStop",
    "EnvironmentConfig",
    "EpisodeMetadata",
    "EpisodeReward",
    "KnowledgeLevel",
    "Observation",
    "ResetRequest",
    "Rewards",
    "TurnReward",
    "TutorAction",
]
