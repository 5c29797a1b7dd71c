"""Replay a recorded benchmark session through the environment: its tutor turns as the policy's.

The recorded session's seed, initial state, simulator and tutor strategy start the episode; each
recorded tutor message is one step. With the run's models (the offline model, or a seeded one),
the environment then re-runs the benchmark's own loop, so its states, signals and metrics are
the run's: the check that the environment's reward IS the benchmark.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ray_knowsim.schema.states import state_name
from ray_knowsim.training.environment import TrainingEnvironment
from ray_knowsim.training.schema import Observation, ResetRequest


def reset_of(session: Mapping[str, Any], episode_id: str | None = None) -> ResetRequest:
    """The reset that reproduces a recorded session (a sessions-table row as a mapping)."""
    labels, states = list(session["iu_labels"]), list(session["initial_states"])
    return ResetRequest(
        task=session["task"], item_id=session["item_id"], level=session["knowledge_level"], seed=int(session["seed"]),
        simulator=session["simulator"], strategy=session["assistant_strategy"],
        initial_states={label: state_name(int(s)) for label, s in zip(labels, states)},
        session_id=session["session_id"], episode_id=episode_id,
    )  # fmt: skip


async def replay(env: TrainingEnvironment, session: Mapping[str, Any], tutor_turns: Sequence[str],
                 episode_id: str | None = None) -> list[Observation]:
    """Every observation of the episode that replays ``tutor_turns`` (in turn order) on the
    recorded ``session``: the reset's, then one per step, until the episode ends."""
    observations = [await env.reset(reset_of(session, episode_id))]
    for message in tutor_turns:
        if observations[-1].done:
            break
        observations.append(await env.step(observations[-1].episode_id, message))
    return observations


__all__ = ["replay", "reset_of"]
