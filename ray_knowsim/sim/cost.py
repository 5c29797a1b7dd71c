"""What one session cost: per-role token usage times the price of the model each role used."""

from __future__ import annotations

from typing import Mapping

from ray_knowsim.schema.chat import Usage
from ray_knowsim.schema.price import Price


def session_cost(usage: Mapping[str, Usage], role_models: Mapping[str, str], prices: Mapping[str, Price]) -> float | None:
    """USD, or None when a role that spent tokens used a model without a price (unknown, not 0)."""
    total = 0.0
    for role, u in usage.items():
        if u.prompt_tokens == 0 and u.completion_tokens == 0:
            continue
        price = prices.get(role_models.get(role, ""))
        if price is None:
            return None
        total += price.cost(u.prompt_tokens, u.completion_tokens, u.cached_prompt_tokens)
    return total


__all__ = ["session_cost"]
