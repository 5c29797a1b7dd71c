"""Request-rate, token-rate and concurrency limits for one model endpoint.

A provider's limits are per account, so every worker of a run must draw from ONE budget. The
shared variant is a named Ray actor (``get_or_create_limiter``); ``LocalRateLimiter`` is the same
thing in-process for runs without Ray. Both speak the same protocol:

    grant = await limiter.acquire(tokens=estimate)   # sleeps until the request may go out
    ...send the request...
    await limiter.release(grant, tokens_used=usage.total)

The actor never sleeps on a caller's behalf: it *reserves* capacity and answers with a wait time
(one round trip per request); the caller sleeps. Only a full ``max_in_flight`` makes the actor hold
a call until a slot frees.

Bucket semantics: a bucket of capacity ``burst`` refills at ``(limit - burst) / 60`` per second, so
any window of W seconds admits at most ``burst + rate * W`` units, and any 60-second window at most
``limit``. A single reservation larger than the burst is allowed (it waits for the debt to be
repaid), which is how one long prompt can still pass a small token bucket.

Ray is imported lazily (only the shared variant needs it), keeping this layer importable without it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

log = logging.getLogger(__name__)

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[Any]]

# How often a caller blocked on max_in_flight re-checks when no release reaches it (a release from
# another thread or event loop, or a lease that expires because its holder died).
_SLOT_POLL_S = 0.25


class RateLimits(BaseModel):
    """Limits of one endpoint. ``None`` means "no limit of that kind"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_minute: float | None = Field(None, gt=0)
    tokens_per_minute: float | None = Field(None, gt=0)
    max_in_flight: int | None = Field(None, ge=1)
    # Bucket capacities; default one second's worth (at least 1 request), at most half the limit.
    request_burst: float | None = Field(None, gt=0)
    token_burst: float | None = Field(None, gt=0)
    # A grant not released within this long after its start is presumed dead (its worker crashed)
    # and its in-flight slot is reclaimed.
    lease_timeout_s: float = Field(600.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> "RateLimits":
        for limit_name, burst_name in (
            ("requests_per_minute", "request_burst"),
            ("tokens_per_minute", "token_burst"),
        ):
            limit, burst = getattr(self, limit_name), getattr(self, burst_name)
            if burst is not None and limit is None:
                raise ValueError(f"{burst_name} is set but {limit_name} is not")
            if burst is not None and burst >= limit:
                raise ValueError(f"{burst_name} ({burst}) must be below {limit_name} ({limit})")
        return self

    def budget(self) -> dict[str, Any]:
        """The limits proper; the lease timeout (crash recovery only) may differ between users."""
        return self.model_dump(exclude={"lease_timeout_s"})

    @property
    def enabled(self) -> bool:
        return any(
            v is not None for v in (self.requests_per_minute, self.tokens_per_minute, self.max_in_flight)
        )


def default_burst(limit_per_minute: float) -> float:
    """One second's worth, at least one unit, never more than half the per-minute limit."""
    return min(max(1.0, limit_per_minute / 60.0), limit_per_minute / 2.0)


class TokenBucket:
    """A bucket that may go into debt: ``reserve`` always succeeds and says how long to wait."""

    def __init__(self, limit_per_minute: float, burst: float | None, now: float) -> None:
        self.capacity = default_burst(limit_per_minute) if burst is None else float(burst)
        if not 0 < self.capacity < limit_per_minute:
            raise ValueError(f"burst {self.capacity} must be in (0, {limit_per_minute})")
        self.rate = (limit_per_minute - self.capacity) / 60.0  # units per second
        self.level = self.capacity
        self._t = now

    def _refill(self, now: float) -> None:
        if now > self._t:
            self.level = min(self.capacity, self.level + self.rate * (now - self._t))
            self._t = now

    def reserve(self, amount: float, now: float) -> float:
        """Take ``amount`` now; return the seconds until the bucket has paid for it."""
        self._refill(now)
        self.level -= amount
        return 0.0 if self.level >= 0 else -self.level / self.rate

    def refund(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level = min(self.capacity, self.level + amount)

    def block_for(self, seconds: float, now: float) -> None:
        """Grant nothing new for ``seconds`` (a provider said 429: everyone backs off)."""
        self._refill(now)
        self.level = min(self.level, -self.rate * seconds)


@dataclass(frozen=True)
class Grant:
    """Permission to send one request. ``ready_at`` is on the limiter's clock."""

    lease_id: int
    wait_s: float
    ready_at: float
    tokens: int
    tracked: bool  # False: nothing to release (no token or in-flight limit)


class RateLimiter(Protocol):
    limits: RateLimits

    async def acquire(self, tokens: int = 0) -> Grant: ...

    async def release(self, grant: Grant, tokens_used: int | None = None) -> None: ...

    async def pause(self, seconds: float) -> None: ...


class LimiterCore:
    """The bookkeeping shared by both variants; synchronous, no I/O, clock injected."""

    def __init__(self, limits: RateLimits, clock: Clock = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        now = clock()
        self._requests = (
            TokenBucket(limits.requests_per_minute, limits.request_burst, now)
            if limits.requests_per_minute is not None
            else None
        )
        self._tokens = (
            TokenBucket(limits.tokens_per_minute, limits.token_burst, now)
            if limits.tokens_per_minute is not None
            else None
        )
        self._leases: dict[int, tuple[int, float]] = {}  # id -> (reserved tokens, expires at)
        self._ids = itertools.count(1)
        self.granted = 0

    @property
    def in_flight(self) -> int:
        return len(self._leases)

    def _purge(self, now: float) -> None:
        dead = [k for k, (_, exp) in self._leases.items() if exp <= now]
        for k in dead:
            del self._leases[k]

    def has_slot(self) -> bool:
        if self.limits.max_in_flight is None:
            return True
        self._purge(self._clock())
        return len(self._leases) < self.limits.max_in_flight

    def next_expiry_in(self) -> float | None:
        if not self._leases:
            return None
        return max(0.0, min(exp for _, exp in self._leases.values()) - self._clock())

    def grant(self, tokens: int = 0) -> Grant:
        """Reserve one request and ``tokens`` tokens; the caller checked ``has_slot`` first."""
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        now = self._clock()
        wait = 0.0
        if self._requests is not None:
            wait = max(wait, self._requests.reserve(1.0, now))
        if self._tokens is not None and tokens:
            wait = max(wait, self._tokens.reserve(float(tokens), now))
        lease_id = next(self._ids)
        tracked = self._tokens is not None or self.limits.max_in_flight is not None
        if tracked:
            self._leases[lease_id] = (tokens, now + wait + self.limits.lease_timeout_s)
        self.granted += 1
        return Grant(lease_id=lease_id, wait_s=wait, ready_at=now + wait, tokens=tokens, tracked=tracked)

    def release(self, lease_id: int, tokens_used: int | None = None) -> None:
        """End a lease; settle the token bucket with what the call really used (if known)."""
        entry = self._leases.pop(lease_id, None)
        if entry is None or self._tokens is None or tokens_used is None:
            return
        reserved = entry[0]
        now = self._clock()
        if tokens_used < reserved:
            self._tokens.refund(float(reserved - tokens_used), now)
        elif tokens_used > reserved:
            self._tokens.reserve(float(tokens_used - reserved), now)

    def pause(self, seconds: float) -> None:
        if seconds <= 0:
            return
        now = self._clock()
        for bucket in (self._requests, self._tokens):
            if bucket is not None:
                bucket.block_for(seconds, now)


class LocalRateLimiter:
    """In-process limiter for runs without Ray (or for one process's own use)."""

    def __init__(self, limits: RateLimits, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep):
        self.limits = limits
        self._core = LimiterCore(limits, clock)
        self._sleep = sleep
        self._lock = threading.Lock()
        self._conditions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Condition] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"LocalRateLimiter({self.limits!r})"

    def __reduce__(self):
        raise TypeError(
            "LocalRateLimiter cannot be sent to another process (each copy would keep its own "
            "budget); share a limiter across Ray workers with get_or_create_limiter()"
        )

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._core.in_flight

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        cond = self._conditions.get(loop)
        if cond is None:
            cond = self._conditions[loop] = asyncio.Condition()
        return cond

    async def reserve(self, tokens: int = 0) -> Grant:
        """Wait for an in-flight slot (if limited), reserve rate capacity, do not sleep."""
        cond = self._condition()
        while True:
            with self._lock:
                if self._core.has_slot():
                    return self._core.grant(tokens)
                expiry = self._core.next_expiry_in()
            timeout = _SLOT_POLL_S if expiry is None else min(_SLOT_POLL_S, expiry + 1e-3)
            async with cond:
                try:
                    await asyncio.wait_for(cond.wait(), timeout)
                except asyncio.TimeoutError:
                    pass

    async def acquire(self, tokens: int = 0) -> Grant:
        grant = await self.reserve(tokens)
        if grant.wait_s > 0:
            try:
                await self._sleep(grant.wait_s)
            except BaseException:
                await self.release(grant)  # cancelled while waiting: free the slot
                raise
        return grant

    async def release(self, grant: Grant, tokens_used: int | None = None) -> None:
        if not grant.tracked:
            return
        with self._lock:
            self._core.release(grant.lease_id, tokens_used)
        cond = self._condition()
        async with cond:
            cond.notify_all()

    async def pause(self, seconds: float) -> None:
        with self._lock:
            self._core.pause(seconds)


# ---------------------------------------------------------------------------------------------
# Shared variant: a named Ray actor.

_ACTOR_CLASS: Any = None


def _actor_class() -> Any:
    """Build the Ray actor class on first use so that importing this module needs no Ray."""
    global _ACTOR_CLASS
    if _ACTOR_CLASS is not None:
        return _ACTOR_CLASS
    import ray

    class _RateLimiterActor:
        """Async actor: one event loop, so the core needs no lock."""

        def __init__(self, limits_dict: dict[str, Any]) -> None:
            self._limits = RateLimits.model_validate(limits_dict)
            self._core = LimiterCore(self._limits)
            self._cond: asyncio.Condition | None = None

        def _condition(self) -> asyncio.Condition:
            if self._cond is None:
                self._cond = asyncio.Condition()
            return self._cond

        async def limits(self) -> dict[str, Any]:
            return self._limits.model_dump()

        async def reserve(self, tokens: int = 0) -> Grant:
            cond = self._condition()
            while not self._core.has_slot():
                expiry = self._core.next_expiry_in()
                timeout = _SLOT_POLL_S if expiry is None else min(_SLOT_POLL_S, expiry + 1e-3)
                async with cond:
                    try:
                        await asyncio.wait_for(cond.wait(), timeout)
                    except asyncio.TimeoutError:
                        pass
            return self._core.grant(tokens)

        async def release(self, lease_id: int, tokens_used: int | None = None) -> None:
            self._core.release(lease_id, tokens_used)
            cond = self._condition()
            async with cond:
                cond.notify_all()

        async def pause(self, seconds: float) -> None:
            self._core.pause(seconds)

        async def stats(self) -> dict[str, Any]:
            return {"granted": self._core.granted, "in_flight": self._core.in_flight}

    _ACTOR_CLASS = ray.remote(_RateLimiterActor)
    return _ACTOR_CLASS


class RayRateLimiter:
    """Client side of the shared limiter; picklable, so it can be handed to Ray workers.

    The actor lives as long as its creator holds it (see ``get_or_create_limiter``). If it died
    anyway, the next call re-creates it under the same name (with a fresh, full bucket) and logs
    a warning, instead of failing every request of the run.
    """

    def __init__(
        self, handle: Any, name: str, limits: RateLimits, namespace: str | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._handle = handle
        self.name = name
        self.limits = limits
        self.namespace = namespace
        self._sleep = sleep
        self._generation = 0
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"RayRateLimiter(name={self.name!r}, {self.limits!r})"

    def __reduce__(self):
        return (RayRateLimiter, (self._handle, self.name, self.limits, self.namespace))

    async def _call(self, method: str, *args: Any) -> Any:
        from ray.exceptions import ActorDiedError

        generation = self._generation
        try:
            return await getattr(self._handle, method).remote(*args)
        except ActorDiedError:
            loop = asyncio.get_running_loop()
            lock = self._locks.get(loop)
            if lock is None:
                lock = self._locks[loop] = asyncio.Lock()
            async with lock:  # one re-creation, however many calls saw the death
                if self._generation == generation:
                    log.warning("rate limiter %r died (its creator exited or let go); re-creating it", self.name)
                    fresh = await asyncio.to_thread(
                        get_or_create_limiter, self.name, self.limits, namespace=self.namespace
                    )
                    self._handle = fresh._handle
                    self._generation += 1
            return await getattr(self._handle, method).remote(*args)

    async def reserve(self, tokens: int = 0) -> Grant:
        return await self._call("reserve", tokens)

    async def acquire(self, tokens: int = 0) -> Grant:
        grant = await self.reserve(tokens)
        if grant.wait_s > 0:
            try:
                await self._sleep(grant.wait_s)
            except BaseException:
                if grant.tracked:
                    self._handle.release.remote(grant.lease_id, None)
                raise
        return grant

    async def release(self, grant: Grant, tokens_used: int | None = None) -> None:
        if grant.tracked:
            await self._call("release", grant.lease_id, tokens_used)

    async def pause(self, seconds: float) -> None:
        await self._call("pause", seconds)

    async def stats(self) -> dict[str, Any]:
        return await self._call("stats")


def get_or_create_limiter(
    name: str, limits: RateLimits, *, namespace: str | None = None, detached: bool = False,
    create: bool = True,
) -> RayRateLimiter:
    """The run-wide limiter called ``name``: created by the first caller, found by every other.

    Lifetime: the creating process owns the actor; unless ``detached`` it dies when its creator
    exits or drops every handle. So call this in the driver before starting the workers and keep
    the returned object until the run ends. ``create=False`` only looks it up (LookupError when
    absent). Raises if Ray is not initialised, or if a limiter of that name exists with other
    limits (two configs for one endpoint would otherwise silently share one budget).
    Blocking (Ray calls); from async code run it in a thread.
    """
    import ray

    if not ray.is_initialized():
        raise RuntimeError(
            "get_or_create_limiter needs an initialised Ray; without Ray use LocalRateLimiter"
        )
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
    return RayRateLimiter(handle, name, limits, namespace)


def make_limiter(name: str, limits: RateLimits) -> RateLimiter | None:
    """The right limiter for this process: the shared one (Ray actor) when Ray is up, else a
    local one; None when ``limits`` limit nothing. Blocking when Ray is up."""
    if not limits.enabled:
        return None
    import sys

    ray = sys.modules.get("ray")  # not imported means not initialised: do not import it here
    if ray is None or not ray.is_initialized():
        return LocalRateLimiter(limits)
    try:
        return get_or_create_limiter(name, limits, create=False)
    except LookupError:
        log.warning(
            "rate limiter %r did not exist, so this process creates it; it lives only as long as "
            "this process holds it: create it in the driver first (create_shared_limiter)", name,
        )
        return get_or_create_limiter(name, limits)
