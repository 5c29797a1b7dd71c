"""The state update of a shard's sessions, batched across whichever sessions are ready.

Sessions advance on their own clocks (:mod:`ray_knowsim.sim.loop`), but the knowledge-state
update stays one numba kernel call over many sessions, as the design asks: a session whose
extraction has been read hands its signals to :meth:`KernelBatcher.step` and waits; the first
hand-in of an event-loop iteration schedules a flush for the next iteration, and that flush steps,
in ONE call (:meth:`BatchState.step_sessions`), every session that handed in meanwhile. Nothing
waits for anything but the current iteration: a session never waits for another's model call.

A session's step depends only on its own state, turn number and signals (the kernel keeps no
state across sessions), so how sessions group into calls never changes a result.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ray_knowsim.kernels.batch import BatchState
from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import RuleConfig


@dataclass
class Step:
    """One session's kernel step: its counters row and its states and carries after the turn."""

    counters: np.ndarray
    post: dict[str, int]
    carries: dict[str, float]


@dataclass
class KernelStats:
    """How the kernel was called: a figure to report (sessions per call is the batching won)."""

    calls: int = 0
    sessions: int = 0  # session-turns stepped, over all calls
    largest: int = 0  # most sessions in one call

    def to_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "sessions": self.sessions, "max": self.largest}


class KernelBatcher:
    """Micro-batches the kernel steps of one shard's structured sessions (slot k: the k-th graph)."""

    def __init__(self, graphs: Sequence[GraphIndex], rules: RuleConfig, initial: Sequence[dict[str, int]], *,
                 max_turns: int) -> None:
        self.batch = BatchState(list(graphs), rules, list(initial), max_turns=max_turns)
        self.stats = KernelStats()
        self._pending: dict[int, tuple[list[SignalEntry], asyncio.Future[Step]]] = {}
        self._scheduled = False

    async def step(self, slot: int, signals: Sequence[SignalEntry]) -> Step:
        """Advance session ``slot`` one turn with ``signals``, in the next flush."""
        if slot in self._pending:
            raise RuntimeError(f"kernel slot {slot} handed in twice before a flush")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Step] = loop.create_future()
        self._pending[slot] = (list(signals), future)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        slots = sorted(pending)
        try:
            counters = self.batch.step_sessions(slots, [pending[s][0] for s in slots])  # the one kernel call
        except Exception as exc:  # a bug, not a model failure: every waiting session gets it
            for _, future in pending.values():
                if not future.done():
                    future.set_exception(exc)
            return
        self.stats.calls += 1
        self.stats.sessions += len(slots)
        self.stats.largest = max(self.stats.largest, len(slots))
        for row, slot in zip(counters, slots):
            future = pending[slot][1]
            if not future.done():  # its session was cancelled meanwhile (the shard is ending)
                post, carries = self.batch.session(slot)
                future.set_result(Step(row.copy(), post, carries))


__all__ = ["KernelBatcher", "KernelStats", "Step"]
