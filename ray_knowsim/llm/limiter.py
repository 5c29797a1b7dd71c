"""What a model client needs to know about rate limiting: the limits of an endpoint and the small
protocol of a limiter. The limiters themselves (in-process and run-wide over Ray) live in
:mod:`ray_knowsim.backends.limiter`; this layer never imports Ray.

    grant = await limiter.acquire(tokens=estimate)   # waits until the request may go out
    ...send the request...
    limiter.release(grant, tokens_used=usage.total)  # fire and forget: never waits

A backend works with no limiter at all, with an in-process one, or with the run-wide one.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, AsyncIterator, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator


class RateLimits(BaseModel):
    """Limits of one endpoint. ``None`` means "no limit of that kind"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_minute: float | None = Field(None, gt=0)
    tokens_per_minute: float | None = Field(None, gt=0)
    max_in_flight: int | None = Field(None, ge=1)
    # Bucket capacities; default one second's worth (at least 1 request), at most half the limit.
    request_burst: float | None = Field(None, gt=0)
    token_burst: float | None = Field(None, gt=0)
    # A worker that has not been heard from for this long is presumed dead (its process crashed)
    # and the in-flight slots it held are reclaimed.
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

    @property
    def rated(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None


@dataclass(frozen=True)
class Grant:
    """Permission to send one request: it holds an in-flight slot (``slot``) and ``tokens`` reserved
    tokens until released. ``wait_s`` is how long the rate limit made it wait."""

    tokens: int = 0
    slot: bool = False
    wait_s: float = 0.0


@runtime_checkable
class RateLimiter(Protocol):
    """What :class:`~ray_knowsim.llm.http.client.OpenAICompatibleModel` calls."""

    limits: RateLimits

    async def acquire(self, tokens: int = 0) -> Grant:
        """Wait for an in-flight slot and the rate budget; cancellation frees what was taken."""
        ...

    def release(self, grant: Grant, tokens_used: int | None = None) -> None:
        """Give the slot back and settle the token reservation against the real usage. Never waits."""
        ...

    def pause(self, seconds: float) -> None:
        """A provider said 429: grant nothing new run-wide for ``seconds``. Never waits."""
        ...

    async def aclose(self) -> None:
        """Return what this process (event loop) still holds; the limiter stays usable."""
        ...


@contextlib.asynccontextmanager
async def granted(limiter: RateLimiter | None, tokens: int = 0) -> AsyncIterator[Grant | None]:
    """One request sent outside a model client (the checks' probes) under the endpoint's quota: an
    endpoint's in-flight cap and rates are the provider's, so a probe counts as any request does."""
    if limiter is None:
        yield None
        return
    grant = await limiter.acquire(tokens)
    try:
        yield grant
    finally:
        limiter.release(grant)


__all__ = ["Grant", "RateLimiter", "RateLimits", "granted"]
