"""The reward components of a step, read from the rules' own per-turn records and metric functions.

Nothing is computed here that the benchmark does not compute: a turn's gain is the rules'
``absorbed_gain`` (:func:`ray_knowsim.rules.turn_metrics.turn_metrics`), whose sum over the turns
is the episode's KG (:func:`ray_knowsim.rules.final_metrics.reference_metrics`); the episode's
metrics are :meth:`ray_knowsim.rules.trajectory.Trajectory.summary`, the very function a benchmark
session row is filled from.
"""

from __future__ import annotations

from typing import Any

from ray_knowsim.schema.results import FAILURE_MODES
from ray_knowsim.schema.states import state_name
from ray_knowsim.rules.turn_metrics import TurnMetrics
from ray_knowsim.rules.update import TurnUpdate
from ray_knowsim.sim.session import LiveSession
from ray_knowsim.sim.types import ShardContext
from ray_knowsim.training.schema import EpisodeMetadata, EpisodeReward, TurnReward


def turn_reward(update: TurnUpdate, metrics: TurnMetrics) -> TurnReward:
    return TurnReward(
        gain=metrics.absorbed_gain,
        overload=bool(update.overload),
        capacity_load=metrics.capacity_load,
        perceived_overload=metrics.perceived_overload,
        redundant=int(metrics.failure_modes.get("redundant", 0)),
        upward=metrics.n_upward_transitions,
        failure_modes={m: int(metrics.failure_modes.get(m, 0)) for m in FAILURE_MODES},
    )


def episode_reward(live: LiveSession, ctx: ShardContext) -> EpisodeReward | None:
    """The benchmark's metrics of a finished, scored episode (None without a state update)."""
    traj = live.knowledge.trajectory
    if traj is None or not traj.metrics:
        return None
    metrics: dict[str, Any] = dict(traj.summary(ctx.rules))
    for mode in FAILURE_MODES:  # the session table's fm_* columns, summed the same way
        metrics[f"fm_{mode}"] = sum(m.failure_modes[mode] for m in traj.metrics)
    metrics["turns"] = live.turns_done
    return EpisodeReward(metrics=metrics)


def observation_metadata(live: LiveSession, ctx: ShardContext, episode_id: str, rules_hash: str,
                         models: dict[str, str]) -> EpisodeMetadata:
    index, traj = live.index, live.knowledge.trajectory
    carries = traj.updates[-1].carries if traj is not None and traj.updates else {}
    signals = traj.entries[-1] if traj is not None and traj.entries else []
    spec = live.spec
    return EpisodeMetadata(
        episode_id=episode_id, session_id=spec.session_id, task=spec.task, item_id=spec.item_id,
        level=spec.knowledge_level, simulator=spec.simulator, simulator_structured=live.structured,
        strategy=spec.assistant_strategy, rules_preset=ctx.rules.preset, rules_hash=rules_hash, prompts=ctx.prompts,
        seed=spec.seed, init_seed=spec.init_seed, models=models,
        states={index.label_of(v): state_name(live.knowledge.states[v]) for v in index.ids},
        initial_states={index.label_of(v): state_name(live.knowledge.initial[v]) for v in index.ids},
        carries={index.label_of(v): float(carries.get(v, 0.0)) for v in index.ids},
        signals=[e.model_dump(mode="json") for e in signals], capacity=live.knowledge.tau,
        stop_reason=None if live.live else live.stop_reason, error=live.error, error_detail=live.error_detail,
    )  # fmt: skip


__all__ = ["episode_reward", "observation_metadata", "turn_reward"]
