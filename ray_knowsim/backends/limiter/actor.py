"""The cluster-wide limiter: one named Ray actor per (endpoint, model, credential name) holding
the budget, and :class:`SharedLimiter`, the picklable handle given to models; in each worker
process (event loop) it keeps a local share (:class:`~.client.ShareClient`), so a request costs no
round trip unless the local share runs dry.

Shared on purpose: every run on the cluster that uses the endpoint with the same credential gets
the SAME actor (a fixed namespace, :data:`NAMESPACE`), so together the runs never exceed its
quota. Lifetime: the actor is detached (it outlives the run that created it) and lives while some
run holds a lease on it (:mod:`ray_knowsim.cluster.lease`): the driver of each run holds one
(:meth:`SharedLimiter.hold`, released when the run ends; a run that dies stops renewing and its
lease expires), and the actor ends itself once no lease is left for a grace period. It is placed
on the head node, which outlives the worker nodes. If it dies anyway, the next call re-creates it
under the same name (fresh, full budget) and logs a warning instead of failing every request.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Sequence

from ray_knowsim.cluster.lease import GRACE_S, LEASE_TTL_S, LeaseHolder, Leases
from ray_knowsim.backends.limiter.client import BudgetServer, PerLoopLimiter
from ray_knowsim.backends.limiter.local import LocalRateLimiter
from ray_knowsim.backends.limiter.service import BudgetService
from ray_knowsim.llm.limiter import RateLimiter, RateLimits

log = logging.getLogger(__name__)

NAMESPACE = "ray_knowsim"  # every run's limiters in one place: the same endpoint, the same actor
REAP_EVERY_S = 2.0
CREATE_ATTEMPTS = 20  # a limiter found while it ends itself: wait for it to go, then make a new one

_ACTOR_CLASS: Any = None


def _actor_class() -> Any:
    global _ACTOR_CLASS
    if _ACTOR_CLASS is not None:
        return _ACTOR_CLASS
    import ray

    class _LimiterActor:
        """Async actor around a :class:`BudgetService` (one event loop), with the leases of the
        runs that use it; a thread ends the actor once no lease is left for ``grace_s``."""

        def __init__(self, limits_dict: dict[str, Any], grace_s: float = GRACE_S) -> None:
            self._limits = RateLimits.model_validate(limits_dict)
            self._service = BudgetService(self._limits)
            self._leases = Leases(grace_s)
            self._lock = threading.Lock()
            self._ending = False
            self._reaper: threading.Thread | None = None

        def _start_reaper(self) -> None:
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, name="lease reaper", daemon=True)
                self._reaper.start()

        def _reap(self) -> None:
            me = ray.get_runtime_context().current_actor
            while True:
                time.sleep(REAP_EVERY_S)
                with self._lock:
                    if self._leases.finished():
                        self._ending = True
                if self._ending:
                    ray.kill(me, no_restart=True)  # nobody uses the budget any more
                    return

        async def limits(self) -> dict[str, Any]:
            self._start_reaper()
            return self._limits.model_dump()

        async def renew_lease(self, holder: str, ttl_s: float) -> bool:
            """False when the actor is ending (the caller makes a new one)."""
            self._start_reaper()
            with self._lock:
                if self._ending:
                    return False
                self._leases.renew(holder, ttl_s)
                return True

        async def release_lease(self, holder: str) -> None:
            with self._lock:
                self._leases.release(holder)

        async def leases(self) -> dict[str, Any]:
            with self._lock:
                return {"holders": self._leases.holders(), "expired": list(self._leases.expired)}

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
    """Client side of the cluster-wide limiter; picklable, so it can be handed to Ray workers
    (a lease taken with :meth:`hold` stays with the process that took it)."""

    def __init__(self, handle: Any, name: str, limits: RateLimits, namespace: str | None = NAMESPACE) -> None:
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

    def hold(self, label: str = "", *, ttl_s: float = LEASE_TTL_S) -> "LimiterLease":
        """Take a lease for this process (a run's driver, until the run ends): while any lease
        is held the actor lives. Renewed on a thread; a limiter lost meanwhile is found (or made)
        again under its name and the lease taken there."""
        import ray
        from ray.exceptions import RayActorError

        def renew(holder: str, ttl: float) -> None:
            for _ in range(CREATE_ATTEMPTS):
                generation = self._generation
                try:
                    if ray.get(self._handle.renew_lease.remote(holder, ttl), timeout=60):
                        return
                except RayActorError:
                    pass
                time.sleep(0.5)  # it is ending (or gone): a new one comes up under the name
                self._recreate(generation)  # the one re-creation path, shared with the requests' calls
            raise RuntimeError(f"rate limiter {self.name!r}: no live actor to hold a lease on")

        def release(holder: str) -> None:
            if ray.is_initialized():
                ray.get(self._handle.release_lease.remote(holder), timeout=30)

        return LimiterLease(self, LeaseHolder(renew, release, label=label, ttl_s=ttl_s))

    def leases(self) -> dict[str, Any]:
        """Who holds leases now (blocking; tests and diagnostics)."""
        import ray

        return ray.get(self._handle.leases.remote())


class LimiterLease:
    """A run's hold on a shared limiter; :meth:`shutdown` (the run ended) lets go, which ends the
    actor only when no other run holds it. Kept with the driver's engine pools, which are shut
    down however the run ends."""

    def __init__(self, limiter: SharedLimiter, holder: LeaseHolder) -> None:
        self.limiter = limiter
        self._holder = holder

    @property
    def holder(self) -> str:
        return self._holder.holder

    def shutdown(self) -> dict[str, Any]:
        self._holder.release()
        return {"released": True, "limiter": self.limiter.name}


def get_or_create_limiter(
    name: str, limits: RateLimits, *, namespace: str | None = NAMESPACE, detached: bool = True,
    create: bool = True, grace_s: float = GRACE_S,
) -> SharedLimiter:
    """The cluster-wide limiter called ``name``: created by the first caller, found by every other
    (every run on the cluster: the namespace is fixed).

    Detached (the default), it outlives its creator and ends itself once no lease is held for
    ``grace_s``: a run's driver calls :meth:`SharedLimiter.hold` and lets go when the run ends.
    Not detached, it dies with its creator. ``create=False`` only looks it up (LookupError when
    absent). Raises if Ray is not initialised, or if a limiter of that name exists with other
    limits (two configs for one endpoint would otherwise silently share one budget). Blocking; from
    async code use a thread.
    """
    import ray
    from ray.exceptions import RayActorError

    from ray_knowsim.cluster.node_loss import on_head_node

    if not ray.is_initialized():
        raise RuntimeError("get_or_create_limiter needs an initialised Ray; without Ray use LocalRateLimiter")
    for attempt in range(CREATE_ATTEMPTS):
        if create:
            options: dict[str, Any] = {
                "name": name,
                "get_if_exists": True,
                "num_cpus": 0,  # bookkeeping only: never take a CPU slot from the shards
                "max_concurrency": 10_000,
                "max_restarts": -1,
                **on_head_node(),  # it holds every run's slots: not on a node that may go away
            }
            if namespace is not None:
                options["namespace"] = namespace
            if detached:
                options["lifetime"] = "detached"
            handle = _actor_class().options(**options).remote(limits.model_dump(), grace_s)
        else:
            try:
                handle = ray.get_actor(name, namespace=namespace)
            except ValueError:
                raise LookupError(f"no rate limiter named {name!r} in namespace {namespace!r}") from None
        try:
            existing = RateLimits.model_validate(ray.get(handle.limits.remote()))
            break
        except RayActorError:
            if attempt == CREATE_ATTEMPTS - 1 or not create:
                raise
            time.sleep(0.5)  # found while it ended itself: its name frees up in a moment
    if existing.budget() != limits.budget():
        raise ValueError(
            f"rate limiter {name!r} already exists with limits {existing.model_dump()}, "
            f"not the requested {limits.model_dump()} (another run on this cluster uses the same endpoint "
            "and credential with other limits: give both the same limits, or let the other run finish)"
        )
    return SharedLimiter(handle, name, limits, namespace)


def make_limiter(name: str, limits: RateLimits) -> RateLimiter | None:
    """The limiter for a run: the cluster-wide actor when Ray is up (take a lease with
    :meth:`SharedLimiter.hold` for as long as the run uses it), else an in-process one; None when
    ``limits`` limit nothing."""
    if not limits.enabled:
        return None
    import sys

    ray = sys.modules.get("ray")  # not imported means not initialised: do not import it here
    if ray is None or not ray.is_initialized():
        return LocalRateLimiter(limits)
    return get_or_create_limiter(name, limits)


def create_shared_limiter(config: Any) -> RateLimiter | None:
    """The cluster-wide limiter for an :class:`~ray_knowsim.llm.http.config.HTTPModelConfig`: call
    it in the Ray driver before starting shards, hold a lease on it until the run ends
    (``limiter.hold()``), and pass it to the models (``OpenAICompatibleModel(config, limiter=...)``).
    None without rate limits."""
    return make_limiter(config.limiter_name, config.rate_limits())


__all__ = ["LimiterLease", "NAMESPACE", "SharedLimiter", "create_shared_limiter", "get_or_create_limiter", "make_limiter"]
