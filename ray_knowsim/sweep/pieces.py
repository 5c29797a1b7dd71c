"""What a sweep still has to do, and how that work is cut into Ray tasks (pure: no Ray, no I/O).

Why two granularities. The conversation *block* (a fixed run of ``block_size`` conversations) is
part of the sweep's identity: partial sums are taken per block, so the aggregates come out
bit-identical only when every run of the sweep uses the same blocks. The *piece* (one Ray task:
a range of settings of one block) is sized for the cluster at hand and may differ at every
resume. A commit records the settings range it covers, so what is done is, per block, a set of
setting indexes -- whatever pieces produced it -- and what is left is its complement.

Ranges are half-open ``(start, stop)`` pairs of setting indexes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

Range = tuple[int, int]

#: pieces per CPU the layout aims for (load balance: the last pieces finish close together)
PIECES_PER_CPU = 4


@dataclass(frozen=True, order=True)
class Piece:
    """Settings ``start..stop-1`` re-scored on conversation block ``block``: one task, one commit."""

    block: int
    start: int
    stop: int

    @property
    def name(self) -> str:
        """The commit's name: the same piece of work has the same name in every layout."""
        return f"b{self.block:05d}-s{self.start:07d}-{self.stop:07d}"

    @property
    def n_settings(self) -> int:
        return self.stop - self.start


def union(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, disjoint, merged (adjacent ranges join)."""
    out: list[list[int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def subtract(ranges: Iterable[Range], taken: Iterable[Range]) -> list[Range]:
    """The parts of ``ranges`` outside ``taken``."""
    out: list[Range] = []
    cut = union(taken)
    for a, b in union(ranges):
        for x, y in cut:
            if y <= a or x >= b:
                continue
            if x > a:
                out.append((a, x))
            a = max(a, y)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return out


def missing(n_settings: int, n_blocks: int, covered: dict[int, list[Range]]) -> dict[int, list[Range]]:
    """Per block, the setting ranges no commit covers (blocks with nothing left are absent)."""
    out = {}
    for block in range(n_blocks):
        left = subtract([(0, n_settings)], covered.get(block, []))
        if left:
            out[block] = left
    return out


def settings_per_piece(
    *,
    todo: dict[int, list[Range]],
    block_size: int,
    cpus: int,
    seconds_per_pair: float,
    target_task_seconds: float,
    explicit: int | None = None,
) -> int:
    """Settings per piece: at most ``target_task_seconds`` of work, and small enough that the
    work left makes ``PIECES_PER_CPU`` pieces per CPU of the cluster (so every CPU gets work and
    the last pieces end close together). ``explicit`` (the config's ``settings_per_task``) wins."""
    if explicit:
        return explicit
    by_time = max(1, int(target_task_seconds / (seconds_per_pair * max(block_size, 1))))
    units = sum(b - a for ranges in todo.values() for a, b in ranges)  # (setting, block) pairs left
    by_spread = max(1, math.ceil(units / (PIECES_PER_CPU * max(cpus, 1))))
    return min(by_time, by_spread)


def cut(todo: dict[int, list[Range]], per_piece: int) -> list[Piece]:
    """The work left as pieces of at most ``per_piece`` settings, sizes within one of each other
    inside a range; block-major (a block's packed arrays can be freed once its pieces are done)."""
    pieces = []
    for block in sorted(todo):
        for a, b in todo[block]:
            k = math.ceil((b - a) / per_piece)
            edges = [a + round(i * (b - a) / k) for i in range(k + 1)]
            pieces += [Piece(block, x, y) for x, y in zip(edges, edges[1:])]
    return pieces


def assign(claims: list[tuple[str, int, Range]]) -> dict[str, list[Range]]:
    """Which settings each commit supplies when commits overlap (a piece committed twice under
    another layout, or a retried task): per block, every setting from exactly one commit -- the
    one whose range starts first, then the larger, then the name. ``claims`` are
    ``(name, block, range)``; returns name -> the ranges to read from it (empty: read nothing)."""
    out: dict[str, list[Range]] = {}
    taken: dict[int, list[Range]] = {}
    for name, block, (a, b) in sorted(claims, key=lambda c: (c[1], c[2][0], -c[2][1], c[0])):
        mine = subtract([(a, b)], taken.get(block, []))
        out[name] = mine
        taken[block] = union(taken.get(block, []) + mine)
    return out


__all__ = ["PIECES_PER_CPU", "Piece", "Range", "assign", "cut", "missing", "settings_per_piece", "subtract", "union"]
