"""What a session's learner knows: its state before the first turn and after the last, the IUs
ever explained to it, and the trajectory of the rules' per-turn records that its metrics are read
from. A baseline learner has no state: its knowledge never advances (the trajectory stays empty)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.trajectory import Trajectory
from ray_knowsim.rules.turn_metrics import TurnMetrics
from ray_knowsim.rules.update import TurnUpdate, well_explained_ids


@dataclass
class KnowledgeState:
    tau: int  # the learner's capacity (spec §6.3)
    initial: dict[str, int]
    states: dict[str, int]  # after the last completed turn
    trajectory: Trajectory
    explained: set[str] = field(default_factory=set)  # labels ever rated well_explained

    def advance(self, index: GraphIndex, entries: Sequence[SignalEntry], update: TurnUpdate, metrics: TurnMetrics) -> None:
        """Take one turn's state update (``update.post`` becomes the state) into the trajectory."""
        self.trajectory.updates.append(update)
        self.trajectory.metrics.append(metrics)
        self.trajectory.entries.append(list(entries))
        self.states = update.post
        self.explained.update(index.label_of(v) for v in well_explained_ids(index, entries))


__all__ = ["KnowledgeState"]
