"""What the environment refuses, each with a stable ``code`` (the HTTP server's error field)."""

from __future__ import annotations


class TrainingEnvError(RuntimeError):
    code = "environment_error"
    status = 400


class InvalidReset(TrainingEnvError):
    code = "invalid_reset"


class InvalidAction(TrainingEnvError):
    code = "invalid_action"


class UnknownEpisode(TrainingEnvError):
    code = "unknown_episode"
    status = 404


class EpisodeExpired(TrainingEnvError):
    code = "episode_expired"
    status = 410


class EpisodeDone(TrainingEnvError):
    code = "episode_done"
    status = 409


class EpisodeBusy(TrainingEnvError):
    code = "episode_busy"
    status = 409


class EnvironmentFull(TrainingEnvError):
    code = "environment_full"
    status = 503



__all__ = [
    "EnvironmentFull", "EpisodeBusy", "EpisodeDone", "EpisodeExpired", "InvalidAction", "InvalidReset",
    "TrainingEnvError", "UnknownEpisode",
]
