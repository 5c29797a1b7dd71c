"""``RUN_DIR/decisions.json``: what an adaptive run decided, when, and what it saved.

Written by the adaptive runner after every round (ray_knowsim/adaptive/), read by the report's
decision trace and by ``compare``. Conditions are named as ``compare`` names them (a run's
condition names).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Spend(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sessions: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: a model without a price


class PairRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    condition_a: str
    condition_b: str
    wins_a: int  # items a won (its mean difference a - b > 0), ties dropped
    items: int  # non-tied items
    win_low: float  # the confidence sequence for a's win rate, at alpha / family_size
    win_high: float
    p_value: float  # anytime-valid, unadjusted for the family (compare with alpha / family_size)
    better: str | None  # decided: the condition that is better on the metric (orientation-aware)
    within_effect: bool = False  # pairs: shown smaller than the stated effect


class DecisionRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    knowledge_level: str
    metric: str
    kind: Literal["best", "ranking", "pairs"]
    decided: bool
    after_round: int | None
    winner: str | None = None  # best
    order: list[str] | None = None  # ranking
    in_race: list[str]  # best: not beaten by any condition; ranking/pairs: in an unresolved pair
    eliminated: dict[str, int]  # condition -> the round it left the race
    pairs: list[PairRecord]


class RoundRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    round: int
    items: dict[str, list[str]]  # task -> the items this round added
    sessions: int  # sessions this round added
    in_play: dict[str, dict[str, list[str]]]  # task -> level -> conditions this round ran
    eliminated: list[str]  # "task/level/metric: condition" that left a race after this round
    decided: list[str]  # "task/level/metric" decided after this round


class DecisionsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: int = 1
    config_hash: str
    decide: Literal["best", "ranking", "pairs"]
    metrics: list[str]
    alpha: float
    family_size: int  # pairs over all decisions: every sequence is at alpha / family_size
    procedure: str
    status: Literal["running", "decided", "pool_exhausted", "budget"]
    sessions_run: int
    sessions_fixed: int  # what the fixed design of the same pool runs
    spend_run: Spend
    spend_fixed: Spend  # estimated: each condition's mean per session run x its fixed sessions
    decisions: list[DecisionRecord]
    rounds: list[RoundRecord]


__all__ = ["DecisionRecord", "DecisionsFile", "PairRecord", "RoundRecord", "Spend"]
