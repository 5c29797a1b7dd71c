"""The run-wide budget of one endpoint, as pure bookkeeping: no Ray, no I/O, no waiting, clock
injected. :mod:`.service` puts it behind async calls; :mod:`.actor` hosts that in a Ray actor.

Two kinds of budget:

* **In-flight slots** (``max_in_flight``) are shared out to *clients* (one per worker process and
  event loop), not to requests: a client holds a share of slots and hands them to its own requests
  without asking anyone; it asks for more only when its own queue outgrows what it holds, and gives
  back what it no longer needs. Shares are max-min fair over the clients' demands, so every worker
  keeps moving (a lockstep shard starved by another would leave slots idle at the end of a run).
* **Rates** (requests and tokens per minute) are token buckets that may go into debt: a
  reservation always succeeds and says how long to wait. A bucket of capacity ``burst`` refills
  at ``(limit - burst) / 60`` per second, so any window of W seconds admits at most
  ``burst + rate * W`` units and any 60-second window at most ``limit``. A single reservation
  larger than the burst waits for its debt, which is how one long prompt still passes.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from ray_knowsim.llm.limiter import RateLimits

Clock = Callable[[], float]


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


def fair_targets(total: int, demands: dict[str, int]) -> dict[str, int]:
    """Max-min fair integer shares of ``total`` slots over clients' demands (water-filling); the
    slots left over after rounding go to the earliest clients (dict order = arrival order)."""
    targets = {c: 0 for c in demands}
    active = [c for c, d in demands.items() if d > 0]
    left = total
    while active and left > 0:
        share = max(1, left // len(active))
        still = []
        for c in active:
            give = min(share, demands[c] - targets[c], left)
            targets[c] += give
            left -= give
            if targets[c] < demands[c]:
                still.append(c)
        active = still
    return targets


class SlotShares:
    """``total`` in-flight slots held by clients; who may hold how many."""

    def __init__(self, total: int, lease_timeout_s: float, clock: Clock) -> None:
        self.total = total
        self.lease_timeout_s = lease_timeout_s
        self._clock = clock
        self.held: dict[str, int] = {}
        self.demand: dict[str, int] = {}
        self._seen: dict[str, float] = {}
        self.reclaimed = 0

    @property
    def free(self) -> int:
        return self.total - sum(self.held.values())

    def _touch(self, client: str) -> None:
        self._seen[client] = self._clock()
        self.held.setdefault(client, 0)

    def expire(self) -> list[str]:
        """Forget clients not heard from for ``lease_timeout_s`` (their process died); their slots
        come back. Returns the clients dropped."""
        now = self._clock()
        dead = [c for c, t in self._seen.items() if now - t >= self.lease_timeout_s]
        for c in dead:
            self.reclaimed += self.held.pop(c, 0)
            self.demand.pop(c, None)
            del self._seen[c]
        return dead

    def targets(self) -> dict[str, int]:
        return fair_targets(self.total, self.demand)

    def target(self, client: str) -> int:
        return self.targets().get(client, 0)

    def set_demand(self, client: str, demand: int) -> None:
        """``demand``: slots the client wants right now (in use + queued requests)."""
        if demand < 0:
            raise ValueError(f"demand must be >= 0, got {demand}")
        self._touch(client)
        if demand:
            self.demand[client] = demand
        else:
            self.demand.pop(client, None)

    def grantable(self, client: str, targets: dict[str, int] | None = None) -> int:
        """How many more slots ``client`` may take now: up to its fair share and its demand, from
        the free ones."""
        targets = self.targets() if targets is None else targets
        want = min(targets.get(client, 0), self.demand.get(client, 0)) - self.held.get(client, 0)
        return max(0, min(self.free, want))

    def take(self, client: str, n: int) -> None:
        if n < 0 or n > self.free:
            raise ValueError(f"cannot take {n} slots with {self.free} free")
        self._touch(client)
        self.held[client] += n

    def give_back(self, client: str, n: int) -> None:
        """Slots the client no longer holds. A client forgotten as dead gives back nothing."""
        if n < 0:
            raise ValueError(f"cannot give back {n} slots")
        if client not in self._seen:
            return
        self._touch(client)
        self.held[client] -= min(n, self.held[client])

    def forget(self, client: str) -> None:
        """The client closed: everything it held is free."""
        self.held.pop(client, None)
        self.demand.pop(client, None)
        self._seen.pop(client, None)


class RateBudget:
    """Request and token buckets of one endpoint."""

    def __init__(self, limits: RateLimits, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        now = clock()
        self.requests = (
            TokenBucket(limits.requests_per_minute, limits.request_burst, now)
            if limits.requests_per_minute is not None
            else None
        )
        self.tokens = (
            TokenBucket(limits.tokens_per_minute, limits.token_burst, now)
            if limits.tokens_per_minute is not None
            else None
        )
        self.granted = 0

    def reserve(self, tokens: Sequence[int]) -> list[float]:
        """Reserve one request per entry (with that many tokens), in order; the wait of each."""
        now = self._clock()
        waits = []
        for t in tokens:
            if t < 0:
                raise ValueError(f"tokens must be >= 0, got {t}")
            wait = 0.0
            if self.requests is not None:
                wait = max(wait, self.requests.reserve(1.0, now))
            if self.tokens is not None and t:
                wait = max(wait, self.tokens.reserve(float(t), now))
            waits.append(wait)
            self.granted += 1
        return waits

    def settle(self, extra_tokens: int) -> None:
        """Tokens really used minus tokens reserved (negative: refund the unused part)."""
        if self.tokens is None or not extra_tokens:
            return
        now = self._clock()
        if extra_tokens < 0:
            self.tokens.refund(float(-extra_tokens), now)
        else:
            self.tokens.reserve(float(extra_tokens), now)

    def unreserve(self, requests: int, tokens: int) -> None:
        """Give back reservations that were never used (their callers were cancelled)."""
        now = self._clock()
        if self.requests is not None and requests:
            self.requests.refund(float(requests), now)
        if self.tokens is not None and tokens:
            self.tokens.refund(float(tokens), now)

    def pause(self, seconds: float) -> None:
        if seconds <= 0:
            return
        now = self._clock()
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.block_for(seconds, now)


__all__ = ["Clock", "RateBudget", "SlotShares", "TokenBucket", "default_burst", "fair_targets"]
