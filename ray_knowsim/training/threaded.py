"""The environment for synchronous callers: its event loop runs on a thread of its own.

Trainers (TRL's ``rollout_func``, a verifiers harness, an HTTP server's handlers) call
``reset``/``step`` from their own threads; every call is run on the one loop that owns the
episodes, so many callers' episodes still share the kernel's batched step and the models'
limiters, and a call blocks only its own caller.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, TypeVar

from ray_knowsim.training.environment import TrainingEnvironment
from ray_knowsim.training.schema import EnvironmentConfig, Observation

T = TypeVar("T")


class EnvironmentThread:
    """``with EnvironmentThread(config) as env: obs = env.reset(...); obs = env.step(id, text)``."""

    def __init__(self, config: EnvironmentConfig | None = None, *,
                 factory: Callable[[], TrainingEnvironment] | None = None, **fields: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="knowsim-training-env", daemon=True)
        self._thread.start()
        make = factory or (lambda: TrainingEnvironment.from_config(config, **fields))

        async def build() -> TrainingEnvironment:  # built on the loop: its models bind to it
            return make()

        self.env: TrainingEnvironment = self.call(build)

    def call(self, fn: Callable[[], Awaitable[T]], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(fn(), self._loop).result(timeout)

    def submit(self, fn: Callable[[], Awaitable[T]]) -> "asyncio.Future[T]":
        """Schedule without waiting (a concurrent.futures.Future)."""
        return asyncio.run_coroutine_threadsafe(fn(), self._loop)  # type: ignore[return-value]

    def reset(self, request: Any = None, **fields: Any) -> Observation:
        return self.call(lambda: self.env.reset(request, **fields))

    def step(self, episode_id: str, action: Any) -> Observation:
        return self.call(lambda: self.env.step(episode_id, action))

    def close_episode(self, episode_id: str) -> None:
        self.call(lambda: self.env.close(episode_id))

    def transcript(self, episode_id: str) -> list[list[str]]:
        async def read() -> list[list[str]]:
            return [list(t) for t in self.env.episode(episode_id).transcript]

        return self.call(read)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self.call(self.env.aclose, timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def __enter__(self) -> "EnvironmentThread":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["EnvironmentThread"]
