"""The run's results tables from per-item sums: the one place their means, intervals and ranks
are computed (the run's Ray Data reduction, ``tables/reduce.py``, and the report's streaming pass
hand their sums here, so the terminal, ``tables/`` and the report show the same numbers).

Input ``item_sums``: one row per (task, condition, knowledge_level, item_id) with, per metric
``m``, ``m__n`` (values), ``m__s1`` (sum) and ``m__s2`` (sum of squares) over the ok sessions of
that item. Output columns per metric: ``m`` (mean), ``m_n``, ``m_items``, ``m_sd`` (per level:
sessions' standard deviation), ``m_ci_low`` / ``m_ci_high`` (95 %, item-clustered, see
:mod:`.descriptive`); the marginal adds ``m_levels``.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ray_knowsim.schema.states import level_order
from ray_knowsim.stats.descriptive import clustered_mean, sample_sd
from ray_knowsim.stats.ranks import paper_mean_ranks

CELL = ("task", "condition", "knowledge_level")
MARGINAL = "marginal"


def _per_item(group: pd.DataFrame, metric: str, levels: Sequence[str] | None, items: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(levels, items) arrays of value counts and sums of one metric."""
    lv = list(levels) if levels is not None else [None]
    counts = np.zeros((len(lv), len(items)))
    sums = np.zeros((len(lv), len(items)))
    pos = {it: k for k, it in enumerate(items)}
    row_of = {v: k for k, v in enumerate(lv)}
    li = [row_of[v] for v in group["knowledge_level"]] if levels is not None else [0] * len(group)
    ii = [pos[i] for i in group["item_id"]]
    np.add.at(counts, (li, ii), pd.to_numeric(group[f"{metric}__n"]).to_numpy(dtype=float))
    np.add.at(sums, (li, ii), pd.to_numeric(group[f"{metric}__s1"]).fillna(0.0).to_numpy(dtype=float))
    return counts, sums


def level_table(item_sums: pd.DataFrame, metrics: Iterable[str]) -> pd.DataFrame:
    """Per (task, condition, level): mean, n, items, sd and the item-clustered 95 % CI per metric."""
    rows = []
    metrics = list(metrics)
    for key, g in item_sums.groupby(list(CELL), sort=False):
        items = sorted(map(str, g["item_id"].unique()))
        g = g.assign(item_id=g["item_id"].astype(str))
        row = dict(zip(CELL, key))
        for m in metrics:
            counts, sums = _per_item(g, m, None, items)
            cm = clustered_mean(counts, sums)
            n = int(counts.sum())
            row[m] = cm.mean
            row[f"{m}_n"] = n
            row[f"{m}_items"] = cm.n_items
            row[f"{m}_sd"] = sample_sd(n, float(sums.sum()), float(pd.to_numeric(g[f"{m}__s2"]).fillna(0.0).sum()))
            row[f"{m}_ci_low"], row[f"{m}_ci_high"] = cm.ci_low, cm.ci_high
        rows.append(row)
    return pd.DataFrame(rows, columns=[*CELL, *[f"{m}{s}" for m in metrics for s in ("", "_n", "_items", "_sd", "_ci_low", "_ci_high")]])


def marginal_table(item_sums: pd.DataFrame, metrics: Iterable[str]) -> pd.DataFrame:
    """Per (task, condition): the unweighted mean of the level means and its item-clustered CI."""
    rows = []
    metrics = list(metrics)
    for (task, cond), g in item_sums.groupby(["task", "condition"], sort=True):
        g = g.assign(item_id=g["item_id"].astype(str))
        items = sorted(g["item_id"].unique())
        levels = level_order(g["knowledge_level"].unique())
        row = {"task": task, "condition": cond, "n_levels": len(levels)}
        for m in metrics:
            counts, sums = _per_item(g, m, levels, items)
            cm = clustered_mean(counts, sums)
            row[m] = cm.mean
            row[f"{m}_n"] = int(counts.sum())
            row[f"{m}_levels"] = cm.levels
            row[f"{m}_items"] = cm.n_items
            row[f"{m}_ci_low"], row[f"{m}_ci_high"] = cm.ci_low, cm.ci_high
        rows.append(row)
    return pd.DataFrame(rows, columns=["task", "condition", "n_levels",
                                       *[f"{m}{s}" for m in metrics for s in ("", "_n", "_levels", "_items", "_ci_low", "_ci_high")]])


def rank_block(values: pd.DataFrame, ranked: Sequence[str], mean_ranks: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """One table's ranks: ``rank_<m>`` per ranked metric present, and per entry of ``mean_ranks``
    (output column -> metrics) the mean of those ranks and ``<column>_used`` (how many entered),
    all from :func:`ray_knowsim.stats.ranks.paper_mean_ranks` (the one mean rank)."""
    out = values[["condition"]].reset_index(drop=True).copy()
    conds = list(out["condition"])
    means = {m: dict(zip(conds, values[m].to_numpy(dtype=float))) for m in ranked if m in values.columns}
    ranks, _ = paper_mean_ranks(means)
    for m, r in ranks.items():
        out[f"rank_{m}"] = [float(r[c]) if r[c] is not None else np.nan for c in conds]
    for column, ms in mean_ranks.items():
        _, got = paper_mean_ranks(means, ms)
        out[column] = pd.to_numeric(pd.Series([got[c].value if c in got else None for c in conds], dtype=object), errors="coerce")
        out[f"{column}_used"] = pd.Series([got[c].used if c in got else 0 for c in conds], dtype="int64")
    return out


def rank_table(levels: pd.DataFrame, marginal: pd.DataFrame, ranked: Sequence[str],
               mean_ranks: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Per (task, scope) with scope = each level and "marginal": the ranks of :func:`rank_block`,
    rows by mean rank (the first entry of ``mean_ranks``), then condition."""
    first = next(iter(mean_ranks))
    blocks = []
    for task, g in marginal.groupby("task", sort=True):
        lv = levels[levels["task"] == task]
        scopes = [(MARGINAL, g)] + [(level, lv[lv["knowledge_level"] == level])
                                    for level in level_order(lv["knowledge_level"].unique())]
        for scope, part in scopes:
            block = rank_block(part, ranked, mean_ranks)
            block.insert(0, "scope", scope)
            block.insert(0, "task", task)
            blocks.append(block.sort_values([first, "condition"], na_position="last"))
    if not blocks:
        return pd.DataFrame(columns=["task", "scope", "condition", *mean_ranks])
    return pd.concat(blocks, ignore_index=True)


__all__ = ["CELL", "MARGINAL", "level_table", "marginal_table", "rank_block", "rank_table"]
