"""What one session cost: per-role token usage times the price of the model each role used."""

from __future__ import annotations

from typing import Mapping

from ray_knowsim.schema.chat import Usage
from ray_knowsim.schema.price import Price


def session_cost(usage: Mapping[str, Usage], role_models: Mapping[str, str], prices: Mapping[str, Price]) -> float | None:
    """USD, or None when a role the session called used a model without a price: unknown, not 0,
    even where its calls reported no tokens (failed requests), so that an unpriced run never reads
    as "$0.0000"."""
    total = 0.0
    for role, u in usage.items():
        price = prices.get(role_models.get(role, ""))
        if price is None:
            return None
        if u.prompt_tokens == 0 and u.completion_tokens == 0:
            continue
        total += price.usage_cost(u)
    return total


__all__ = ["session_cost"]
