"""A whole conversation's state trajectory from its per-turn signals: update, counters, stop, metrics.

Pure: the replay, the counterfactual sweeps (through the kernel's twin) and tests build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ray_knowsim.schema.graph import GraphIndex, capacity
from ray_knowsim.schema.metrics import BUILTIN_METRICS, Metric, MetricError, outside_metrics
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.schema.states import KNOWS_WELL
from ray_knowsim.rules.config import RuleConfig
from ray_knowsim.rules.final_metrics import KSBasis, paper_metrics
from ray_knowsim.rules.termination import EarlyStop, TurnSignal, early_stop
from ray_knowsim.rules.turn_metrics import TurnMetrics, turn_metrics
from ray_knowsim.rules.update import TurnUpdate, apply_turn, mentions, well_explained_ids


@dataclass
class Trajectory:
    tau: int
    initial: dict[str, int]
    updates: list[TurnUpdate] = field(default_factory=list)
    metrics: list[TurnMetrics] = field(default_factory=list)
    entries: list[list[SignalEntry]] = field(default_factory=list)
    #: what the KG normalisations sum over (the initial KS's labels); None = the graph's nodes
    basis: KSBasis | None = None

    @property
    def states(self) -> list[dict[str, int]]:
        """Index 0 = initial, index t = after turn t."""
        return [self.initial] + [u.post for u in self.updates]

    @property
    def final(self) -> dict[str, int]:
        return self.updates[-1].post if self.updates else dict(self.initial)

    def explained_concepts(self, g: GraphIndex) -> list[str]:
        """Sorted labels of IUs whose last entry of some turn was well_explained (spec §7.7)."""
        return sorted({g.label_of(v) for entries in self.entries for v in well_explained_ids(g, entries)})

    def stop_signals(self) -> list[TurnSignal]:
        n = len(self.initial) or 1
        return [
            TurnSignal(
                overload=u.overload,
                n_upward=m.n_upward_transitions,
                mastery_share=sum(1 for s in u.post.values() if s == KNOWS_WELL) / n,
                nothing_mentioned=not mentions(e),
            )
            for u, m, e in zip(self.updates, self.metrics, self.entries)
        ]

    def early_stop(self, rules: RuleConfig) -> EarlyStop | None:
        return early_stop(self.stop_signals(), rules.termination)

    def summary(self, rules: RuleConfig) -> dict[str, float | int | str | None]:
        """Final and at-early-stop metrics under the session table's names (the catalogue's,
        :mod:`ray_knowsim.schema.metrics`), and each registered outside metric's value."""
        stop = self.early_stop(rules)
        whole = paper_metrics(self.metrics, self.initial, self.final, self.basis)
        out: dict = dict(whole)
        k = stop.turn if stop else len(self.metrics)
        # up to the stop: the whole conversation again when it did not stop early (the same
        # metrics and final state: the same pure function of the same values, not computed twice)
        same = k == len(self.metrics) == len(self.updates)
        prefix = whole if same else paper_metrics(self.metrics[:k], self.initial, self.states[k], self.basis)
        for m in BUILTIN_METRICS:
            if m.source == "state" and m.es_name:
                out[m.es_name] = prefix[m.name]
        for m in outside_metrics():  # plugins' metrics: one column each, computed from this trajectory
            out[m.name] = outside_value(m, self)
        out["early_stop_turn"] = stop.turn if stop else None
        out["early_stop_reason"] = stop.reason if stop else None
        return out


def outside_value(metric: Metric, trajectory: Trajectory) -> float | None:
    """An outside metric's value for one session: its ``compute`` over the trajectory, as a float
    (None: no value). A computation that fails or returns no number is the plugin's error, raised
    with the metric's name, never written as a silent null."""
    if metric.compute is None:
        raise MetricError(f"metric {metric.name!r} has no compute function")
    value = metric.compute(trajectory)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetricError(f"metric {metric.name!r}: compute returned {type(value).__name__}, not a number or None")
    return float(value)


def run_trajectory(
    g: GraphIndex,
    initial: Mapping[str, int],
    signal_lists: Sequence[Sequence[SignalEntry]],
    rules: RuleConfig,
    *,
    initial_carries: Mapping[str, float] | None = None,
    max_turns: int | None = None,
    basis: KSBasis | None = None,
) -> Trajectory:
    """Apply the rules turn by turn. ``initial`` maps graph ids to states (missing -> unaware);
    ``basis`` names the initial KS's labels the KG normalisations sum over (None: all nodes)."""
    tau = capacity(g.size, rules.capacity_ratio, rules.capacity_floor)
    horizon = max_turns if max_turns is not None else max(len(signal_lists), 1)
    traj = Trajectory(tau=tau, initial={v: initial.get(v, 0) for v in g.ids}, basis=basis)
    state = traj.initial
    carries = dict(initial_carries or {})
    for t, entries in enumerate(signal_lists, start=1):
        update = apply_turn(g, state, carries, entries, tau, t, rules, horizon)
        traj.updates.append(update)
        traj.metrics.append(turn_metrics(g, state, entries, update, tau))
        traj.entries.append(list(entries))
        state, carries = update.post, update.carries
    return traj
