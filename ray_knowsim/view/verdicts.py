"""What a comparison folder decided, shaped for its page: verdict sentences and the leaderboard (pure).

Why here and not in the page: compare's outputs changed shape (issue 28: a sentence and counts on
every verdict in ``compare.json``, a leaderboard per metric on the item win rate); folders written
before still hold a wide leaderboard (one row per condition, ``<metric>_rank``) and verdicts only
as ``paired`` rows. Both are read into one shape, and an old folder's verdicts are worded by the
same function compare uses (:func:`ray_knowsim.compare.sentences.verdict_sentence`), so the page
never shows two wordings of one verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

from ray_knowsim.compare.paired import ALL_LEVELS
from ray_knowsim.compare.sentences import verdict_sentence
from ray_knowsim.schema.states import level_order
from ray_knowsim.schema.metrics import names as metric_names
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS, higher_is_better

#: leaderboard metrics in the order shown: the mean rank's first (KG, DC, CO, IQ), then the rest
METRIC_ORDER = (*MEAN_RANK_METRICS, *metric_names(mean_rank=False), "cost_usd")
#: said under a leaderboard read from an older folder
OLD_BOARD = ("was written by an earlier `ray-knowsim compare`: its positions are the ranks of the means, not the item win rate "
             "of the verdicts (compare the runs again for that leaderboard)")


@dataclass
class Verdict:
    task: str
    level: str
    metric: str
    sentence: str
    equivalent: bool = False


@dataclass
class BoardCell:
    position: float | None
    star: bool
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int | None
    beats: str = ""
    cycle: str = ""
    tier_note: str = ""  # who beats it, n.s. against the tier above (stats.leaderboard.tier_note)


@dataclass
class Board:
    """One task's leaderboard: conditions (in name order: each metric has its own positions on the
    item win rate, so no one row order is claimed) x metrics, and the paper's mean rank apart."""

    task: str
    metrics: list[str]
    conditions: list[str]
    cells: dict[tuple[str, str], BoardCell]  # (condition, metric) -> cell
    mean_rank: dict[str, float | None]
    mean_rank_in_run: dict[str, float | None]
    runs: dict[str, str]
    ranked_set: str = ""
    notes: list[str] = field(default_factory=list)
    detectable: dict[str, str] = field(default_factory=dict)  # metric -> the family's smallest detectable effect, in words


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _counts(row: pd.Series) -> tuple[int, int, int]:
    """(wins, losses, ties) of items from ``condition_a``'s side: a win is a better item on the
    metric, so where lower is better it is a negative difference (older rows hold only n_pos/n_neg
    of the difference a - b)."""
    if "wins" in row and _num(row["wins"]) is not None:
        return int(row["wins"]), int(row["losses"]), int(row["ties"])
    higher = bool(row["higher_is_better"]) if "higher_is_better" in row else higher_is_better(str(row["metric"]))
    pos, neg = int(row["n_pos"]), int(row["n_neg"])
    return (pos, neg, int(row["n_tied"])) if higher else (neg, pos, int(row["n_tied"]))


def verdicts(info: dict[str, Any], paired: pd.DataFrame | None) -> list[Verdict]:
    """The significant (and equivalent) verdicts, over all levels first, then per level in the
    paper's order: from ``compare.json``'s records, else (older folders) from ``paired``."""
    records: Iterable[dict[str, Any]] = info.get("verdicts") or []
    if not records and paired is not None and not paired.empty and "significant" in paired.columns:
        old = paired[paired["significant"].astype(bool)]
        records = [{"task": r["task"], "knowledge_level": r["knowledge_level"], "metric": r["metric"], "significant": True,
                    "sentence": verdict_sentence(str(r["condition_a"]), str(r["condition_b"]), str(r["metric"]),
                                                 str(r["knowledge_level"]), *_counts(r), better=str(r["better"]), p_adj=float(r["p_adj"]))}
                   for _, r in old.iterrows()]
    out = [Verdict(str(r.get("task")), str(r.get("knowledge_level")), str(r.get("metric")), str(r.get("sentence") or ""),
                   bool(r.get("equivalent")) and not r.get("significant"))
           for r in records if r.get("significant") or r.get("equivalent")]
    levels = level_order({v.level for v in out} - {ALL_LEVELS})
    rank = {lv: k for k, lv in enumerate([ALL_LEVELS, *levels])}
    metric_rank = {m: k for k, m in enumerate(METRIC_ORDER)}
    return sorted(out, key=lambda v: (v.task, rank.get(v.level, len(rank)), metric_rank.get(v.metric, len(metric_rank)), v.metric,
                                      v.equivalent))


def _long(board: pd.DataFrame) -> pd.DataFrame:
    """An older folder's wide leaderboard (``<m>``, ``<m>_ci_low/_high``, ``<m>_rank``) as the
    current long one (one row per task, metric and condition; ``position`` = the rank of the mean)."""
    if board.empty or "metric" in board.columns:
        return board
    metrics = [c[: -len("_ci_low")] for c in board.columns if c.endswith("_ci_low") and c[: -len("_ci_low")] in board.columns]
    rows = []
    for _, r in board.iterrows():
        for m in metrics:
            rows.append({"task": r.get("task"), "metric": m, "condition": r.get("condition"), "run": r.get("run", ""),
                         "position": r.get(f"{m}_rank"), "star": False, "beats": "", "cycle": "", "mean": r.get(m),
                         "ci_low": r.get(f"{m}_ci_low"), "ci_high": r.get(f"{m}_ci_high"), "n": r.get(f"{m}_n"),
                         "mean_rank": r.get("mean_rank"), "mean_rank_in_run": math.nan, "ranked_set": OLD_BOARD})
    return pd.DataFrame(rows)


def boards(leaderboard: pd.DataFrame | None) -> list[Board]:
    """Per task, the leaderboard's conditions (name order, never the paper's mean rank: that
    orders means, not the verdicts' quantity) and its cells per metric."""
    if leaderboard is None or leaderboard.empty:
        return []
    df = _long(leaderboard)
    out = []
    for task, g in df.groupby("task", sort=True):
        present = list(dict.fromkeys(g["metric"]))
        metrics = [m for m in METRIC_ORDER if m in present] + [m for m in present if m not in METRIC_ORDER]
        per = g.drop_duplicates("condition").set_index("condition")
        mean_rank = {c: _num(per.loc[c].get("mean_rank")) for c in per.index}
        conditions = sorted(per.index)
        cells = {(r["condition"], r["metric"]): BoardCell(_num(r.get("position")), bool(r.get("star")), _num(r.get("mean")),
                                                         _num(r.get("ci_low")), _num(r.get("ci_high")),
                                                         int(r["n"]) if _num(r.get("n")) is not None else None,
                                                         str(r.get("beats") or ""), str(r.get("cycle") or ""),
                                                         str(r.get("tier_note") or "") if isinstance(r.get("tier_note"), str) else "")
                 for _, r in g.iterrows()}
        detectable = {str(m): str(x) for m, x in zip(g["metric"], g.get("detectable", pd.Series([""] * len(g), index=g.index)))
                      if isinstance(x, str) and x}
        in_run = {c: _num(per.loc[c].get("mean_rank_in_run")) for c in per.index}
        runs = {c: str(per.loc[c].get("run") or "") for c in per.index}
        ranked = next((str(x) for x in g.get("ranked_set", pd.Series(dtype=str)) if isinstance(x, str) and x), "")
        out.append(Board(str(task), metrics, conditions, cells, mean_rank, in_run, runs, ranked, detectable=detectable))
    return out


__all__ = ["Board", "BoardCell", "METRIC_ORDER", "Verdict", "boards", "verdicts"]
