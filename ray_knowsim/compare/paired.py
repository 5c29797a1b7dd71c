"""Paired comparisons of conditions from session rows (pure: pandas in, pandas out; no I/O).

Input: one row per ok session with ``task, item_id, knowledge_level, trial, match, condition`` and
the metric columns; ``match`` identifies the starting point of a cell (the initial state), so two
sessions pair only when they are the same task, item, level, trial AND start from the same state.

Output tables (every row validated by a pydantic model below):

* ``paired`` — per (task, knowledge_level, metric) and pair of conditions (a before b in the
  condition order): n_pairs matched cells, mean_diff = mean(a − b) over them, the cluster-bootstrap
  percentile CI over items (``ci_low/ci_high``; ``ci_low_adj/ci_high_adj`` at level
  1 − (1 − ci_level)/m, Bonferroni-simultaneous over the family, from the bootstrap SE with a
  normal quantile — a percentile bound that far out would rest on a handful of replicates), the exact sign test's p and its Holm adjustment.
  ``knowledge_level = "all"`` is the level-marginal: the mean over levels of the per-level mean
  differences (the tables' level-marginal = unweighted mean of level means); its test unit is a
  (item, trial) with the mean over levels of its cell differences; its bootstrap draws items once
  for all levels.
* ``best`` — per (task, knowledge_level, metric, condition): n, mean, bootstrap CI, rank and the
  bootstrap probability of being best (orientation per metric: CO/PO lower is better).
* ``mde`` — per paired row: the SE of the difference and the minimum detectable effect at the
  run's n (two-sided, ``alpha`` unadjusted and Holm's first step alpha/m, power ``power``).

**The Holm family** is, by default (``family="run"``), the whole comparison: every paired row of
every task, level (and the level-marginal), metric and condition pair. Every "A beats B" the
output states then holds with family-wise error <= alpha together — an A/A pair (the same tutor
under two names) is flagged anywhere with probability <= alpha. With ``family="level_metric"`` a
family is one (task, knowledge_level, metric) over its condition pairs: more power, but the error
rate is per metric and level, so over 8 metrics x 4 scopes an A/A pair is flagged somewhere far
more often than alpha (measured on the demo: once in 32 families).
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Literal, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from ray_knowsim.compare import stats as S
from ray_knowsim.model.results import LOWER_IS_BETTER
from ray_knowsim.model.states import level_order

ALL_LEVELS = "all"
DEFAULT_METRICS: tuple[str, ...] = ("kg", "nkg", "dc", "ic", "co", "po", "engagement", "iq")
#: beyond the rules' LOWER_IS_BETTER: money is also better spent less
EXTRA_LOWER_IS_BETTER = frozenset({"cost_usd"})
CELL_KEYS = ("task", "item_id", "knowledge_level", "trial", "match")


def _mean_of_levels(reps: np.ndarray) -> np.ndarray:
    """Per bootstrap replicate, the mean over the levels that drew data (NaN, quietly, where none did)."""
    have = ~np.isnan(reps)
    n = have.sum(axis=0)
    return np.where(n > 0, np.where(have, reps, 0.0).sum(axis=0) / np.maximum(n, 1), np.nan)

def higher_is_better(metric: str) -> bool:
    return metric not in LOWER_IS_BETTER and metric not in EXTRA_LOWER_IS_BETTER


class CompareOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metrics: list[str] | None = None  # None: DEFAULT_METRICS present with data
    n_boot: int = Field(2000, ge=100)
    seed: int = 0
    alpha: float = Field(0.05, gt=0, lt=1)
    power: float = Field(0.8, gt=0, lt=1)
    ci_level: float = Field(0.95, gt=0, lt=1)
    # the Holm family: "run" = every paired row of the comparison (all tasks, levels, metrics and
    # pairs); "level_metric" = one (task, knowledge_level, metric) over its condition pairs
    family: Literal["run", "level_metric"] = "run"


class PairedRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    knowledge_level: str
    metric: str
    higher_is_better: bool
    condition_a: str
    condition_b: str
    n_pairs: int
    n_items: int
    mean_a: float
    mean_b: float
    mean_diff: float  # a - b
    ci_low: float
    ci_high: float
    ci_low_adj: float  # mean_diff -/+ z(1 - (1 - ci_level) / (2 m)) * se: Bonferroni-simultaneous over the family
    ci_high_adj: float
    se: float  # bootstrap SE of mean_diff
    n_pos: int  # pairs with a > b
    n_neg: int
    p_value: float  # exact two-sided sign test
    p_holm: float
    family_size: int
    significant: bool  # p_holm < alpha
    better: str | None  # the condition that beats the other (orientation-aware), when significant


class BestRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    knowledge_level: str
    metric: str
    higher_is_better: bool
    condition: str
    n: int
    mean: float
    ci_low: float
    ci_high: float
    rank: float  # 1 = best ("min" ties)
    prob_best: float


class MdeRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    knowledge_level: str
    metric: str
    condition_a: str
    condition_b: str
    n_pairs: int
    n_items: int
    sd_diff: float
    se: float
    alpha: float
    power: float
    mde: float
    mde_holm: float  # at alpha / family_size (Holm's first, strictest step)


def pick_metrics(sessions: pd.DataFrame, wanted: Sequence[str] | None) -> list[str]:
    if wanted:
        missing = [m for m in wanted if m not in sessions.columns]
        if missing:
            raise ValueError(f"metrics not in the session rows: {missing}")
        return list(wanted)
    return [m for m in DEFAULT_METRICS if m in sessions.columns and sessions[m].notna().any()]


def _f(x: float) -> float:
    return float(x) if x is not None and np.isfinite(x) else math.nan


def analyse(sessions: pd.DataFrame, conditions: Sequence[str] | None = None,
            options: CompareOptions | None = None) -> dict[str, pd.DataFrame]:
    """The ``paired``, ``best`` and ``mde`` tables (see the module docstring)."""
    opts = options or CompareOptions()
    metrics = pick_metrics(sessions, opts.metrics)
    conds = list(conditions) if conditions is not None else list(dict.fromkeys(sessions["condition"]))
    paired: list[dict] = []
    best: list[dict] = []
    mdes: list[dict] = []
    for task in sorted(sessions["task"].unique()):
        part = sessions[sessions["task"] == task]
        items = sorted(part["item_id"].astype(str).unique())
        item_pos = {it: k for k, it in enumerate(items)}
        weights = S.item_weights(len(items), opts.n_boot, opts.seed)
        levels = level_order(part["knowledge_level"].unique())
        here = [c for c in conds if c in set(part["condition"])]
        for metric in metrics:
            hib = higher_is_better(metric)
            wide = part.pivot_table(index=list(CELL_KEYS[1:]), columns="condition", values=metric, aggfunc="mean")
            wide = wide.reindex(columns=here)
            blocks = _task_metric(task, metric, hib, wide, levels, here, item_pos, weights, opts)
            paired += blocks[0]
            best += blocks[1]
    mdes = _adjust(paired, opts)
    return {
        "paired": _frame(paired, PairedRow),
        "best": _frame(best, BestRow),
        "mde": _frame(mdes, MdeRow),
    }


def _frame(rows: list[dict], model: type[BaseModel]) -> pd.DataFrame:
    checked = [model(**r).model_dump() for r in rows]
    return pd.DataFrame(checked, columns=list(model.model_fields))


def _task_metric(task, metric, hib, wide, levels, conds, item_pos, weights, opts):
    n_items_total = len(item_pos)
    # per level and condition: replicate means of the condition's own cells
    level_reps: dict[str, dict[str, np.ndarray]] = {}
    level_stats: dict[str, dict[str, tuple[int, float]]] = {}
    # per level and pair: diffs (with item index and (item, trial) unit) and replicate mean diffs
    pair_data: dict[str, dict[tuple[str, str], tuple[np.ndarray, np.ndarray, pd.Series]]] = {}
    for level in levels:
        lv = wide.xs(level, level="knowledge_level") if level in wide.index.get_level_values("knowledge_level") else None
        level_reps[level], level_stats[level], pair_data[level] = {}, {}, {}
        if lv is None:
            continue
        idx = np.array([item_pos[str(i)] for i in lv.index.get_level_values("item_id")], dtype=np.int64)
        for c in conds:
            v = lv[c].to_numpy(dtype=float)
            sums, counts = S.cluster_sums(idx, v, n_items_total)
            level_reps[level][c] = S.cluster_means(weights, sums, counts)
            have = ~np.isnan(v)
            level_stats[level][c] = (int(have.sum()), float(v[have].mean()) if have.any() else math.nan)
        for a, b in combinations(conds, 2):
            d = (lv[a] - lv[b]).to_numpy(dtype=float)
            keep = ~np.isnan(d)
            units = pd.Series(d[keep], index=pd.MultiIndex.from_arrays(
                [lv.index.get_level_values("item_id")[keep], lv.index.get_level_values("trial")[keep]]))
            # the pair's bootstrap replicates, drawn once: its level row and the all-levels row use them
            reps = S.cluster_means(weights, *S.cluster_sums(idx[keep], d[keep], n_items_total)) if keep.any() else None
            pair_data[level][(a, b)] = (d[keep], idx[keep], units, reps)

    paired, best, mdes = [], [], []
    pairs = list(combinations(conds, 2))
    for level in [*levels, ALL_LEVELS]:
        rows = []
        for a, b in pairs:
            if level == ALL_LEVELS:
                per = [pair_data[lv][(a, b)] for lv in levels if (a, b) in pair_data[lv] and pair_data[lv][(a, b)][0].size]
                if not per:
                    continue
                means = [float(d.mean()) for d, _, _, _ in per]
                mean_diff = float(np.mean(means))
                reps = _mean_of_levels(np.vstack([pair_reps for _, _, _, pair_reps in per]))
                units = pd.concat([u for _, _, u, _ in per]).groupby(level=[0, 1]).mean()
                test_values = units.to_numpy(dtype=float)
                n_items = int(units.index.get_level_values(0).nunique())
                ma = float(np.nanmean([level_stats[lv][a][1] for lv in levels if a in level_stats[lv]]))
                mb = float(np.nanmean([level_stats[lv][b][1] for lv in levels if b in level_stats[lv]]))
            else:
                if (a, b) not in pair_data[level] or pair_data[level][(a, b)][0].size == 0:
                    continue
                d, ix, _, reps = pair_data[level][(a, b)]
                mean_diff = float(d.mean())
                test_values = d
                n_items = int(np.unique(ix).size)
                ma, mb = level_stats[level][a][1], level_stats[level][b][1]
            p, pos, neg = S.sign_test(test_values)
            lo, hi = S.percentile_ci(reps, opts.ci_level)
            rows.append(dict(task=task, knowledge_level=level, metric=metric, higher_is_better=hib, condition_a=a,
                             condition_b=b, n_pairs=int(test_values.size), n_items=n_items, mean_a=_f(ma), mean_b=_f(mb),
                             mean_diff=_f(mean_diff), ci_low=lo, ci_high=hi, se=S.bootstrap_se(reps), n_pos=pos, n_neg=neg,
                             p_value=p, _reps=reps, _sd=float(np.std(test_values, ddof=1)) if test_values.size > 1 else math.nan))
        paired += rows
        # best / leaderboard rows of this scope
        if level == ALL_LEVELS:
            have = [c for c in conds if any(c in level_stats[lv] and level_stats[lv][c][0] for lv in levels)]
            reps_by = {c: np.nanmean(np.vstack([level_reps[lv][c] for lv in levels if c in level_reps[lv] and level_stats[lv][c][0]]), axis=0)
                       for c in have}
            stat = {c: (sum(level_stats[lv][c][0] for lv in levels if c in level_stats[lv]),
                        float(np.nanmean([level_stats[lv][c][1] for lv in levels if c in level_stats[lv] and level_stats[lv][c][0]])))
                    for c in have}
        else:
            have = [c for c in conds if c in level_stats[level] and level_stats[level][c][0]]
            reps_by = {c: level_reps[level][c] for c in have}
            stat = {c: level_stats[level][c] for c in have}
        if not have:
            continue
        pb = S.prob_best(np.column_stack([reps_by[c] for c in have]), hib)
        ranks = pd.Series([stat[c][1] for c in have]).rank(method="min", ascending=not hib).to_numpy()
        for c, prob, rank in zip(have, pb, ranks):
            lo, hi = S.percentile_ci(reps_by[c], opts.ci_level)
            best.append(dict(task=task, knowledge_level=level, metric=metric, higher_is_better=hib, condition=c,
                             n=int(stat[c][0]), mean=_f(stat[c][1]), ci_low=lo, ci_high=hi, rank=_f(rank), prob_best=_f(prob)))
    return paired, best


def family_key(row: dict, family: str) -> tuple:
    return () if family == "run" else (row["task"], row["knowledge_level"], row["metric"])


def _adjust(paired: list[dict], opts: CompareOptions) -> list[dict]:
    """Holm within each family; simultaneous CIs, verdicts and MDE rows. Mutates ``paired``."""
    families: dict[tuple, list[dict]] = {}
    for r in paired:
        families.setdefault(family_key(r, opts.family), []).append(r)
    mdes = []
    for rows in families.values():
        m = len(rows)
        for r, ph in zip(rows, S.holm([r["p_value"] for r in rows])):
            reps, sd = r.pop("_reps"), r.pop("_sd")
            r["ci_low_adj"], r["ci_high_adj"] = S.normal_ci(r["mean_diff"], r["se"], 1.0 - (1.0 - opts.ci_level) / max(m, 1))
            r["p_holm"], r["family_size"] = float(ph), m
            r["significant"] = bool(ph < opts.alpha)
            r["better"] = _better(r, opts.alpha)
            mdes.append(dict(task=r["task"], knowledge_level=r["knowledge_level"], metric=r["metric"],
                             condition_a=r["condition_a"], condition_b=r["condition_b"], n_pairs=r["n_pairs"],
                             n_items=r["n_items"], sd_diff=_f(sd), se=_f(r["se"]), alpha=opts.alpha, power=opts.power,
                             mde=S.mde(r["se"], opts.alpha, opts.power),
                             mde_holm=S.mde(r["se"], opts.alpha / max(m, 1), opts.power)))
    return mdes


def _better(r: dict, alpha: float) -> str | None:
    if not r["p_holm"] < alpha or not np.isfinite(r["mean_diff"]) or r["mean_diff"] == 0:
        return None
    majority = np.sign(r["n_pos"] - r["n_neg"])
    if majority != np.sign(r["mean_diff"]):
        return None  # the mean and the majority of pairs disagree: no verdict
    a_higher = r["mean_diff"] > 0
    return r["condition_a"] if a_higher == r["higher_is_better"] else r["condition_b"]


def beats_matrix(paired: pd.DataFrame, task: str, level: str) -> tuple[list[str], dict[tuple[str, str], list[str]]]:
    """Conditions and, per ordered (winner, loser), the metrics on which the winner significantly
    beats the loser after Holm correction (from the ``paired`` table)."""
    part = paired[(paired["task"] == task) & (paired["knowledge_level"] == level)]
    conds = list(dict.fromkeys([*part["condition_a"], *part["condition_b"]]))
    wins: dict[tuple[str, str], list[str]] = {}
    for _, r in part.iterrows():
        if r["better"] is None or (isinstance(r["better"], float) and math.isnan(r["better"])):
            continue
        loser = r["condition_b"] if r["better"] == r["condition_a"] else r["condition_a"]
        wins.setdefault((r["better"], loser), []).append(r["metric"])
    return conds, wins


__all__ = [
    "ALL_LEVELS", "BestRow", "CELL_KEYS", "CompareOptions", "DEFAULT_METRICS", "MdeRow", "PairedRow", "analyse",
    "beats_matrix", "higher_is_better", "pick_metrics",
]
