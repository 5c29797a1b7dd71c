"""The virtual early stop (spec §8): mastery or sustained cognitive overload."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ray_knowsim.rules.config import TerminationConfig


@dataclass(frozen=True)
class TurnSignal:
    """The per-turn facts the stop rules read."""

    overload: bool
    n_upward: int
    mastery_share: float  # share of IUs at knows_well after the turn
    nothing_mentioned: bool


@dataclass(frozen=True)
class EarlyStop:
    turn: int  # 1-based turn after which the stop fires
    reason: str  # "mastery" | "cognitive_overload"

    @property
    def index(self) -> int:
        """The reference records' 0-indexed form (``virtual_early_stop_turn``)."""
        return self.turn - 1


def mastery_turn(turns: Sequence[TurnSignal], cfg: TerminationConfig) -> int | None:
    for t, s in enumerate(turns, start=1):
        if s.mastery_share >= cfg.mastery_fraction:
            return t
    return None


def overload_turn(turns: Sequence[TurnSignal], cfg: TerminationConfig) -> int | None:
    for t in range(cfg.min_turn, len(turns) + 1):
        window = turns[max(0, t - cfg.window) : t]
        overloaded = sum(1 for s in window if s.overload)
        upward = sum(s.n_upward for s in window)
        if cfg.rule == "reference":
            fired = overloaded >= cfg.min_overloaded and upward <= cfg.max_upward
        else:  # the paper's text: two of three symptoms
            symptoms = (
                overloaded >= cfg.min_overloaded,
                upward <= cfg.max_upward,
                all(s.nothing_mentioned for s in window),
            )
            fired = sum(symptoms) >= 2
        if fired:
            return t
    return None


def early_stop(turns: Sequence[TurnSignal], cfg: TerminationConfig) -> EarlyStop | None:
    mastery = mastery_turn(turns, cfg)
    overload = overload_turn(turns, cfg)
    if mastery is not None and (overload is None or mastery <= overload):
        return EarlyStop(mastery, "mastery")
    if overload is not None:
        return EarlyStop(overload, "cognitive_overload")
    return None
