"""The budget of one endpoint behind async calls: what the Ray actor hosts and what an in-process
limiter talks to directly. No Ray here.

Clients (one per worker process and event loop, see :mod:`.client`) call:

* ``request(client, demand, held, wait_s)``: "I want ``demand`` slots and hold ``held``": answers
  ``(granted, target)`` at once when it can grant something or the client holds more than its fair
  ``target``; otherwise it long-polls up to ``wait_s`` (the client's heartbeat) and answers as soon
  as slots free up. Waiting clients are served in arrival order (FIFO), each up to its share.
* ``give_back``, ``set_demand``, ``forget``, ``settle``, ``unreserve``, ``pause``: never wait, and
  clients do not wait for them either (fire and forget).
* ``reserve(client, tokens)``: one rate reservation per entry; answers the wait of each.

Thread-safe: an in-process limiter may be used from several event loops (threads).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Sequence

from ray_knowsim.backends.limiter.budget import Clock, RateBudget, SlotShares
from ray_knowsim.llm.limiter import RateLimits


class BudgetService:
    def __init__(self, limits: RateLimits, clock: Clock = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self.shares = (
            SlotShares(limits.max_in_flight, limits.lease_timeout_s, clock)
            if limits.max_in_flight is not None
            else None
        )
        self.rates = RateBudget(limits, clock) if limits.rated else None
        # client -> (future, its loop, what the client says it holds); insertion order = FIFO
        self._waiting: dict[str, tuple[asyncio.Future, asyncio.AbstractEventLoop, int]] = {}
        self.polls = 0

    # --- slots ---------------------------------------------------------------------------

    async def request(self, client: str, demand: int, held: int, wait_s: float) -> tuple[int, int]:
        if self.shares is None:
            raise RuntimeError("this limiter has no in-flight limit")
        loop = asyncio.get_running_loop()
        with self._lock:
            self.polls += 1
            self._expire_locked()
            self._cancel_wait_locked(client)  # at most one outstanding poll per client
            self.shares.set_demand(client, demand)
            targets = self.shares.targets()
            granted = self.shares.grantable(client, targets)
            if granted:
                self.shares.take(client, granted)
            target = targets.get(client, 0)
            if granted or wait_s <= 0 or held > target:
                self._walk_locked(targets)
                return granted, target
            fut: asyncio.Future = loop.create_future()
            self._waiting[client] = (fut, loop, held)
            self._walk_locked(targets)  # a changed demand may shrink others' shares
        timer = loop.call_later(wait_s, self._time_out, client, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            with self._lock:
                if self._waiting.get(client, (None,))[0] is fut:
                    del self._waiting[client]

    def _time_out(self, client: str, fut: asyncio.Future) -> None:
        with self._lock:
            entry = self._waiting.get(client)
            if entry is None or entry[0] is not fut:
                return
            del self._waiting[client]
            target = self.shares.target(client) if self.shares is not None else 0
        if not fut.done():
            fut.set_result((0, target))

    def _cancel_wait_locked(self, client: str) -> None:
        entry = self._waiting.pop(client, None)
        if entry is not None:
            entry[1].call_soon_threadsafe(self._resolve, client, entry[0], 0, 0)

    def _walk_locked(self, targets: dict[str, int] | None = None) -> None:
        """Answer waiting clients in arrival order: those that can now get slots (up to their share)
        and those that hold more than their share (so they shrink)."""
        if not self._waiting or self.shares is None:
            return
        targets = self.shares.targets() if targets is None else targets
        for client, (fut, loop, held) in list(self._waiting.items()):
            granted = self.shares.grantable(client, targets)
            target = targets.get(client, 0)
            if granted or held > target:
                if granted:
                    self.shares.take(client, granted)
                del self._waiting[client]
                loop.call_soon_threadsafe(self._resolve, client, fut, granted, target)

    def _resolve(self, client: str, fut: asyncio.Future, granted: int, target: int) -> None:
        """Runs in the waiting client's loop. A poll abandoned meanwhile returns its grant."""
        if fut.done():
            if granted:
                self.give_back(client, granted)
            return
        fut.set_result((granted, target))

    def _expire_locked(self) -> None:
        if self.shares is not None and self.shares.expire():
            self._walk_locked()

    def give_back(self, client: str, n: int, demand: int | None = None) -> None:
        """``n`` slots come back; ``demand``: what the client wants now (its fair share follows)."""
        if self.shares is None or (n <= 0 and demand is None):
            return
        with self._lock:
            if n > 0:
                self.shares.give_back(client, n)
            if demand is not None and client in self.shares.held:
                self.shares.set_demand(client, demand)
            self._walk_locked()

    def set_demand(self, client: str, demand: int) -> None:
        """A client's queue grew while its poll waits: maybe it can be served now."""
        if self.shares is None:
            return
        with self._lock:
            self.shares.set_demand(client, demand)
            self._walk_locked()

    def forget(self, client: str) -> None:
        """The client closed (or its loop ended): all it held is free."""
        if self.shares is None:
            return
        with self._lock:
            entry = self._waiting.pop(client, None)
            self.shares.forget(client)
            self._walk_locked()
        if entry is not None:
            entry[1].call_soon_threadsafe(self._resolve, client, entry[0], 0, 0)

    # --- rates ---------------------------------------------------------------------------

    def reserve(self, client: str, tokens: Sequence[int]) -> list[float]:
        if self.rates is None:
            return [0.0] * len(tokens)
        with self._lock:
            if self.shares is not None:
                self.shares.set_demand(client, self.shares.demand.get(client, 0))  # a sign of life
            return self.rates.reserve(tokens)

    def settle(self, extra_tokens: int) -> None:
        if self.rates is not None:
            with self._lock:
                self.rates.settle(extra_tokens)

    def unreserve(self, requests: int, tokens: int) -> None:
        if self.rates is not None:
            with self._lock:
                self.rates.unreserve(requests, tokens)

    def pause(self, seconds: float) -> None:
        if self.rates is not None:
            with self._lock:
                self.rates.pause(seconds)

    # --- introspection -------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = {"polls": self.polls, "waiting_clients": len(self._waiting)}
            if self.shares is not None:
                out.update(held=sum(self.shares.held.values()), clients=len(self.shares.held),
                           reclaimed=self.shares.reclaimed)
            if self.rates is not None:
                out["granted"] = self.rates.granted
            return out


__all__ = ["BudgetService"]
