"""The two results tables as plain data: per level (paper Table 4) and level-marginalised (Table 16).

Rules (spec §11, recommendation): means per (condition, level) first; the level-marginal value
is the unweighted mean of a condition's level means (so unequal survivor counts per level do not
tilt it). Ranks, the mean rank and "best" come from :mod:`ray_knowsim.stats.ranks` and the
intervals from :mod:`ray_knowsim.stats.descriptive` (item-clustered), the same functions the
run's ``tables/`` use: the report's mean rank over its four metrics (KG or NKG, DC, CO, IQ) is
the tables' ``mean_rank`` (``mean_rank_es`` for the early-stop variant), both from
:func:`ray_knowsim.stats.ranks.paper_mean_ranks`. The ★ of a metric's cell is not rank 1 on the
mean: it marks a condition that significantly beats every other condition on the item win rate
there (:func:`apply_stars`, from compare's verdicts or an adaptive run's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ray_knowsim.report.aggregate import RunSummary
from ray_knowsim.report.metrics import MetricSpec
from ray_knowsim.stats.descriptive import ClusteredMean, Moments
from ray_knowsim.stats.coverage import interval_coverage
from ray_knowsim.stats.ranks import best_of, paper_mean_ranks


@dataclass
class Cell:
    moments: Moments
    ci: ClusteredMean | None = None  # the item-clustered 95 % interval
    rank: int | None = None
    best: bool = False

    @property
    def value(self) -> float | None:
        return self.moments.value


@dataclass
class LevelRow:
    condition: str
    n: int  # sessions with status ok in this cell
    cells: dict[str, Cell]  # metric key -> cell
    mean_rank: float | None = None
    best_rank: bool = False
    ranks_used: int = 0  # metrics with a rank (mean rank averages these)


@dataclass
class LevelBlock:
    level: str
    rows: list[LevelRow]


def per_level_table(summary: RunSummary, specs: Sequence[MetricSpec]) -> list[LevelBlock]:
    """One block per level; rows in condition order; ranks and best marks within the level."""
    blocks = []
    for level in summary.levels:
        conds = [c for c in summary.conditions if summary.status.get((c, level))]
        rows = [
            LevelRow(c, summary.n_ok(c, level), {s.key: Cell(summary.cell(c, level, s.column), summary.interval(c, [level], s.column))
                                                 for s in specs})
            for c in conds
        ]
        _rank_rows(rows, specs)
        blocks.append(LevelBlock(level, rows))
    return blocks


@dataclass
class MarginalRow:
    condition: str
    n: int
    values: dict[str, float | None]
    ranks: dict[str, int | None]
    intervals: dict[str, ClusteredMean]  # metric key -> the item-clustered mean and 95 % CI
    levels_used: dict[str, list[str]]  # metric key -> levels that had a value
    mean_rank: float | None = None
    best: dict[str, bool] = field(default_factory=dict)
    best_rank: bool = False
    ranks_used: int = 0

    def missing_levels(self, all_levels: Sequence[str]) -> list[str]:
        used = set().union(*self.levels_used.values()) if self.levels_used else set()
        return [lv for lv in all_levels if lv not in used]


def marginal_table(summary: RunSummary, specs: Sequence[MetricSpec]) -> list[MarginalRow]:
    """Level-marginalised means, per-metric ranks, mean rank; sorted by mean rank (then name)."""
    rows = []
    for c in summary.conditions:
        values, used, intervals = {}, {}, {}
        for s in specs:
            intervals[s.key] = summary.interval(c, summary.levels, s.column)
            values[s.key] = intervals[s.key].mean if intervals[s.key].n else None
            used[s.key] = [lv for lv in summary.levels if summary.cell(c, lv, s.column).n]
        n = sum(summary.n_ok(c, lv) for lv in summary.levels)
        rows.append(MarginalRow(c, n, values, {}, intervals, used))
    ranks, means = paper_mean_ranks({s.column: {r.condition: r.values[s.key] for r in rows} for s in specs})
    for r in rows:
        for s in specs:
            r.ranks[s.key] = ranks[s.column][r.condition]
            r.best[s.key] = False  # the star: apply_stars (a condition that beats every other), not rank 1
        r.mean_rank, r.ranks_used = means[r.condition].value, means[r.condition].used
    top = best_of({r.condition: r.mean_rank for r in rows})
    for r in rows:
        r.best_rank = r.condition in top
    rows.sort(key=lambda r: (r.mean_rank is None, r.mean_rank if r.mean_rank is not None else 0.0, r.condition))
    return rows


def _rank_rows(rows: list[LevelRow], specs: Sequence[MetricSpec]) -> None:
    ranks, means = paper_mean_ranks({s.column: {r.condition: r.cells[s.key].value for r in rows} for s in specs})
    for r in rows:
        for s in specs:
            r.cells[s.key].rank = ranks[s.column][r.condition]
            r.cells[s.key].best = False  # set from the verdicts (apply_stars)
        r.mean_rank, r.ranks_used = means[r.condition].value, means[r.condition].used
    top = best_of({r.condition: r.mean_rank for r in rows})
    for r in rows:
        r.best_rank = r.condition in top


def apply_stars(per_level: list[LevelBlock], marginal: list[MarginalRow], specs: Sequence[MetricSpec],
                stars: dict[tuple[str, str], str]) -> None:
    """Mark the ★ cells: ``stars[(scope, metric column)]`` = the condition that significantly
    beats every other there (scope: a level, or "all" for the marginal); no entry, no star."""
    for block in per_level:
        for r in block.rows:
            for s in specs:
                r.cells[s.key].best = stars.get((block.level, s.column)) == r.condition
    for r in marginal:
        for s in specs:
            r.best[s.key] = stars.get(("all", s.column)) == r.condition


def coverage_note(per_level: list[LevelBlock]) -> str | None:
    """How far the intervals of these cells fall short of 95 % at their fewest items, as measured
    on KG-like data (:func:`ray_knowsim.stats.coverage.interval_coverage`); None when no cell has an
    interval or the measurement says nothing at that size."""
    items = [cell.ci.n_items for b in per_level for r in b.rows for cell in r.cells.values()
             if cell.ci is not None and cell.ci.n_items >= 2]
    if not items:
        return None
    cov = interval_coverage(min(items))
    if cov.measured is None or cov.shortfall <= 0:
        return None
    return f"Coverage at these item counts: {cov.line()}; more items close the gap."


@dataclass
class FailureRow:
    level: str
    condition: str
    conversations: int
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def share(self, mode: str) -> float | None:
        return self.counts[mode] / self.total if self.total else None

    def per_conversation(self, mode: str) -> float | None:
        return self.counts[mode] / self.conversations if self.conversations else None


def failure_table(summary: RunSummary) -> list[FailureRow]:
    """Failure-mode counts per (level, condition), in table order; cells without state skipped."""
    out = []
    for level in summary.levels:
        for c in summary.conditions:
            counts = summary.failure_modes.get((c, level))
            if counts is not None and sum(counts.values()) > 0:
                out.append(FailureRow(level, c, summary.n_ok(c, level), dict(counts)))
    return out
