"""KnowSim as a training environment: episodes of benchmark sessions whose tutor is a policy.

:class:`TrainingEnvironment` (async, one event loop) is the core; :class:`EnvironmentThread`
runs it on a background loop for synchronous callers (trainers); the adapters for RL libraries
live in ``ray_knowsim.training.adapters`` and import their library only when used.
"""

from ray_knowsim.training.environment import TrainingEnvironment
from ray_knowsim.training.errors import (
    EnvironmentFull,
    EpisodeBusy,
    EpisodeDone,
    EpisodeExpired,
    InvalidAction,
    InvalidReset,
    TrainingEnvError,
    UnknownEpisode,
)
from ray_knowsim.training.schema import EnvironmentConfig, Observation, ResetRequest, TutorAction

__all__ = [
    "EnvironmentConfig", "EnvironmentFull", "EpisodeBusy", "EpisodeDone", "EpisodeExpired", "InvalidAction",
    "InvalidReset", "Observation", "ResetRequest", "TrainingEnvError", "TrainingEnvironment", "TutorAction",
    "UnknownEpisode",
]
