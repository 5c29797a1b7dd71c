"""The run-wide limiter: one named Ray actor per (endpoint, model) holding the budget, and
:class:`SharedLimiter`, the picklable handle given to models; in each worker process (event loop)
it keeps a local share (:class:`~.client.ShareClient`), so a request costs no round trip unless
the local share runs dry.

Lifetime: the driver creates the actor (``create_shared_limiter`` / ``get_or_create_limiter``)
before starting shards and holds it until the run ends. If it dies anyway, the next call re-creates
it under the same name (fresh, full budget) and logs a warning instead of failing every request.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Sequence

from ray_knowsim.engine.limiter.client import BudgetServer, PerLoopLimiter
from ray_knowsim.engine.limiter.local import LocalRateLimiter
from ray_knowsim.engine.limiter.service import BudgetService
from ray_knowsim.llm.limiter import RateLimiter, RateLimits

log = logging.getLogger(__name__)

_ACTOR_CLASS: Any = None


def _actor_class() -> Any:
    global _ACTOR_CLASS
    if _ACTOR_CLASS is not None:
        return _ACTOR_CLASS
    import ray

    class _LimiterActor:
        """Async actor around a :class:`BudgetService` (one event loop)."""

        def __init__(self, limits_dict: dict[str, Any]) -> None:
            self._limits = RateLimits.model_validate(limits_dict)
            self._service = BudgetService(self._limits)

        async def limits(self) -> dict[str, Any]:
            return self._limits.model_dump()

        async def request(self, client: str, demand: int, held: int, wait_s: float) -> tuple[int, int]:
            return await self._service.request(client, demand, held, wait_s)

        async def reserve(self, client: str, tokens: list[int]) -> list[float]:
            return self._service.reserve(client, tokens)

        async def give_back(self, client: str, n: int, demand: int | None = None) -> None:
            self._service.give_back(client, n, demand)

        async def set_demand(self, client: str, demand: int) -> None:
            self._service.set_demand(client, demand)

        async def forget(self, client: str) -> None:
            self._service.forget(client)

        async def settle(self, extra_tokens: int) -> None:
            self._service.settle(extra_tokens)

        async def unreserve(self, requests: int, tokens: int) -> None:
            self._service.unreserve(requests, tokens)

        async def pause(self, seconds: float) -> None:
            self._service.pause(seconds)

        async def stats(self) -> dict[str, Any]:
            return self._service.stats()

    _ACTOR_CLASS = ray.remote(_LimiterActor)
    return _ACTOR_CLASS


class _ActorServer:
    """The actor as a :class:`BudgetServer`: waited calls are awaited, the rest fire and forget."""

    def __init__(self, owner: "SharedLimiter") -> None:
        self._owner = owner

    async def request(self, client: str, demand: int, held: int, wait_s: float) -> tuple[int, int]:
        return tuple(await self._owner._call("request", client, demand, held, wait_s))  # type: ignore[return-value]

    async def reserve(self, client: str, tokens: Sequence[int]) -> list[float]:
        return await self._owner._call("reserve", client, list(tokens))

    def _send(self, method: str, *args: Any) -> None:
        getattr(self._owner._handle, method).remote(*args)  # fire and forget

    def give_back(self, client: str, n: int, demand: int | None = None) -> None:
        self._send("give_back", client, n, demand)

    def set_demand(self, client: str, demand: int) -> None:
        self._send("set_demand", client, demand)

    def forget(self, client: str) -> None:
        self._send("forget", client)

    def settle(self, extra_tokens: int) -> None:
        self._send("settle", extra_tokens)

    def unreserve(self, requests: int, tokens: int) -> None:
        self._send("unreserve", requests, tokens)

    def pause(self, seconds: float) -> None:
        self._send("pause", seconds)


class SharedLimiter(PerLoopLimiter):
    """Client side of the run-wide limiter; picklable, so it can be handed to Ray workers."""

    def __init__(self, handle: Any, name: str, limits: RateLimits, namespace: str | None = None) -> None:
        super().__init__(limits)
        self._handle = handle
        self.name = name
        self.namespace = namespace
        self._generation = 0
        self._recreate_lock = threading.Lock()
        self._actor_server = _ActorServer(self)

    def _server(self) -> BudgetServer:
        return self._actor_server

    def __repr__(self) -> str:
        return f"SharedLimiter(name={self.name!r}, {self.limits!r})"

    def __reduce__(self):
        return (SharedLimiter, (self._handle, self.name, self.limits, self.namespace))

    async def _call(self, method: str, *args: Any) -> Any:
        from ray.exceptions import ActorDiedError

        generation = self._generation
        try:
            return await getattr(self._handle, method).remote(*args)
        except ActorDiedError:
            await asyncio.to_thread(self._recreate, generation)
            return await getattr(self._handle, method).remote(*args)

    def _recreate(self, generation: int) -> None:
        with self._recreate_lock:  # one re-creation, however many calls saw the death
            if self._generation != generation:
                return
            log.warning("rate limiter %r died (its creator exited or let go); re-creating it", self.name)
            fresh = get_or_create_limiter(self.name, self.limits, namespace=self.namespace)
            self._handle = fresh._handle
            self._generation += 1

    async def stats(self) -> dict[str, Any]:
        return await self._call("stats")


def get_or_create_limiter(
    name: str, limits: RateLimits, *, namespace: str | None = None, detached: bool = False,
    create: bool = True,
) -> SharedLimiter:
    """The run-wide limiter called ``name``: created by the first caller, found by every other.

    The creating process owns the actor; unless ``detached`` it dies when its creator exits or drops
    every handle, so call this in the driver before starting the workers and keep the result until
    the run ends. ``create=False`` only looks it up (LookupError when absent). Raises if Ray is not
    initialised, or if a limiter of that name exists with other limits (two configs for one
    endpoint would otherwise silently share one budget). Blocking; from async code use a thread.
    """
    import ray

    if not ray.is_initialized():
        raise RuntimeError("get_or_create_limiter needs an initialised Ray; without Ray use LocalRateLimiter")
    if create:
        options: dict[str, Any] = {
            "name": name,
            "get_if_exists": True,
            "num_cpus": 0,  # bookkeeping only: never take a CPU slot from the shards
            "max_concurrency": 10_000,
            "max_restarts": -1,
        }
        if namespace is not None:
            options["namespace"] = namespace
        if detached:
            options["lifetime"] = "detached"
        handle = _actor_class().options(**options).remote(limits.model_dump())
    else:
        try:
            handle = ray.get_actor(name, namespace=namespace)
        except ValueError:
            raise LookupError(f"no rate limiter named {name!r} in this Ray namespace") from None
    existing = RateLimits.model_validate(ray.get(handle.limits.remote()))
    if existing.budget() != limits.budget():
        raise ValueError(
            f"rate limiter {name!r} already exists with limits {existing.model_dump()}, "
            f"not the requested {limits.model_dump()}"
        )
    return SharedLimiter(handle, name, limits, namespace)


def make_limiter(name: str, limits: RateLimits) -> RateLimiter | None:
    """The limiter for a run: the run-wide actor when Ray is up (created here, so call it in the
    driver and keep the result), else an in-process one; None when ``limits`` limit nothing."""
    if not limits.enabled:
        return None
    import sys

    ray = sys.modules.get("ray")  # not imported means not initialised: do not import it here
    if ray is None or not ray.is_initialized():
        return LocalRateLimiter(limits)
    return get_or_create_limiter(name, limits)


def create_shared_limiter(config: Any) -> RateLimiter | None:
    """The run-wide limiter for an :class:`~ray_knowsim.llm.http.config.HTTPModelConfig`: call it
    in the Ray driver before starting shards, keep the result until the run ends, and pass it to
    the models (``OpenAICompatibleModel(config, limiter=...)``). None without rate limits."""
    return make_limiter(config.limiter_name, config.rate_limits())


__all__ = ["SharedLimiter", "create_shared_limiter", "get_or_create_limiter", "make_limiter"]
