"""The ``adaptive:`` section: decide with fewer conversations (docs/adaptive.md).

The run goes in rounds over items drawn from the pool in an order fixed by the run seed; each
round adds ``round.items`` items at ``round.trials`` trials for every condition still in play at
each level, then decides what it can with the procedure of :mod:`ray_knowsim.stats.adaptive`.
The section chooses which planned sessions run, never what a session produces, so it is outside
the config hash: an adaptive run's sessions are the fixed design's sessions (same ids, seeds and
rows), and a run directory can be completed as a fixed run. What decides is locked instead in
``decisions.json`` at round 1 (:func:`ray_knowsim.adaptive.rounds.spec_of`): a resume with another
spec is refused.
"""

from __future__ import annotations

from typing import Literal, Sequence

from pydantic import Field, model_validator

from ray_knowsim.config.base import Strict
from ray_knowsim.schema.results import RUN_METRICS
from ray_knowsim.stats.adaptive import Design, Procedure
from ray_knowsim.stats.defaults import ALPHA
from ray_knowsim.stats.group_sequential import Spending

#: metrics a decision can be about: every metric the run's tables reduce
DECISION_METRICS = frozenset(RUN_METRICS)


class RoundConfig(Strict):
    items: int = Field(5, ge=1)  # new items per round
    trials: int | None = Field(None, ge=1)  # trials per item (default: the run's trials)


class BudgetConfig(Strict):
    sessions: int | None = Field(None, ge=1)  # at most this many sessions in all
    usd: float | None = Field(None, gt=0)  # stop before a round that would spend past this


class DesignConfig(Strict):
    # group_sequential: the exact sign test with alpha spent over the known pool's rounds;
    # anytime: the Krichevsky-Trofimov confidence sequence (open-ended pools, no horizon)
    kind: Literal["group_sequential", "anytime"] = "group_sequential"
    spending: Literal["hsd", "pocock"] = "hsd"  # Hwang-Shih-DeCani(gamma) or Lan-DeMets Pocock-type
    gamma: float = Field(-6.0, ge=-20, le=20)  # hsd: -4 ~ O'Brien-Fleming, 1 ~ Pocock (-6: docs/adaptive.md)
    # decide: best -- open_pairs: every condition with an unresolved pair keeps running while the
    # decision is open (each rejection passes its alpha on); candidates: only the conditions that
    # can still win and those with an open pair with one (fewer sessions, fewer decisions)
    # curtail (default): as open_pairs, but a pair stops once it can practically no longer cross
    # (pairs: nor be shown within the effect), and a decided decision's open pairs keep running
    # while another decision of the family is open (their rejections pass alpha on to it; not with
    # equivalence claims, which are at alpha / m) -- docs/adaptive.md, "Several decisions"
    in_play: Literal["curtail", "open_pairs", "candidates"] = "curtail"


class AdaptiveConfig(Strict):
    decide: Literal["best", "ranking", "pairs"] = "best"
    metrics: list[str] = Field(default_factory=lambda: ["kg", "dc", "co"], min_length=1)
    alpha: float = Field(ALPHA, gt=0, lt=1)
    round: RoundConfig = Field(default_factory=RoundConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    # pairs: a pair is resolved when shown smaller than this margin of the win rate: its whole
    # confidence sequence inside 1/2 +- effect (0.15: neither wins more than 65 % of the items)
    effect: float | None = Field(None, gt=0, lt=0.5)
    conditions: list[str] | None = Field(None, min_length=2)  # the conditions decided over (default: all)
    family: Literal["run", "decision"] = "run"  # Holm over every pair of every decision, or per decision
    design: DesignConfig = Field(default_factory=DesignConfig)

    @model_validator(mode="after")
    def _check(self) -> "AdaptiveConfig":
        unknown = [m for m in self.metrics if m not in DECISION_METRICS]
        if unknown:
            raise ValueError(f"metrics: unknown {unknown}; known: {sorted(DECISION_METRICS)}")
        if len(set(self.metrics)) != len(self.metrics):
            raise ValueError("metrics: a metric appears twice")
        if self.conditions is not None and len(set(self.conditions)) != len(self.conditions):
            raise ValueError("conditions: a condition appears twice")
        if self.decide == "pairs" and self.effect is None:
            raise ValueError("effect: required with decide: pairs (the win-rate margin a pair must be shown within)")
        return self

    def procedure(self, tasks: Sequence[str], levels: Sequence[str], conditions: Sequence[str]) -> Procedure:
        """The decision procedure this section asks for over a run's tasks, levels and conditions:
        the one the rounds run, the planning replay replays and the dry run's forecast simulates."""
        design = Design(self.design.kind, Spending(self.design.spending, self.design.gamma), self.design.in_play)
        return Procedure.build(tasks, levels, list(self.metrics), conditions, self.decide, self.alpha, self.effect, design,
                               self.family)


__all__ = ["AdaptiveConfig", "BudgetConfig", "DECISION_METRICS", "DesignConfig", "RoundConfig"]
