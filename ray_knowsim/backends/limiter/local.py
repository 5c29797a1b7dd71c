"""The budget in this process: :class:`LocalRateLimiter` for runs without Ray and for tests. It
uses the same share clients as the run-wide limiter, over an in-process :class:`BudgetService`."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Sequence

from ray_knowsim.backends.limiter.budget import Clock
from ray_knowsim.backends.limiter.client import BudgetServer, PerLoopLimiter, Sleep
from ray_knowsim.backends.limiter.service import BudgetService
from ray_knowsim.llm.limiter import RateLimits


class _InProcessServer:
    """A :class:`BudgetService` in this process as a :class:`BudgetServer`."""

    def __init__(self, service: BudgetService) -> None:
        self.service = service

    async def request(self, client: str, demand: int, held: int, wait_s: float) -> tuple[int, int]:
        return await self.service.request(client, demand, held, wait_s)

    async def reserve(self, client: str, tokens: Sequence[int]) -> list[float]:
        return self.service.reserve(client, tokens)

    def __getattr__(self, name: str) -> Any:  # give_back, set_demand, forget, settle, unreserve, pause
        return getattr(self.service, name)


class LocalRateLimiter(PerLoopLimiter):
    """The budget in this process (runs without Ray, tests). Several event loops of this process
    share it; it cannot be sent to another process (each copy would keep its own budget)."""

    def __init__(self, limits: RateLimits, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        super().__init__(limits, clock, sleep)
        self.service = BudgetService(limits, clock)
        self._in_process = _InProcessServer(self.service)

    def _server(self) -> BudgetServer:
        return self._in_process

    def __repr__(self) -> str:
        return f"LocalRateLimiter({self.limits!r})"

    def __reduce__(self):
        raise TypeError(
            "LocalRateLimiter cannot be sent to another process (each copy would keep its own "
            "budget); share a limiter across Ray workers with "
            "ray_knowsim.backends.limiter.get_or_create_limiter()"
        )

    @property
    def in_flight(self) -> int:
        """Slots in use by requests of every loop of this process."""
        return sum(c.in_use for c in list(self._clients.values()))

    def stats(self) -> dict[str, Any]:
        return self.service.stats()


__all__ = ["LocalRateLimiter"]
