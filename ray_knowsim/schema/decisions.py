"""``RUN_DIR/decisions.json``: what an adaptive run decided, when, and what it saved.

Written by the adaptive runner after every round (ray_knowsim/adaptive/), read by the report's
decision trace and by ``compare``. Conditions are named as ``compare`` names them (a run's
condition names).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

#: design fields added after format 2 was first written, with the value every record before them
#: ran under: a run keeps replaying and resuming with the design it recorded
RECORDED_DESIGN_DEFAULTS: dict[str, Any] = {"in_play": "candidates"}


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
    matched: int  # items where both conditions have an item mean
    wins: int  # items where a is better (oriented by the metric's direction)
    losses: int
    ties: int  # equal item means (to stats.ranks.TIE_DECIMALS decimals)
    win_rate: float | None  # (wins + ties / 2) / matched (None: no matched item)
    level: float  # the local (Holm) level the pair was tested at
    win_low: float  # interval of the decisive win rate wins / (wins + losses) at ``level``
    win_high: float
    zero_width: bool  # win_low == win_high (shown as such, not as an ordinary interval)
    verdict: Literal["a_better", "b_better", "within_effect", "open"]
    better: str | None  # the condition significantly better on the metric
    within_effect: bool = False  # pairs: shown within 1/2 +- effect in tie-inclusive win rate


class DecisionRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    knowledge_level: str
    metric: str
    kind: Literal["best", "ranking", "pairs"]
    decided: bool
    after_round: int | None
    winner: str | None = None  # best: beats every other condition directly
    order: list[str] | None = None  # ranking
    cycle: list[str] | None = None  # significant beats around a cycle (no winner / no order), [c1, ..., c1]
    in_play: list[str]  # conditions this decision still needs
    candidates: list[str]  # conditions no other condition significantly beats
    eliminated: dict[str, int]  # condition -> the round it left play
    pairs: list[PairRecord]


class FailureGap(BaseModel):
    """A pair of conditions whose failure rates differ enough to bias the comparison
    (compare's rule: :func:`ray_knowsim.compare.failures.failure_gaps`)."""

    model_config = ConfigDict(extra="forbid")
    task: str
    knowledge_level: str
    condition_a: str
    condition_b: str
    failure_rate_a: float
    failure_rate_b: float
    p_fisher: float


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
    format: int = 2
    config_hash: str | None  # None: a planning replay (ray_knowsim.adaptive.replay)
    quantity: str  # what every verdict is about (stats.winrate.QUANTITY)
    spec: dict[str, Any]  # the adaptive spec, locked at round 1 (a resume with another is refused)
    decide: Literal["best", "ranking", "pairs"]
    metrics: list[str]
    alpha: float
    family_size: int  # hypotheses (pairs) in the Holm family
    procedure: str
    # curtailed: stopped before the pool's end because no open decision could still be reached
    status: Literal["running", "decided", "pool_exhausted", "budget", "curtailed"]
    sessions_run: int
    sessions_fixed: int  # the fixed design of the same pool at the rounds' trials
    spend_run: Spend | None = None
    spend_fixed: Spend | None = None  # estimated: each condition's mean per session run x its fixed sessions
    decisions: list[DecisionRecord]
    rounds: list[RoundRecord]
    failure_gaps: list[FailureGap] = []  # pairs whose failure rates differ (their verdicts may be biased)

    @model_validator(mode="before")
    @classmethod
    def _recorded_design(cls, data: Any) -> Any:
        """A spec recorded before a design field existed ran under that field's old value."""
        if isinstance(data, dict) and isinstance(data.get("spec"), dict) and isinstance(data["spec"].get("design"), dict):
            design = data["spec"]["design"]
            missing = {k: v for k, v in RECORDED_DESIGN_DEFAULTS.items() if k not in design}
            if missing:
                data = {**data, "spec": {**data["spec"], "design": {**design, **missing}}}
        return data


__all__ = ["RECORDED_DESIGN_DEFAULTS", "DecisionRecord", "DecisionsFile", "FailureGap", "PairRecord", "RoundRecord", "Spend"]
