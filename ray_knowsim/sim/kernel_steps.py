"""The kernel steps of a shard's sessions (the loop's state update), micro-batched across whichever
sessions are ready, and each step read back as the rules' own records (:meth:`Step.records`).

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
import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from ray_knowsim.kernels.sessions import COUNTER_INDEX, BatchState
from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.results import FAILURE_MODES
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import RuleConfig
from ray_knowsim.rules.turn_metrics import FAILURE_MODE_VARIANTS, TurnMetrics
from ray_knowsim.rules.update import TurnUpdate


@dataclass
class Step:
    """One session's kernel step: its counters row and its states and carries after the turn."""

    counters: np.ndarray
    post: dict[str, int]
    carries: dict[str, float]

    def records(self) -> tuple[TurnUpdate, TurnMetrics]:
        """The step as the rules' own per-turn records (the kernel is their numba twin: the same
        values, read back from the counter row by field name)."""
        update = _from_counters(TurnUpdate, self.counters, post=self.post, carries=self.carries)
        row = self.counters.tolist()
        modes = {name: int(row[COUNTER_INDEX[name]]) for name in FAILURE_MODES + FAILURE_MODE_VARIANTS}
        return update, _from_counters(TurnMetrics, self.counters, failure_modes=modes)


_CASTS = {"int": int, "bool": bool, "float": float, int: int, bool: bool, float: float}


@functools.cache
def _counter_fields(cls: type) -> tuple[tuple[str, int, Callable[[float], Any]], ...]:
    """``cls``'s scalar fields named like a counter: (name, counter column, cast to the field's type),
    looked up once per class rather than on every one of a run's steps."""
    return tuple((f.name, COUNTER_INDEX[f.name], _CASTS[f.type]) for f in dataclasses.fields(cls) if f.name in COUNTER_INDEX)


def _from_counters(cls: type, counters: np.ndarray, **given: Any) -> Any:
    """A rules dataclass (TurnUpdate, TurnMetrics) from the kernel's counter row: every scalar
    field named like a counter is read from it (cast to the field's type); the rest is ``given``."""
    values = dict(given)
    row = counters.tolist()
    for name, column, cast in _counter_fields(cls):
        if name not in values:
            values[name] = cast(row[column])
    return cls(**values)


#: the buckets of :attr:`KernelStats.sizes`: calls that stepped 1, 2-3, 4-7, 8-15, 16+ sessions
SIZE_BUCKETS = ("1", "2-3", "4-7", "8-15", "16+")


def _bucket(n: int) -> str:
    return SIZE_BUCKETS[min(len(SIZE_BUCKETS) - 1, max(0, n.bit_length() - 1))]


@dataclass
class KernelStats:
    """How the kernel was called: a figure to report (sessions per call is the batching won;
    ``sizes`` how many calls stepped how many sessions; ``seconds`` the CPU time inside the calls,
    packing and unpacking included, so the cost per session-turn can be set against it)."""

    calls: int = 0
    sessions: int = 0  # session-turns stepped, over all calls
    largest: int = 0  # most sessions in one call
    seconds: float = 0.0
    sizes: dict[str, int] = field(default_factory=dict)
    load_seconds: float = 0.0  # the kernel's one load (numba's cache, or a compile) before the first step

    def record(self, n: int, seconds: float) -> None:
        self.calls += 1
        self.sessions += n
        self.largest = max(self.largest, n)
        self.seconds += seconds
        key = _bucket(n)
        self.sizes[key] = self.sizes.get(key, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "sessions": self.sessions, "max": self.largest, "seconds": round(self.seconds, 6),
                "sizes": {k: self.sizes[k] for k in SIZE_BUCKETS if k in self.sizes},
                "load_seconds": round(self.load_seconds, 6)}


class StepBatcher:
    """The micro-batching both batchers share: hand-ins of one event-loop iteration are stepped
    together in the next one, by the subclass's :meth:`_step_ready` (one kernel call)."""

    def __init__(self) -> None:
        self.stats = KernelStats()
        self._pending: dict[Hashable, tuple[list[SignalEntry], asyncio.Future[Step]]] = {}
        self._scheduled = False

    async def step(self, slot: Hashable, signals: Sequence[SignalEntry]) -> Step:
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

    def _step_ready(self, slots: list[Hashable], signals: list[list[SignalEntry]]) -> list[Step]:
        raise NotImplementedError

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        slots = sorted(pending, key=_slot_order)
        started = time.thread_time()  # CPU, not wall: on a loaded machine wall time would charge others' work
        try:
            steps = self._step_ready(slots, [pending[s][0] for s in slots])  # the one kernel call
        except Exception as exc:  # a bug, not a model failure: every waiting session gets it
            for _, future in pending.values():
                if not future.done():
                    future.set_exception(exc)
            return
        self.stats.record(len(slots), time.thread_time() - started)
        for step, slot in zip(steps, slots):
            future = pending[slot][1]
            if not future.done():  # its session was cancelled meanwhile (the shard is ending)
                future.set_result(step)


def _slot_order(slot: Hashable) -> tuple[str, Hashable]:
    return (type(slot).__name__, slot)


class KernelBatcher(StepBatcher):
    """Micro-batches the kernel steps of one shard's structured sessions (slot k: the k-th graph)."""

    def __init__(self, graphs: Sequence[GraphIndex], rules: RuleConfig, initial: Sequence[dict[str, int]], *,
                 max_turns: int) -> None:
        super().__init__()
        self.batch = BatchState(list(graphs), rules, list(initial), max_turns=max_turns)
        # Load the kernel now, before any session has a request out: a worker's first kernel call
        # loads it from numba's cache (~0.5 s of CPU here; a compile without one), and made mid-run
        # that would stall the event loop, every in-flight answer waiting behind it, and be counted
        # as a step's cost. A step of no session loads the same specialisation and changes nothing.
        started = time.thread_time()
        self.batch.step_sessions([], [])
        self.stats.load_seconds = time.thread_time() - started

    def _step_ready(self, slots: list[Hashable], signals: list[list[SignalEntry]]) -> list[Step]:
        counters = self.batch.step_sessions(slots, signals)  # type: ignore[arg-type]
        return [Step(row.copy(), *self.batch.session(slot)) for row, slot in zip(counters, slots)]  # type: ignore[arg-type]


@dataclass
class _OpenSlot:
    index: GraphIndex
    states: dict[str, int]
    carries: dict[str, float]
    turn: int = 1  # the number of the slot's next turn


class OpenKernelBatcher(StepBatcher):
    """The same micro-batched kernel step for sessions that come and go (a training environment's
    episodes): :meth:`open` a slot with its graph and initial state, :meth:`close` it when the
    episode ends. Each flush packs the ready slots' states into one :class:`BatchState` and steps
    them in one kernel call, so a slot's step is exactly the fixed batcher's (same state, carries,
    turn number and rules), and memory follows the live episodes, not every episode ever opened."""

    def __init__(self, rules: RuleConfig, *, max_turns: int) -> None:
        super().__init__()
        self.rules, self.max_turns = rules, max_turns
        self._slots: dict[Hashable, _OpenSlot] = {}
        self._shared: dict[tuple, GraphIndex] = {}  # one index object per distinct graph: packed once per flush

    def open(self, slot: Hashable, index: GraphIndex, initial: dict[str, int]) -> None:
        if slot in self._slots:
            raise RuntimeError(f"kernel slot {slot!r} is already open")
        key = (index.item_id, index.ids, index.labels, index.edges, tuple(index.prereqs.items()), index.update_order)
        self._slots[slot] = _OpenSlot(self._shared.setdefault(key, index), dict(initial), {})

    def close(self, slot: Hashable) -> None:
        self._slots.pop(slot, None)

    @property
    def open_slots(self) -> int:
        return len(self._slots)

    def _step_ready(self, slots: list[Hashable], signals: list[list[SignalEntry]]) -> list[Step]:
        records = [self._slots[s] for s in slots]
        batch = BatchState([r.index for r in records], self.rules, [r.states for r in records], [r.carries for r in records],
                           max_turns=self.max_turns)
        batch.turn[:] = [r.turn for r in records]
        counters = batch.step(signals)
        steps = []
        for k, (row, record) in enumerate(zip(counters, records)):
            post, carries = batch.session(k)
            post = {v: post[v] for v in record.index.ids}
            carries = {v: carries[v] for v in record.index.ids}
            record.states, record.carries, record.turn = post, carries, record.turn + 1
            steps.append(Step(row.copy(), dict(post), dict(carries)))
        return steps


__all__ = ["SIZE_BUCKETS", "KernelBatcher", "KernelStats", "OpenKernelBatcher", "Step", "StepBatcher"]
