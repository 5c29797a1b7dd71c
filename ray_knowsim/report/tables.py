"""The two results tables as plain data: per level (paper Table 4) and level-marginalised (Table 16).

Rules (spec §11, recommendation): means per (condition, level) first; the level-marginal value
is the unweighted mean of a condition's level means (so unequal survivor counts per level do not
tilt it). The intervals come from :mod:`ray_knowsim.stats.descriptive` (item-clustered), the
same functions the run's ``tables/`` use.

What orders conditions here is the verdicts' quantity, never the means (issue 28: a decision
never contradicts the table beside it): a cell's ``position`` and ★ come from the run's verdicts
(:func:`apply_verdicts`: the leaderboard of :func:`ray_knowsim.stats.leaderboard.board` on the
item win rate, from compare's verdicts or an adaptive run's own); without verdicts a cell has no
position. Rows are in the run's condition order. The paper's mean rank (ranks of the MEANS,
:func:`ray_knowsim.stats.ranks.paper_mean_ranks`, the tables' ``mean_rank``) is kept on each row
(``rank_of_mean``, ``mean_rank``) for its own, labelled table (:func:`paper_rank_rows`), not for
the results tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ray_knowsim.report.aggregate import RunSummary
from ray_knowsim.report.metrics import MetricSpec
from ray_knowsim.stats.descriptive import ClusteredMean, Moments
from ray_knowsim.stats.coverage import interval_coverage
from ray_knowsim.stats.leaderboard import TIER_RULE, Board
from ray_knowsim.stats.ranks import paper_mean_ranks


ALL_LEVELS_SCOPE = "all levels"


@dataclass
class Cell:
    moments: Moments
    ci: ClusteredMean | None = None  # the item-clustered 95 % interval
    rank_of_mean: int | None = None  # the paper's figure: shown only in its own table
    position: int | None = None  # on the item win rate (apply_verdicts); None without verdicts
    best: bool = False  # ★: significantly beats every other condition (apply_verdicts)

    @property
    def value(self) -> float | None:
        return self.moments.value


@dataclass
class LevelRow:
    condition: str
    n: int  # sessions with status ok in this cell
    cells: dict[str, Cell]  # metric key -> cell
    mean_rank: float | None = None  # the paper's mean rank (its own table only)
    ranks_used: int = 0  # metrics with a rank (mean rank averages these)


@dataclass
class LevelBlock:
    level: str
    rows: list[LevelRow]


def per_level_table(summary: RunSummary, specs: Sequence[MetricSpec]) -> list[LevelBlock]:
    """One block per level; rows in condition order; the paper's ranks of means within the level."""
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
    ranks_of_mean: dict[str, int | None]  # the paper's figure: shown only in its own table
    intervals: dict[str, ClusteredMean]  # metric key -> the item-clustered mean and 95 % CI
    levels_used: dict[str, list[str]]  # metric key -> levels that had a value
    mean_rank: float | None = None  # the paper's mean rank (its own table only)
    positions: dict[str, int | None] = field(default_factory=dict)  # on the item win rate (apply_verdicts)
    best: dict[str, bool] = field(default_factory=dict)  # ★ (apply_verdicts)
    ranks_used: int = 0

    def missing_levels(self, all_levels: Sequence[str]) -> list[str]:
        used = set().union(*self.levels_used.values()) if self.levels_used else set()
        return [lv for lv in all_levels if lv not in used]


def marginal_table(summary: RunSummary, specs: Sequence[MetricSpec]) -> list[MarginalRow]:
    """Level-marginalised means and intervals, in the run's condition order (no order on the means:
    positions come from the verdicts, :func:`apply_verdicts`); the paper's ranks kept for its table."""
    rows = []
    for c in summary.conditions:
        values, used, intervals = {}, {}, {}
        for s in specs:
            intervals[s.key] = summary.interval(c, summary.levels, s.column)
            values[s.key] = intervals[s.key].mean if intervals[s.key].n else None
            used[s.key] = [lv for lv in summary.levels if summary.cell(c, lv, s.column).n]
        n = sum(summary.n_ok(c, lv) for lv in summary.levels)
        rows.append(MarginalRow(c, n, values, {}, intervals, used))
    ranks, means = paper_mean_ranks({s.column: {r.condition: r.values[s.key] for r in rows} for s in specs}, _ranked(specs))
    for r in rows:
        for s in specs:
            r.ranks_of_mean[s.key] = ranks.get(s.column, {}).get(r.condition)
            r.positions[s.key], r.best[s.key] = None, False  # from the verdicts (apply_verdicts), never from the means
        r.mean_rank, r.ranks_used = means[r.condition].value, means[r.condition].used
    return rows


def _ranked(specs: Sequence[MetricSpec]) -> list[str]:
    """The columns the paper's mean rank is over (an outside metric is shown, never ranked)."""
    return [s.column for s in specs if s.mean_rank]


def _rank_rows(rows: list[LevelRow], specs: Sequence[MetricSpec]) -> None:
    ranks, means = paper_mean_ranks({s.column: {r.condition: r.cells[s.key].value for r in rows} for s in specs}, _ranked(specs))
    for r in rows:
        for s in specs:
            r.cells[s.key].rank_of_mean = ranks.get(s.column, {}).get(r.condition)
            r.cells[s.key].position, r.cells[s.key].best = None, False  # from the verdicts (apply_verdicts)
        r.mean_rank, r.ranks_used = means[r.condition].value, means[r.condition].used


def apply_verdicts(per_level: list[LevelBlock], marginal: list[MarginalRow], specs: Sequence[MetricSpec],
                   boards: dict[tuple[str, str], Board]) -> None:
    """Positions and ★ from the verdicts' leaderboards: ``boards[(scope, metric column)]`` (scope:
    a level, or "all" for the marginal) is that metric's board on the item win rate; a cell gets
    the condition's position on it, and the ★ when the board's star is that condition (it
    significantly beats every other there). No board, no position and no star."""
    def mark(scope: str, column: str, condition: str) -> tuple[int | None, bool]:
        b = boards.get((scope, column))
        if b is None or condition not in b.position:
            return None, False
        return b.position[condition], b.star == condition

    for block in per_level:
        for r in block.rows:
            for s in specs:
                r.cells[s.key].position, r.cells[s.key].best = mark(block.level, s.column, r.condition)
    for r in marginal:
        for s in specs:
            r.positions[s.key], r.best[s.key] = mark("all", s.column, r.condition)


def has_positions(per_level: list[LevelBlock], marginal: list[MarginalRow]) -> tuple[bool, bool]:
    """(the marginal table has positions, the per-level table has): positions exist only where
    verdicts do (:func:`apply_verdicts`); an adaptive run decides per level, so its marginal has none."""
    return (any(p is not None for r in marginal for p in r.positions.values()),
            any(cell.position is not None for b in per_level for r in b.rows for cell in r.cells.values()))


def position_lead(here: bool, elsewhere: bool) -> str:
    """What a results table says about its positions: they are there, they are in the other table
    (verdicts only per level, or only over all levels), or there are none on this page."""
    return POSITION_LEAD if here else OTHER_TABLE_LEAD if elsewhere else NO_POSITION_LEAD


POSITION_LEAD = ("Position = the condition's tier on that metric's leaderboard on the item win rate, the quantity the verdicts "
                 f"test: {TIER_RULE} (see Verdicts). Rows are in the run's condition order; the means and intervals "
                 "describe and order nothing.")
OTHER_TABLE_LEAD = ("No positions or ★ in this table: the run's verdicts are at the other table's scope (an adaptive run decides "
                    "per level and metric), and the means and intervals here describe and order nothing. Rows are in the "
                    "run's condition order.")
NO_POSITION_LEAD = ("No positions or ★ here: they come from verdicts on the item win rate, and none were computed for this "
                    "page; the means and intervals describe and order nothing. Rows are in the run's condition order.")


@dataclass(frozen=True)
class PaperRankRow:
    scope: str  # "all levels" or a level
    condition: str
    ranks: dict[str, int | None]  # metric key -> rank of the mean
    mean_rank: float | None
    ranks_used: int


def paper_rank_rows(per_level: list[LevelBlock], marginal: list[MarginalRow], specs: Sequence[MetricSpec]) -> list[PaperRankRow]:
    """The paper's mean rank table (level-marginal first, then each level), rows by mean rank within
    a scope: the one place the report shows ranks of means, always under
    :data:`ray_knowsim.stats.ranks.PAPER_MEAN_RANK_NOTE`."""
    def ordered(rows: list[PaperRankRow]) -> list[PaperRankRow]:
        return sorted(rows, key=lambda r: (r.mean_rank is None, r.mean_rank or 0.0, r.condition))

    out = ordered([PaperRankRow(ALL_LEVELS_SCOPE, r.condition, dict(r.ranks_of_mean), r.mean_rank, r.ranks_used) for r in marginal])
    for block in per_level:
        out += ordered([PaperRankRow(block.level, r.condition, {s.key: r.cells[s.key].rank_of_mean for s in specs}, r.mean_rank,
                                     r.ranks_used) for r in block.rows])
    return out


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
