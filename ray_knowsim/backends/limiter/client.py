"""The per-process side of a limiter: a local share of the run-wide budget.

A :class:`ShareClient` (one per event loop) holds some in-flight slots of the run-wide budget and
hands them to its own requests with no round trip: a request takes a free held slot at once, or
queues (FIFO; a released slot wakes exactly one waiter). A background task asks the budget for
more when the queue outgrows what is held (one outstanding long-poll, which doubles as the
heartbeat that keeps the share alive) and gives back slots nobody here needs, so that other
workers get their fair share (slots within its share that fall idle are kept for ``linger_s``
first: a lockstep shard's next round usually starts at once). Release never waits: give-backs and token settlements go out fire
and forget, coalesced once per loop iteration. Rate reservations of all requests queued in the
same loop iteration travel in one call.

The budget may be in this process (:class:`~.local.LocalRateLimiter`) or a Ray actor
(:class:`ray_knowsim.backends.limiter.actor.SharedLimiter`); both speak :class:`BudgetServer`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections import deque
from typing import Any, Awaitable, Callable, Protocol, Sequence

from ray_knowsim.backends.limiter.budget import Clock
from ray_knowsim.llm.limiter import Grant, RateLimits

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[Any]]


class LimiterUnavailable(RuntimeError):
    """The run-wide budget could not be reached."""


class BudgetServer(Protocol):
    """What a client needs from the budget; methods without ``async`` must not wait."""

    async def request(self, client: str, demand: int, held: int, wait_s: float) -> tuple[int, int]: ...

    async def reserve(self, client: str, tokens: Sequence[int]) -> list[float]: ...

    def give_back(self, client: str, n: int, demand: int | None = None) -> None: ...

    def set_demand(self, client: str, demand: int) -> None: ...

    def forget(self, client: str) -> None: ...

    def settle(self, extra_tokens: int) -> None: ...

    def unreserve(self, requests: int, tokens: int) -> None: ...

    def pause(self, seconds: float) -> None: ...


def heartbeat_s(limits: RateLimits) -> float:
    """How long a client's poll may wait: well inside the lease, at most a second."""
    return min(1.0, limits.lease_timeout_s / 4.0)


class ShareClient:
    """One event loop's share of the budget; use it only from that loop."""

    def __init__(self, server: BudgetServer, limits: RateLimits, *, clock: Clock = time.monotonic,
                 sleep: Sleep = asyncio.sleep, linger_s: float = 0.05) -> None:
        self.id = uuid.uuid4().hex
        self.limits = limits
        self._server = server
        self._clock = clock
        self._sleep = sleep
        self._heartbeat_s = heartbeat_s(limits)
        self.held = 0  # slots this client holds
        self.in_use = 0  # of which its requests use
        self.target: int | None = None  # its fair share, as last heard
        self._waiters: deque[asyncio.Future] = deque()
        self._pump: asyncio.Task | None = None
        self._polled_demand = 0
        self._rate_pending: list[tuple[int, asyncio.Future]] = []
        self._rate_task: asyncio.Task | None = None
        self._give = 0
        self._settle = 0
        self._flush_scheduled = False
        self._demand_dirty = False
        self._wake = asyncio.Event()
        self._linger: asyncio.TimerHandle | None = None
        self.linger_s = linger_s
        self.round_trips = 0
        self.closed = False

    # --- the API used through the limiter --------------------------------------------------

    async def acquire(self, tokens: int = 0) -> Grant:
        if self.closed:
            raise RuntimeError("limiter client is closed")
        slot = self.limits.max_in_flight is not None
        if slot:
            await self._take_slot()
        reserved = tokens if self.limits.tokens_per_minute is not None else 0
        wait = 0.0
        granted = booked = False
        try:  # cancelled or failed before the grant: give back what was taken, then let it propagate
            if self.limits.rated:
                ready_at = await self._reserve_rate(tokens)
                booked = True
                wait = max(0.0, ready_at - self._clock())
                if wait > 0:
                    await self._sleep(wait)
            granted = True
        finally:
            if not granted:
                if booked:
                    self._server.unreserve(1, reserved)  # it never went out
                if slot:
                    self._return_slot()
        return Grant(tokens=reserved, slot=slot, wait_s=wait)

    def release(self, grant: Grant, tokens_used: int | None = None) -> None:
        if grant.slot:
            self._return_slot()
        if grant.tokens and tokens_used is not None and tokens_used != grant.tokens:
            self._settle += tokens_used - grant.tokens
            self._schedule_flush()

    async def aclose(self) -> None:
        """Give everything back; waiting requests fail."""
        if self.closed:
            return
        self.closed = True
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        for task in (self._pump, self._rate_task):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        self._flush()
        err = RuntimeError("limiter client closed")
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(err)
        self.held = 0
        self._server.forget(self.id)

    # --- slots -----------------------------------------------------------------------------

    def _limit(self) -> int:
        return self.held if self.target is None else min(self.held, self.target)

    async def _take_slot(self) -> None:
        if not self._waiters and self.in_use < self._limit():
            self.in_use += 1
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._demand_grew()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # the slot was handed over as we were cancelled
                self._return_slot()
            else:
                try:
                    self._waiters.remove(fut)
                except ValueError:
                    pass
                self._dispatch()
            raise

    def _return_slot(self) -> None:
        if self.closed:  # everything went back when it closed
            return
        self.in_use -= 1
        self._dispatch()

    def _dispatch(self, linger: bool = True) -> None:
        """Hand held slots to waiters (one each, in order); give back what nobody here needs, after
        ``linger_s`` if within our share (a lockstep worker's next round usually comes at once)."""
        limit = self._limit()
        while self._waiters and self.in_use < limit:
            fut = self._waiters.popleft()
            if fut.done():  # cancelled while queued
                continue
            self.in_use += 1
            fut.set_result(None)
        want = self.in_use + len(self._waiters)
        keep = max(self.in_use, min(want, limit))
        if self.held > keep:
            over_share = self.target is not None and self.held > self.target
            if linger and not over_share and self.linger_s > 0 and not self.closed:
                if self._linger is None:
                    self._linger = asyncio.get_running_loop().call_later(self.linger_s, self._linger_over)
            else:
                self._give += self.held - keep
                self.held = keep
                self._schedule_flush()
                self._wake.set()
        if self._waiters:
            self._demand_grew()

    def _linger_over(self) -> None:
        self._linger = None
        self._dispatch(linger=False)

    def _demand_grew(self) -> None:
        demand = self.in_use + len(self._waiters)
        self._wake.set()
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._run_pump())
        elif demand > self._polled_demand:
            self._demand_dirty = True  # the outstanding poll may be answered now: say so, once
            self._schedule_flush()      # per loop iteration, however many requests queued

    async def _run_pump(self) -> None:
        """While this client holds or wants slots: one poll at a time (also the heartbeat)."""
        try:
            while not self.closed:
                demand = self.in_use + len(self._waiters)
                if demand == 0 and self.held == 0:
                    self._flush()
                    self._server.give_back(self.id, 0, 0)  # wants nothing now: no share kept for it
                    return
                over_share = self.target is not None and self.held > self.target
                if over_share or (self._linger is not None and demand <= self.held):
                    # over our share (others arrived; our requests give slots back as they end) or
                    # keeping idle slots a moment: wait for that (or the heartbeat), do not ask
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), self._heartbeat_s)
                        continue
                    except asyncio.TimeoutError:
                        pass
                self._polled_demand = demand
                self._flush()  # give-backs first, so the budget sees what we really hold
                self.round_trips += 1
                granted, target = await self._server.request(self.id, demand, self.held, self._heartbeat_s)
                self.held += granted
                self.target = target
                self._dispatch()
        except asyncio.CancelledError:
            # the loop is ending (asyncio.run cancels what is left): return everything we hold
            if not self.closed:
                self.closed = True
                if self._linger is not None:
                    self._linger.cancel()
                    self._linger = None
                self._flush()
                self._server.forget(self.id)
            raise
        except Exception as exc:
            log.warning("rate limiter unreachable: %r", exc)
            err = LimiterUnavailable(f"rate limiter unreachable: {type(exc).__name__}")
            while self._waiters:
                fut = self._waiters.popleft()
                if not fut.done():
                    fut.set_exception(err)
        finally:
            self._pump = None

    # --- rates -----------------------------------------------------------------------------

    async def _reserve_rate(self, tokens: int) -> float:
        fut = asyncio.get_running_loop().create_future()
        self._rate_pending.append((tokens, fut))
        if self._rate_task is None or self._rate_task.done():
            self._rate_task = asyncio.get_running_loop().create_task(self._run_rates())
        return await fut

    async def _run_rates(self) -> None:
        """Reserve for every request queued meanwhile in one call, until none is left."""
        await asyncio.sleep(0)  # let this loop iteration's requests join the batch
        while self._rate_pending:
            batch, self._rate_pending = self._rate_pending, []
            try:
                self.round_trips += 1
                waits = await self._server.reserve(self.id, [t for t, _ in batch])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("rate limiter unreachable: %r", exc)
                err = LimiterUnavailable(f"rate limiter unreachable: {type(exc).__name__}")
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(err)
                continue
            now = self._clock()
            for (tokens, fut), wait in zip(batch, waits):
                if fut.done():  # its caller was cancelled meanwhile
                    self._server.unreserve(1, tokens if self.limits.tokens_per_minute is not None else 0)
                else:
                    fut.set_result(now + wait)

    # --- fire-and-forget messages, coalesced ----------------------------------------------------

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._give:
            n, self._give = self._give, 0
            self._server.give_back(self.id, n, self.in_use + len(self._waiters))
        if self._settle:
            n, self._settle = self._settle, 0
            self._server.settle(n)
        if self._demand_dirty:
            self._demand_dirty = False
            demand = self.in_use + len(self._waiters)
            if demand > self._polled_demand and self._pump is not None:
                self._polled_demand = demand
                self._server.set_demand(self.id, demand)


class PerLoopLimiter:
    """A :class:`~ray_knowsim.llm.limiter.RateLimiter` that keeps one :class:`ShareClient` per event
    loop over a budget server."""

    limits: RateLimits

    def __init__(self, limits: RateLimits, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        self.limits = limits
        self._clock = clock
        self._sleep = sleep
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ShareClient] = (
            weakref.WeakKeyDictionary()
        )

    def _server(self) -> BudgetServer:
        raise NotImplementedError

    def client(self) -> ShareClient:
        loop = asyncio.get_running_loop()
        c = self._clients.get(loop)
        if c is None or c.closed:
            c = self._clients[loop] = ShareClient(self._server(), self.limits, clock=self._clock, sleep=self._sleep)
        return c

    async def acquire(self, tokens: int = 0) -> Grant:
        return await self.client().acquire(tokens)

    def release(self, grant: Grant, tokens_used: int | None = None) -> None:
        c = self._clients.get(asyncio.get_running_loop())
        if c is not None and not c.closed:
            c.release(grant, tokens_used)
        elif grant.tokens and tokens_used is not None:
            # this loop's share was closed meanwhile (its slot went back then): settle tokens only
            self._server().settle(tokens_used - grant.tokens)

    def pause(self, seconds: float) -> None:
        if seconds > 0:
            self._server().pause(seconds)

    async def aclose(self) -> None:
        c = self._clients.pop(asyncio.get_running_loop(), None)
        if c is not None:
            await c.aclose()


__all__ = ["BudgetServer", "LimiterUnavailable", "PerLoopLimiter", "ShareClient", "heartbeat_s"]
