"""Rate and concurrency limits of model endpoints, run-wide.

* :mod:`.budget`: the bookkeeping (token buckets, fair shares of in-flight slots); pure logic.
* :mod:`.service`: that budget behind async calls (long-poll for slots); no Ray.
* :mod:`.client`: a process's local share of the budget (FIFO, wake-one, fire-and-forget release).
* :mod:`.local`: :class:`LocalRateLimiter`, the budget in this process (no Ray).
* :mod:`.actor`: the budget as a named Ray actor and :class:`SharedLimiter`, its picklable handle.

The model clients see only :class:`ray_knowsim.llm.limiter.RateLimiter`.
"""

from ray_knowsim.backends.limiter.actor import SharedLimiter, create_shared_limiter, get_or_create_limiter, make_limiter
from ray_knowsim.backends.limiter.budget import RateBudget, SlotShares, TokenBucket, default_burst, fair_targets
from ray_knowsim.backends.limiter.client import LimiterUnavailable, ShareClient
from ray_knowsim.backends.limiter.local import LocalRateLimiter
from ray_knowsim.backends.limiter.service import BudgetService
from ray_knowsim.llm.limiter import Grant, RateLimiter, RateLimits

__all__ = [
    "BudgetService", "Grant", "LimiterUnavailable", "LocalRateLimiter", "RateBudget", "RateLimiter", "RateLimits",
    "ShareClient", "SharedLimiter", "SlotShares", "TokenBucket", "create_shared_limiter", "default_burst",
    "fair_targets", "get_or_create_limiter", "make_limiter",
]
