"""Streaming reduction of the session table: per-(condition, level, item) moments, failure modes,
facts.

Why streaming: a run can hold millions of sessions; each Arrow batch is reduced to a few numbers
per cell and item and merged (Chan et al.'s pairwise update of count / mean / M2), so memory
depends on the number of cells and items, not rows. Per item because the intervals treat items
as the unit (:func:`ray_knowsim.stats.descriptive.clustered_mean`).
"""

from __future__ import annotations

import copy
import hashlib
import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ray_knowsim.schema.results import DRIFT_COLUMNS, FAILURE_MODES
from ray_knowsim.schema.states import level_order
from ray_knowsim.stats.descriptive import ClusteredMean, Moments, clustered_mean

FM_COLUMNS: tuple[str, ...] = tuple(f"fm_{m}" for m in FAILURE_MODES)
Cell = tuple[str, str]  # (condition, level)


def sample_key(seed: int, session_id: str) -> int:
    """Stable pseudo-random key: the sample does not depend on file or batch order."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{session_id}".encode(), digest_size=8).digest(), "big")


@dataclass
class RunSummary:
    """Everything the tables and the failure-mode chart need, built one batch at a time."""

    metric_columns: tuple[str, ...]
    sample_per_cell: int = 0
    seed: int = 0
    # (cond, level, column) -> item -> moments; items in first-seen order (merges stay in one order)
    moments: dict[tuple[str, str, str], dict[str, Moments]] = field(default_factory=dict)
    status: dict[Cell, Counter] = field(default_factory=dict)
    failure_modes: dict[Cell, dict[str, int]] = field(default_factory=dict)
    early_stops: dict[Cell, int] = field(default_factory=dict)
    facts: dict[str, Counter] = field(default_factory=dict)  # column -> value counts (small columns)
    _candidates: dict[Cell, list[tuple[int, str]]] = field(default_factory=dict)  # max-heaps by -key
    rows: int = 0
    drift: Counter = field(default_factory=Counter)  # run totals of DRIFT_COLUMNS, every session

    DRIFT_COLUMNS = DRIFT_COLUMNS

    FACT_COLUMNS = ("run_id", "task", "simulator", "rules_preset", "stop_reason")

    def columns(self) -> list[str]:
        return sorted(
            {"session_id", "condition", "knowledge_level", "item_id", "status", "early_stop_turn", *self.metric_columns, *FM_COLUMNS,
             *self.FACT_COLUMNS, *self.DRIFT_COLUMNS}
        )

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.rows += batch.num_rows
        names = set(batch.schema.names)
        for col in self.FACT_COLUMNS:
            if col in names:
                counts = self.facts.setdefault(col, Counter())
                for entry in pc.value_counts(batch.column(col)).to_pylist():
                    counts[entry["values"]] += entry["counts"]
        for col in self.DRIFT_COLUMNS:
            if col in names:
                self.drift[col] += int(np.nansum(_floats(batch, col)))
        cond = batch.column("condition").to_pylist()
        level = batch.column("knowledge_level").to_pylist()
        status = batch.column("status").to_pylist()
        ok = np.array([s == "ok" for s in status])
        for c, lv, s in zip(cond, level, status):
            self.status.setdefault((c, lv), Counter())[s] += 1
        keys = np.array([f"{c}\x1f{lv}" for c, lv in zip(cond, level)], dtype=object)
        ok_keys = keys[ok]
        groups = _groups(ok_keys)
        items = np.array([str(i) for i in batch.column("item_id").to_pylist()], dtype=object)[ok] if "item_id" in names \
            else np.full(int(ok.sum()), "", dtype=object)
        item_keys = np.array([f"{k}\x1f{i}" for k, i in zip(ok_keys, items)], dtype=object)
        item_groups = [(u.split("\x1f"), idx) for u, idx in _groups(item_keys).items()]
        for col in self.metric_columns:
            values = _floats(batch, col)[ok] if col in names else np.full(int(ok.sum()), np.nan)
            for (c, lv, it), idx in item_groups:
                per = self.moments.setdefault((c, lv, col), {})
                per[it] = per.get(it, Moments()).merge(Moments.of(values[idx]))
        for col in FM_COLUMNS:
            values = _floats(batch, col)[ok] if col in names else np.zeros(int(ok.sum()))
            for u, idx in groups.items():
                cell = tuple(u.split("\x1f"))
                fm = self.failure_modes.setdefault(cell, dict.fromkeys(FAILURE_MODES, 0))
                fm[col[3:]] += int(np.nansum(values[idx]))
        if "early_stop_turn" in names:
            stopped = ~np.isnan(_floats(batch, "early_stop_turn"))[ok]
            for u, idx in groups.items():
                cell = tuple(u.split("\x1f"))
                self.early_stops[cell] = self.early_stops.get(cell, 0) + int(stopped[idx].sum())
        if self.sample_per_cell:
            sids = np.array(batch.column("session_id").to_pylist(), dtype=object)[ok]
            for sid, u in zip(sids, ok_keys):
                cell = tuple(u.split("\x1f"))
                heap = self._candidates.setdefault(cell, [])
                item = (-sample_key(self.seed, sid), sid)
                if len(heap) < self.sample_per_cell:
                    heapq.heappush(heap, item)
                elif item > heap[0]:
                    heapq.heapreplace(heap, item)

    # ---- read-out -------------------------------------------------------------------------
    @property
    def conditions(self) -> list[str]:
        return sorted({c for c, _ in self.status})

    @property
    def levels(self) -> list[str]:
        return level_order({lv for _, lv in self.status})

    def _items(self, condition: str, level: str, column: str) -> dict[str, Moments]:
        return self.moments.get((condition, level, column), {})

    def cell(self, condition: str, level: str, column: str) -> Moments:
        out = Moments()
        for m in self._items(condition, level, column).values():
            out = out.merge(m)
        return out

    def interval(self, condition: str, levels: list[str], column: str) -> ClusteredMean:
        """The item-clustered mean and 95 % CI of one cell (one level) or of the unweighted mean
        of several level means (the same statistic as the run's tables)."""
        per = [self._items(condition, lv, column) for lv in levels]
        items = sorted({it for p in per for it in p})
        counts = np.array([[p[it].n if it in p else 0 for it in items] for p in per], dtype=float).reshape(len(levels), len(items))
        sums = np.array([[p[it].sum if it in p else 0.0 for it in items] for p in per], dtype=float).reshape(len(levels), len(items))
        return clustered_mean(counts, sums)

    def n_ok(self, condition: str, level: str) -> int:
        return self.status.get((condition, level), Counter()).get("ok", 0)

    def n_status(self, status: str) -> int:
        return sum(c.get(status, 0) for c in self.status.values())

    def candidates(self) -> dict[Cell, list[str]]:
        """Per cell, the sampled session ids, best (smallest key) first."""
        return {cell: [sid for _, sid in sorted(heap, reverse=True)] for cell, heap in self._candidates.items()}


class PerTask:
    """Each task's summary, built in the run's pass. While every row seen belongs to one task, no
    copy is kept: that task's summary is the run's so far (without its sample), taken when a
    second task (or a row without one) first shows up; from then on rows go to their task's."""

    def __init__(self, new: Callable[[], RunSummary]) -> None:
        self._new = new
        self._solo: str | None = None  # the one task of every row so far
        self._parts: dict[str, RunSummary] | None = None

    def add(self, batch: pa.RecordBatch | pa.Table, run_so_far: RunSummary) -> None:
        """``batch`` before it is added to ``run_so_far`` (the run's summary)."""
        if "task" not in batch.schema.names:
            return
        tasks = batch.column("task")
        values = pc.unique(tasks).to_pylist()
        if self._parts is None:
            if len(values) == 1 and values[0] is not None and self._solo in (None, values[0]):
                self._solo = values[0]
                return
            self._parts = {}
            if self._solo is not None:
                first = copy.deepcopy(run_so_far)
                first.sample_per_cell, first._candidates = 0, {}
                self._parts[self._solo] = first
        for task in values:
            if task is None:
                continue
            part = self._parts.get(task)
            if part is None:
                part = self._parts[task] = self._new()
            part.add(batch if len(values) == 1 else batch.filter(pc.field("task") == task))

    def of(self, task: str | None) -> RunSummary:
        if self._parts is None or task not in self._parts:
            return self._new()  # (not reached: every task named by the run's facts has rows)
        return self._parts[task]


def task_summaries(batches: Iterable[pa.RecordBatch | pa.Table], metric_columns: Sequence[str]) -> dict[str | None, RunSummary]:
    """Each task's summary of the session ``batches`` (scores joined), as the report's sections
    have them (tasks are never pooled; a run without a task column is one section, None), for
    readers that show the report's tables without building the report (``ray-knowsim view``)."""
    summary = RunSummary(tuple(metric_columns))
    per_task = PerTask(lambda: RunSummary(tuple(metric_columns)))
    for batch in batches:
        if batch.num_rows:
            per_task.add(batch, summary)
            summary.add(batch)
    if summary.rows == 0:
        return {}
    tasks = sorted(str(t) for t in summary.facts.get("task", {}) if t is not None)
    return {task: per_task.of(task) if len(tasks) > 1 else summary for task in tasks or [None]}


def _groups(keys: np.ndarray) -> dict[str, np.ndarray]:
    """Row indices per distinct key: keys sorted, each key's indices ascending. One sort for the
    batch (np.unique + a stable argsort), not one scan of the rows per key."""
    if len(keys) == 0:
        return {}
    uniq, inverse = np.unique(keys, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse, minlength=len(uniq)))[:-1]
    return dict(zip(uniq.tolist(), np.split(order, bounds)))


def _floats(batch, col: str) -> np.ndarray:
    arr = batch.column(col)
    if pa.types.is_boolean(arr.type):
        arr = pc.cast(arr, pa.int8())
    return np.asarray(pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False), dtype=float)


def pick_sample(summary: RunSummary, n: int) -> list[str]:
    """Round-robin over cells taken along diagonals of the (level x condition) grid, so that the
    first picks differ in both level and condition; then deeper into each cell until n sessions."""
    cands = summary.candidates()
    levels, conds = summary.levels, summary.conditions
    grid = [(li, ci) for li in range(len(levels)) for ci in range(len(conds))]
    grid.sort(key=lambda p: ((p[1] - p[0]) % max(1, len(conds)), p[0]))
    order = [(conds[ci], levels[li]) for li, ci in grid if cands.get((conds[ci], levels[li]))]
    picked: list[str] = []
    depth = 0
    while len(picked) < n and any(len(cands[cell]) > depth for cell in order):
        for cell in order:
            if len(picked) < n and len(cands[cell]) > depth:
                picked.append(cands[cell][depth])
        depth += 1
    return picked
