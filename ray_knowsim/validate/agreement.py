"""The paper's validation procedure: do simulated condition contrasts point the way human ones do?

1. Cell means per (arm, task, level, condition, metric), human and simulated.
2. For every pair of conditions within (arm, task, level, metric), Cliff's delta of the human
   values (first condition = lower release code). Pairs with |delta| >= threshold (and delta != 0)
   are *high-signal*.
3. The simulator's contrast for the same pair is the difference of its cell means. Both contrasts
   are oriented so that positive means "the first condition is better" (CO, lower is better, is
   negated on both sides), and the pair *agrees* when the two oriented signs are equal and
   non-zero. A pair whose sim cells are missing is *not evaluable* and left out of n.
4. k agreeing of n high-signal evaluable pairs, pooled overall / per arm / task / level / metric /
   arm x task, with the one-sided exact binomial p against 50 % (Table 3).
5. Spearman rho between human and sim cell means z-normalised within (arm, task, level, metric),
   pooled the same ways (Figure 2 data).
All frames are small (one row per cell or pair); no I/O here.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd

from ray_knowsim.validate.conditions import ARMS, LEVELS, METRIC_DIRECTION, METRIC_TASKS, METRICS, TASKS, condition_order
from ray_knowsim.validate.mapping import Triple
from ray_knowsim.validate.simdata import KEY_COLUMNS
from ray_knowsim.stats.association import binomial_p_greater, cliffs_delta, sign, spearman, zscores

GROUP_COLS = ["arm", "task", "level", "metric"]
#: float slack for |delta| >= threshold (deltas are ratios of integers, thresholds decimals)
_EPS = 1e-12


def human_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Sessions frame -> long (arm, task, level, condition, metric, value); KG for math only."""
    parts = []
    for metric in METRICS:
        col = metric.lower()
        sub = frame[frame["task"].isin(METRIC_TASKS[metric]) & frame[col].notna()]
        parts.append(sub[["arm", "task", "level", "condition"]].assign(metric=metric, value=sub[col].astype(float)))
    return pd.concat(parts, ignore_index=True)


def sim_cells(agg: pd.DataFrame, mapping: dict[Triple, list[tuple[str, str]]], metric_columns: dict[str, str]) -> pd.DataFrame:
    """Aggregated sim sums -> (simulator, arm, task, level, condition, metric, n, mean, sd)."""
    rows = []
    for rec in agg.itertuples(index=False):
        r = rec._asdict()
        triple = (r["condition"], r["assistant_model"], r["assistant_strategy"])
        for arm, label in mapping.get(triple, []):
            for metric, column in metric_columns.items():
                if column == r["column"] and r["task"] in METRIC_TASKS[metric]:
                    rows.append((r["simulator"], arm, r["task"], r["knowledge_level"], label, metric, r["n"], r["sum"], r["sumsq"]))
    cols = ["simulator", "arm", "task", "level", "condition", "metric", "n", "sum", "sumsq"]
    df = pd.DataFrame(rows, columns=cols)
    if df.empty:
        return pd.DataFrame(columns=["simulator", "arm", "task", "level", "condition", "metric", "n", "mean", "sd"])
    df = df.groupby(cols[:6], as_index=False)[["n", "sum", "sumsq"]].sum()
    df["mean"] = df["sum"] / df["n"]
    df["sd"] = np.sqrt(np.maximum(df["sumsq"] / df["n"] - df["mean"] ** 2, 0.0))
    return df.drop(columns=["sum", "sumsq"])


def _simulators(sim: pd.DataFrame) -> list[str]:
    return sorted(sim["simulator"].unique().tolist()) if len(sim) else []


def cell_means(hl: pd.DataFrame, sim: pd.DataFrame) -> pd.DataFrame:
    """One row per (simulator, arm, task, level, metric, condition) with both sides' means and
    oriented z-scores (z within (simulator, arm, task, level, metric) over cells both sides have)."""
    h = hl.groupby([*GROUP_COLS, "condition"], as_index=False)["value"].agg(human_n="size", human_mean="mean", human_sd=lambda v: float(np.std(v)))
    out = []
    for simulator in _simulators(sim) or [None]:
        s = sim[sim["simulator"] == simulator].rename(columns={"n": "sim_n", "mean": "sim_mean", "sd": "sim_sd"})
        m = h.merge(s.drop(columns=["simulator"]), on=[*GROUP_COLS, "condition"], how="outer") if len(s) else h.assign(sim_n=np.nan, sim_mean=np.nan, sim_sd=np.nan)
        m.insert(0, "simulator", simulator)
        out.append(m)
    cells = pd.concat(out, ignore_index=True)
    cells["condition_code"] = [condition_order(a, c) for a, c in zip(cells["arm"], cells["condition"])]
    cells["human_z"] = np.nan
    cells["sim_z"] = np.nan
    both = cells["human_mean"].notna() & cells["sim_mean"].notna()
    if both.any():
        sub = cells[both]
        grouped = sub.groupby(["simulator", *GROUP_COLS], dropna=False)
        orient = sub["metric"].map(METRIC_DIRECTION).astype(float)
        for side in ("human", "sim"):
            z = grouped[f"{side}_mean"].transform(lambda v: zscores(v.to_numpy()))
            cells.loc[both, f"{side}_z"] = z * orient
    cells["human_n"] = cells["human_n"].fillna(0).astype(int)
    cells["sim_n"] = cells["sim_n"].fillna(0).astype(int)
    return _sort(cells, [*GROUP_COLS, "condition_code"])[
        ["simulator", *GROUP_COLS, "condition", "condition_code", "human_n", "human_mean", "human_sd", "sim_n", "sim_mean", "sim_sd", "human_z", "sim_z"]
    ]


def pair_table(hl: pd.DataFrame, sim: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """One row per (simulator, arm, task, level, metric, condition pair) with both contrasts."""
    sim_mean = {
        (r.simulator, r.arm, r.task, r.level, r.metric, r.condition): r.mean for r in sim.itertuples(index=False)
    }
    rows = []
    for key, grp in hl.groupby(GROUP_COLS):
        arm, task, level, metric = key
        o = METRIC_DIRECTION[metric]
        by_cond = {c: g["value"].to_numpy() for c, g in grp.groupby("condition")}
        conds = sorted(by_cond, key=lambda c: condition_order(arm, c))
        for a, b in combinations(conds, 2):
            delta = cliffs_delta(by_cond[a], by_cond[b])
            high = delta != 0 and abs(delta) >= threshold - _EPS
            for simulator in _simulators(sim) or [None]:
                ma = sim_mean.get((simulator, arm, task, level, metric, a))
                mb = sim_mean.get((simulator, arm, task, level, metric, b))
                evaluable = ma is not None and mb is not None
                diff = (ma - mb) if evaluable else math.nan
                s_h, s_s = sign(o * delta), sign(o * diff) if evaluable else 0
                rows.append(
                    dict(
                        simulator=simulator, arm=arm, task=task, level=level, metric=metric,
                        condition_a=a, condition_b=b, human_n_a=len(by_cond[a]), human_n_b=len(by_cond[b]),
                        cliffs_delta=delta, human_contrast=o * delta, high_signal=bool(high),
                        sim_mean_a=ma, sim_mean_b=mb, sim_diff=diff, sim_contrast=o * diff if evaluable else math.nan,
                        evaluable=evaluable, agree=bool(evaluable and s_h != 0 and s_h == s_s),
                    )
                )
    cols = ["simulator", *GROUP_COLS, "condition_a", "condition_b", "human_n_a", "human_n_b", "cliffs_delta",
            "human_contrast", "high_signal", "sim_mean_a", "sim_mean_b", "sim_diff", "sim_contrast", "evaluable", "agree"]
    return _sort(pd.DataFrame(rows, columns=cols), GROUP_COLS)


def _groupings(df: pd.DataFrame):
    """(grouping, group, mask) in Table 3 order; only groups present in df."""
    yield "overall", "all", pd.Series(True, index=df.index)
    for grouping, col, order in (("arm", "arm", ARMS), ("task", "task", TASKS), ("level", "level", LEVELS), ("metric", "metric", METRICS)):
        for value in order:
            if (df[col] == value).any():
                yield grouping, value, df[col] == value
    for arm in ARMS:
        for task in TASKS:
            mask = (df["arm"] == arm) & (df["task"] == task)
            if mask.any():
                yield "arm x task", f"{arm}/{task}", mask


def agreement_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """Table 3: k agreeing of n high-signal evaluable pairs, %, one-sided binomial p."""
    rows = []
    for simulator in pairs["simulator"].drop_duplicates().tolist():
        sp = pairs[(pairs["simulator"].isna() if simulator is None else pairs["simulator"] == simulator) & pairs["high_signal"]]
        for grouping, group, mask in _groupings(sp):
            sub = sp[mask]
            ev = sub[sub["evaluable"]]
            k, n = int(ev["agree"].sum()), len(ev)
            rows.append(
                dict(simulator=simulator, grouping=grouping, group=group, k=k, n=n,
                     pct=100.0 * k / n if n else math.nan, p_value=binomial_p_greater(k, n),
                     n_high_signal=len(sub), n_not_evaluable=len(sub) - n)
            )
    return pd.DataFrame(rows, columns=["simulator", "grouping", "group", "k", "n", "pct", "p_value", "n_high_signal", "n_not_evaluable"])


def spearman_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Spearman rho of oriented z-scored cell means, pooled like Table 3."""
    rows = []
    both = cells[cells["human_z"].notna() & cells["sim_z"].notna()]
    for simulator in both["simulator"].drop_duplicates().tolist():
        sc = both[both["simulator"] == simulator]
        for grouping, group, mask in _groupings(sc):
            sub = sc[mask]
            rho, p = spearman(sub["human_z"], sub["sim_z"])
            rows.append(dict(simulator=simulator, grouping=grouping, group=group, n_cells=len(sub), rho=rho, p_value=p))
    return pd.DataFrame(rows, columns=["simulator", "grouping", "group", "n_cells", "rho", "p_value"])


def _sort(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    order = {"arm": ARMS, "task": TASKS, "level": LEVELS, "metric": METRICS}
    keys = {c: (lambda s, o=o: s.map({v: i for i, v in enumerate(o)}).fillna(len(o))) for c, o in order.items() if c in cols}
    by = (["simulator"] if "simulator" in df.columns else []) + cols
    return df.sort_values(by, key=lambda s: keys[s.name](s) if s.name in keys else s, kind="stable").reset_index(drop=True)


__all__ = ["KEY_COLUMNS", "human_long", "sim_cells", "cell_means", "pair_table", "agreement_table", "spearman_table"]
