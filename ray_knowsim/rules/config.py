"""Rule configuration: every tunable of the learner model, with two named presets.

``reference`` (default) is what the paper's runs executed (spec §2-§9); ``paper`` is what the
paper's text says (spec §13, D1-D10). Every difference between them is one explicit field here, so
sweeps can vary any of them and results record exactly which rules produced them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Weights4 = tuple[float, float, float, float]  # indexed by pre-state: unaware, struggling, partial, knows_well


class InitRatios(BaseModel):
    """Share of IUs placed as known / partial / struggling for one knowledge level (spec §4.2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    known: float = Field(ge=0, le=1)
    partial: float = Field(ge=0, le=1)
    struggling: float = Field(ge=0, le=1)


REFERENCE_INIT = {
    "novice": InitRatios(known=0.10, partial=0.10, struggling=0.30),
    "intermediate": InitRatios(known=0.55, partial=0.25, struggling=0.20),
    "advanced": InitRatios(known=0.80, partial=0.20, struggling=0.10),
}
PAPER_INIT = {  # D1: the paper's four-state table (unaware = remainder)
    "novice": InitRatios(known=0.10, partial=0.10, struggling=0.30),
    "intermediate": InitRatios(known=0.55, partial=0.15, struggling=0.20),
    "advanced": InitRatios(known=0.80, partial=0.10, struggling=0.10),
}


class TerminationConfig(BaseModel):
    """Virtual early stop (spec §8).

    ``reference``: from turn ``min_turn``, over the last ``window`` turns, at least
    ``min_overloaded`` overloaded turns AND at most ``max_upward`` upward transitions.
    ``paper``: from turn ``min_turn``, over the last ``window`` turns, at least two of
    {>= ``min_overloaded`` overloaded turns, zero upward transitions, nothing mentioned at all}.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    rule: Literal["reference", "paper"] = "reference"
    min_turn: int = Field(3, ge=1)
    window: int = Field(3, ge=1)
    min_overloaded: int = Field(2, ge=0)
    max_upward: int = Field(1, ge=0)
    mastery_fraction: float = Field(1.0, gt=0, le=1)  # D9: share of IUs at knows_well


class RuleConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: str = "reference"
    # --- load (spec §6.2, D18) ---
    w_state: Weights4 = (1.75, 1.00, 0.70, 0.35)
    w_reasoning: Weights4 = (1.75, 1.40, 0.70, 0.35)
    w_articulation: float = Field(0.35, ge=0)
    include_attempt_load: bool = True
    # --- capacity tau = max(floor, round(ratio * |G|)) ---
    capacity_ratio: float = Field(0.55, gt=0)
    capacity_floor: int = Field(2, ge=1)
    # --- overload flag (D8): reference records L >= tau, the paper writes L > tau ---
    overload_flag_strict: bool = False
    # --- dropoff (D4): eta = 1 / (1 + ((L - tau) / (softening * tau))**2) when L > tau ---
    dropoff_softening: float = Field(1.3, gt=0)
    # --- hinge (D5): top N mentioned IUs get eta, the rest tail * eta ---
    hinge: bool = True
    hinge_ratio: float = Field(0.143, ge=0)
    hinge_tail: float = Field(0.5, ge=0, le=1)
    # --- fractional carry (D6, D7) ---
    reset_carry_on_transition: bool = False
    carry_persists: bool = False  # paper text: carry kept until used; reference: wiped every turn it is not used
    # --- temporal decay (inert in paper runs): eta *= T / (T + t - 1) ---
    temporal_decay: bool = False
    # --- initial state (spec §4, D1-D3) ---
    init_ratios: dict[str, InitRatios] = Field(default_factory=lambda: dict(REFERENCE_INIT))
    init_placement: Literal["shuffle", "topological"] = "shuffle"
    init_partial_demotion: bool = True  # D3: partial IUs with < 50% known prereqs stored as struggling
    include_struggling: bool = True
    # --- termination (D9, D10) ---
    termination: TerminationConfig = TerminationConfig()

    @model_validator(mode="after")
    def _check(self) -> "RuleConfig":
        for name in ("w_state", "w_reasoning"):
            if any(w < 0 for w in getattr(self, name)):
                raise ValueError(f"{name} must be non-negative, got {getattr(self, name)}")
        missing = {"novice", "intermediate", "advanced"} - set(self.init_ratios)
        if missing:
            raise ValueError(f"init_ratios lacks levels: {sorted(missing)}")
        return self


def reference_rules() -> RuleConfig:
    return RuleConfig()


def paper_rules() -> RuleConfig:
    return RuleConfig(
        preset="paper",
        overload_flag_strict=True,
        dropoff_softening=1.0,
        hinge=False,
        reset_carry_on_transition=True,
        carry_persists=True,
        init_ratios=dict(PAPER_INIT),
        init_placement="topological",
        init_partial_demotion=False,
        termination=TerminationConfig(rule="paper", min_turn=5, window=5, min_overloaded=4, max_upward=0, mastery_fraction=0.8),
    )


PRESETS = {"reference": reference_rules, "paper": paper_rules}


def rules_from(preset: str = "reference", **overrides) -> RuleConfig:
    """A preset with field overrides, validated (bad values fail before any work starts)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown rule preset {preset!r}; choose one of {sorted(PRESETS)}")
    base = PRESETS[preset]().model_dump()
    base.update(overrides)
    return RuleConfig.model_validate(base)


def reference_absorption_block(rules: RuleConfig) -> tuple[str, dict]:
    """(``absorption_mode``, ``absorption_config``) as the reference records store them (spec §1.6).

    ``temporal_decay`` is the preset's flag, which is on in the reference preset but inert unless
    the run enables decay (spec §2); the effective switch is ``RuleConfig.temporal_decay``.
    """
    names = ("unaware", "struggling", "partial_understanding", "knows_well")
    mode = "weightabsorb_attempt_sigmoid" if rules.preset == "reference" else f"knowsim_{rules.preset}"
    block = {
        "weighting": "state_weighted",
        "W_STATE": dict(zip(names, rules.w_state)),
        "dropoff": True,
        "dropoff_curve": "sigmoid",
        "temporal_decay": True if rules.preset == "reference" else rules.temporal_decay,
        "ratio_table": {level: rules.capacity_ratio for level in ("novice", "intermediate", "advanced")},
        "rule2_cap": False,
        "phase_b_max_tokens": 128000,
        "include_attempt_load": rules.include_attempt_load,
        "W_REASONING": dict(zip(names, rules.w_reasoning)),
        "W_ARTICULATION": rules.w_articulation,
    }
    return mode, block
