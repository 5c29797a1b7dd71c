"""When and how long to wait before retrying an HTTP model call.

Kept apart from the transport so the policy (which failures are transient, how the delay grows,
how a server's Retry-After is honoured) is readable and testable without a network.
"""

from __future__ import annotations

import email.utils
import random
import time
from typing import Mapping

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Statuses a provider uses for "try again later": timeout, conflict/lock, rate limit, server side.
RETRYABLE_STATUSES = frozenset({408, 409, 429})


def is_retryable_status(status: int) -> bool:
    """True for 408/409/429 and every 5xx; other 4xx mean the request itself is wrong."""
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


class BackoffConfig(BaseModel):
    """Exponential backoff with jitter: attempt k waits min(max_s, initial_s * multiplier**(k-1)),
    scaled by a random factor in [1 - jitter, 1] so that many workers do not retry in lockstep."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    initial_s: float = Field(1.0, gt=0)
    multiplier: float = Field(2.0, ge=1)
    max_s: float = Field(30.0, gt=0)
    jitter: float = Field(0.5, ge=0, le=1)
    # A server asking for a longer pause than this (a daily quota, say) ends the retries at once
    # instead of parking a whole shard for an hour.
    max_retry_after_s: float = Field(120.0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> "BackoffConfig":
        if self.max_s < self.initial_s:
            raise ValueError(f"backoff.max_s ({self.max_s}) must be >= backoff.initial_s ({self.initial_s})")
        return self


def backoff_delay(
    attempt: int, cfg: BackoffConfig, rng: random.Random, retry_after_s: float | None = None
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based) before the next one.

    A server's Retry-After is a floor: we never come back earlier than it asked.
    """
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    base = min(cfg.max_s, cfg.initial_s * cfg.multiplier ** (attempt - 1))
    delay = base * (1.0 - cfg.jitter * rng.random())
    if retry_after_s is not None:
        delay = max(delay, retry_after_s)
    return delay


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` (OpenAI) or ``Retry-After``
    (seconds or an HTTP date); None when absent or unreadable."""
    lower = {k.lower(): v for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    raw = lower.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        return value if value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)
