"""The environment as an OpenEnv environment server (``openenv-core``; ``ray-knowsim env serve``).

OpenEnv gives every client session (one WebSocket connection) its own ``Environment`` instance
from a factory; here every instance is a thin handle on ONE shared :class:`EnvironmentThread`,
so all sessions' episodes run on one event loop and share the models' limiters and the kernel's
batched step (``SUPPORTS_CONCURRENT_SESSIONS``). ``reset(seed, episode_id, task=..., item_id=...,
level=..., simulator=...)`` starts an episode; ``step(TutorTurn(message=...))`` is one tutor turn.
The observation's ``reward`` is the turn's knowledge gain (None: unscored), ``rewards`` the named
components, ``episode_metadata`` (also ``metadata`` in process: OpenEnv's wire format drops that)
the per-IU states and signals, simulator, rules and seeds. The async
variants are the ones the server calls, so a slow simulator blocks no server thread.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any, Callable, Optional

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from ray_knowsim.training.errors import TrainingEnvError
from ray_knowsim.training.schema import EnvironmentConfig
from ray_knowsim.training.schema import Observation as KnowSimObservation
from ray_knowsim.training.threaded import EnvironmentThread


class TutorTurn(Action):
    """The policy's tutor message."""

    message: str = Field(description="the tutor's reply to the learner's last message")


class LearnerObservation(Observation):
    """What the learner did after the tutor's turn (``reward``: the turn's knowledge gain)."""

    episode_id: str = ""
    turn: int = 0
    learner_message: Optional[str] = None
    prompt_messages: list[dict[str, str]] = Field(default_factory=list)
    rewards: dict[str, Any] = Field(default_factory=dict)
    # OpenEnv's wire format drops ``metadata``; the same facts travel here
    episode_metadata: dict[str, Any] = Field(default_factory=dict)
    server: str = ""  # host:pid of the server process that holds the episode (a Serve replica)


def to_openenv(obs: KnowSimObservation) -> LearnerObservation:
    metadata = obs.metadata.model_dump(mode="json")
    return LearnerObservation(
        done=obs.done, reward=obs.reward, metadata=metadata, episode_metadata=metadata, episode_id=obs.episode_id,
        turn=obs.turn, learner_message=obs.learner_message, prompt_messages=obs.prompt_messages,
        rewards=obs.rewards.model_dump(mode="json"), server=server_identity(),
    )  # fmt: skip


def server_identity() -> str:
    """Which server process answers (host:pid): with several replicas, the one holding the episode."""
    return f"{socket.gethostname()}:{os.getpid()}"


class KnowSimEnvironment(Environment[TutorTurn, LearnerObservation, State]):
    """One OpenEnv session: at most one episode at a time, on the shared environment."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, shared: EnvironmentThread) -> None:
        super().__init__()
        self.shared = shared
        self._episode: str | None = None
        self._turn = 0

    def _reset_call(self, seed: Optional[int], episode_id: Optional[str], kwargs: dict[str, Any]) -> Callable:
        fields = dict(kwargs)
        if seed is not None:
            fields["seed"] = seed
        if episode_id is not None:
            fields["episode_id"] = episode_id
        previous, self._episode = self._episode, None

        async def call() -> KnowSimObservation:
            if previous is not None:  # a new reset ends the session's previous episode
                try:
                    await self.shared.env.close(previous)
                except TrainingEnvError:
                    pass
            return await self.shared.env.reset(None, **fields)

        return call

    def _done(self, obs: KnowSimObservation) -> LearnerObservation:
        self._episode, self._turn = obs.episode_id, obs.turn
        return to_openenv(obs)

    def _step_call(self, action: TutorTurn) -> Callable:
        episode = self._episode
        if episode is None:
            raise ValueError("episode_missing: reset before step")
        message = action.message if isinstance(action, TutorTurn) else action

        async def call() -> KnowSimObservation:
            return await self.shared.env.step(episode, message)

        return call

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> LearnerObservation:
        return self._done(_named(lambda: self.shared.call(self._reset_call(seed, episode_id, kwargs))))

    async def reset_async(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
                          **kwargs: Any) -> LearnerObservation:
        call = self._reset_call(seed, episode_id, kwargs)
        return self._done(await _named_async(asyncio.wrap_future(self.shared.submit(call))))

    def step(self, action: TutorTurn, timeout_s: Optional[float] = None, **kwargs: Any) -> LearnerObservation:
        return self._done(_named(lambda: self.shared.call(self._step_call(action), timeout=timeout_s)))

    async def step_async(self, action: TutorTurn, timeout_s: Optional[float] = None, **kwargs: Any) -> LearnerObservation:
        call = self._step_call(action)
        return self._done(await _named_async(asyncio.wrap_future(self.shared.submit(call))))

    @property
    def state(self) -> State:
        return State(episode_id=self._episode, step_count=self._turn)

    def close(self) -> None:
        episode, self._episode = self._episode, None
        if episode is not None and not self.shared._loop.is_closed():
            try:
                self.shared.close_episode(episode)
            except TrainingEnvError:
                pass


def _named(fn: Callable[[], KnowSimObservation]) -> KnowSimObservation:
    try:
        return fn()
    except TrainingEnvError as exc:  # the client sees "<code>: <why>"
        raise ValueError(f"{exc.code}: {exc}") from None


async def _named_async(future: Any) -> KnowSimObservation:
    try:
        return await future
    except TrainingEnvError as exc:
        raise ValueError(f"{exc.code}: {exc}") from None


def build_app(config: EnvironmentConfig | None = None, *, shared: EnvironmentThread | None = None,
              max_sessions: int = 64) -> Any:
    """The OpenEnv FastAPI app (HTTP + WebSocket routes of ``openenv-core``) over one shared environment."""
    from openenv.core.env_server.http_server import create_fastapi_app

    shared = shared or EnvironmentThread(config or EnvironmentConfig())
    app = create_fastapi_app(lambda: KnowSimEnvironment(shared), TutorTurn, LearnerObservation,
                             max_concurrent_envs=max_sessions)
    app.state.knowsim = shared
    return app


__all__ = ["KnowSimEnvironment", "LearnerObservation", "TutorTurn", "build_app", "server_identity", "to_openenv"]
