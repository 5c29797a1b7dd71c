"""The OpenEnv environment server scaled out on Ray Serve: several replicas behind one address.

Each replica is a Ray actor process that builds, at its start, its own :class:`EnvironmentThread`
(its own episodes, kernel batch and model clients; an HTTP model's run-wide limiter is a Ray actor,
so it is shared, and a vLLM model's engine pool is started once by the server and shared) and its own OpenEnv app over it (:func:`build_app`): only the config travels to
the replicas. Serve's proxy balances new connections across the replicas; an OpenEnv client
session is one WebSocket connection, which stays on the replica that accepted it for its whole
life, so every episode of a session is stepped where it was reset. (OpenEnv's stateless HTTP
``/reset`` and ``/step`` routes are balanced per request: use the WebSocket clients, as TRL's and
the other OpenEnv consumers' ``EnvClient`` do.) Each observation names the replica holding the
episode (``server``: host:pid).

``ray-knowsim env serve --replicas N`` deploys it (:func:`ray_knowsim.cli.env.replicas_app`: Ray
is the orchestration's to import); needs ``ray[serve]`` (the ``training`` extra).
"""

from __future__ import annotations

from typing import Any

from ray_knowsim.training.schema import EnvironmentConfig

#: the Serve application's name (``serve status``; ``serve.delete(APP_NAME)``)
APP_NAME = "knowsim-env"


class KnowSimReplica:
    """One replica: the environment and the OpenEnv app over it, built in the replica's process."""

    def __init__(self, config_json: str, max_sessions: int, pools: dict[str, Any] | None = None) -> None:
        from ray_knowsim.training.environment import TrainingEnvironment
        from ray_knowsim.training.threaded import EnvironmentThread

        self.max_sessions = max_sessions
        config = EnvironmentConfig.model_validate_json(config_json)
        # ``pools``: the driver's vLLM engine pools, shared by every replica (borrowed, not stopped here)
        self.shared = EnvironmentThread(factory=lambda: TrainingEnvironment.from_config(config, pools=pools))

    def __serve_build_asgi_app__(self) -> Any:
        from ray_knowsim.training.adapters.openenv import build_app

        return build_app(shared=self.shared, max_sessions=self.max_sessions)

    def __del__(self) -> None:
        shared = getattr(self, "shared", None)
        if shared is not None:
            shared.close()


__all__ = ["APP_NAME", "KnowSimReplica"]
