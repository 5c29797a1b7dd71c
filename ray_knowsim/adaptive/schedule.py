"""Which items each round adds (pure): a seeded order per task, ``round.items`` at a time.

The order is a permutation keyed by a hash of the run seed and the item id, so it does not depend
on the items file's order, and adding an item to the pool moves no other item's place relative to
the rest. The same config and seed give the same rounds, on any machine, interrupted or not.
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Sequence


def item_order(items: Mapping[str, Sequence[str]], seed: int) -> dict[str, list[str]]:
    """task -> its item ids in the run's adaptive order."""
    def key(task: str, item: str) -> bytes:
        return hashlib.sha256(f"adaptive\x1f{seed}\x1f{task}\x1f{item}".encode()).digest()

    return {task: sorted(ids, key=lambda i: key(task, i)) for task, ids in items.items()}


def round_items(order: Mapping[str, Sequence[str]], per_round: int, round_no: int) -> dict[str, list[str]]:
    """task -> the items round ``round_no`` (1-based) adds (empty once a task's pool is used up)."""
    lo, hi = (round_no - 1) * per_round, round_no * per_round
    return {task: list(ids[lo:hi]) for task, ids in order.items()}


__all__ = ["item_order", "round_items"]
