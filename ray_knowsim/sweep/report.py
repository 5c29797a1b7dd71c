"""The sensitivity report of a finished sweep: rankings, their agreement with the default, which
parameters matter, metric ranges per parameter -- CSV tables and PNG plots listed in report/index.md.

Reads only the sweep's output folder (settings.parquet, the committed partials/), so it can be regenerated with
other metrics or groupings without re-scoring (``ray-knowsim sweep CONFIG --report-only``).

Definitions (also written into index.md):
* ranking: within each group (by default each knowledge level), conditions ordered by their mean
  of a ranking metric (descending; ascending for overload-type metrics), ties share the best rank;
* agreement with the default setting (setting 0) per group: Kendall's tau-b between the two
  settings' condition means (scipy; NaN with fewer than two conditions or a constant side) and
  whether the top condition is the same ("top-1 kept");
* parameter influence: settings are grouped by a parameter's value (numeric parameters with many
  values in quantile bins); ``tau_range`` is the spread (max - min) of the group means of the
  per-setting mean tau, ``tau_eta_sq`` the share of the tau variance between groups, and
  ``oat_min_tau`` the lowest tau among settings that differ from the default in that parameter only;
* metric ranges: per parameter and value, the mean / min / max over settings of each metric's
  pooled mean; ``range`` = spread of those means across the parameter's values.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ray_knowsim.schema.results import LOWER_IS_BETTER
from ray_knowsim.stats.agreement import kendall_tau
from ray_knowsim.sweep.aggregate import reduce
from ray_knowsim.sweep.commits import read_table
from ray_knowsim.sweep.config import ReportConfig
from ray_knowsim.io.tables import write_table
from ray_knowsim.sweep.store import write_text_atomic

#: more metrics where lower is better, beyond the session table's (ranking direction)
LOWER_BETTER = frozenset(LOWER_IS_BETTER) | {
    "overloaded_turns", "disallowed", "fm_redundant", "fm_prereq_blocked", "fm_overload_wasted", "fm_under_absorbed",
}  # fmt: skip


def _dense_ranks(x: np.ndarray) -> tuple[int, ...]:
    return tuple(np.unique(x, return_inverse=True)[1].reshape(-1).tolist())


def _tau(a: np.ndarray, b: np.ndarray, cache: dict | None = None) -> float:
    """Kendall's tau-b (:func:`ray_knowsim.stats.agreement.kendall_tau`). It depends only on the two
    orderings (ranks with ties), so a sweep of thousands of settings that produce a handful of
    distinct rankings computes it a handful of times (``cache`` maps rank pairs to tau)."""
    if len(a) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan")
    key = (_dense_ranks(a), _dense_ranks(b))
    if cache is not None and key in cache:
        return cache[key]
    tau = kendall_tau(np.asarray(key[0], dtype=float), np.asarray(key[1], dtype=float))
    if cache is not None:
        cache[key] = tau
    return tau


def _best_sets(table: pd.DataFrame, metric: str) -> list[frozenset]:
    """Per row of a (setting x condition) table, the set of conditions with the best mean."""
    v = -table if metric in LOWER_BETTER else table
    top = v.max(axis=1)
    hit = v.eq(top, axis=0).to_numpy()
    cols = np.asarray(table.columns)
    return [frozenset(cols[h]) for h in hit]


def rankings_and_agreement(agg: pd.DataFrame, group_by: list[str], rank_by: str, metrics: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (setting, group, metric): the ranking of ``rank_by`` values and its agreement with setting 0."""
    rank_parts: list[pd.DataFrame] = []
    agree_parts: list[pd.DataFrame] = []
    tau_cache: dict = {}
    groups = agg.groupby(group_by, sort=True, observed=True) if group_by else [((), agg)]
    for gkey, gdf in groups:
        gkey = gkey if isinstance(gkey, tuple) else (gkey,)
        gvals = dict(zip(group_by, gkey))
        for metric in metrics:
            table = gdf.pivot_table(index="setting", columns=rank_by, values=f"{metric}_mean", aggfunc="first", observed=True)
            if 0 not in table.index:
                continue
            ranks = table.rank(axis=1, method="min", ascending=metric in LOWER_BETTER)
            long = pd.DataFrame({"mean": table.stack(), "rank": ranks.stack().astype(int)}).reset_index()
            rank_parts.append(long.assign(metric=metric, **gvals))
            base = table.loc[0]
            best = _best_sets(table, metric)
            base_best = best[list(table.index).index(0)]
            taus = []
            n_ranked = []
            values = table.to_numpy(dtype=float)
            base_values = base.to_numpy(dtype=float)
            for row in values:
                both = ~np.isnan(base_values) & ~np.isnan(row)
                n_ranked.append(int(both.sum()))
                taus.append(_tau(base_values[both], row[both], tau_cache))
            agree_parts.append(
                pd.DataFrame(
                    {
                        "setting": table.index,
                        **{k: v for k, v in gvals.items()},
                        "metric": metric,
                        "n_ranked": n_ranked,
                        "kendall_tau": taus,
                        "top1_default": "|".join(sorted(map(str, base_best))),
                        "top1": ["|".join(sorted(map(str, b))) for b in best],
                        "top1_kept": [b == base_best for b in best],
                    }
                )
            )
    rank_cols = ["setting", *group_by, "metric", rank_by, "mean", "rank"]
    rankings = pd.concat(rank_parts, ignore_index=True)[rank_cols] if rank_parts else pd.DataFrame(columns=rank_cols)
    agree = pd.concat(agree_parts, ignore_index=True) if agree_parts else pd.DataFrame(columns=["setting", *group_by, "metric", "kendall_tau", "top1_kept"])
    return rankings, agree


def _param_columns(settings: pd.DataFrame) -> list[str]:
    return [c for c in settings.columns if c.startswith("p.")]


def _is_numeric(col: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)


def param_levels(col: pd.Series, max_levels: int) -> tuple[pd.Series, pd.Series]:
    """(group label, numeric x position or NaN) per setting for one parameter column."""
    if _is_numeric(col) and col.nunique() > max_levels:
        bins = pd.qcut(col, q=min(max_levels, 5), duplicates="drop")
        label = bins.astype(str)
        x = col.groupby(bins, observed=True).transform("mean")
        return label, x
    if _is_numeric(col):
        return col.map(lambda v: f"{v:g}"), col.astype(float)
    return col.map(str), pd.Series(np.nan, index=col.index)


def _changed(settings: pd.DataFrame, params: list[str]) -> pd.Series:
    """Per setting, the list of parameters whose value differs from setting 0's."""
    base = settings.loc[settings["setting"] == 0, params].iloc[0]
    return settings[params].apply(lambda r: [p for p in params if str(r[p]) != str(base[p])], axis=1)


def influence(summary: pd.DataFrame, params: list[str], metric: str, max_levels: int) -> pd.DataFrame:
    rows = []
    changed = _changed(summary, params) if params else pd.Series(dtype=object)
    tau_col, top_col = f"tau_mean.{metric}", f"top1_kept_share.{metric}"
    for p in params:
        label, _ = param_levels(summary[p], max_levels)
        df = pd.DataFrame({"label": label, "tau": summary[tau_col], "top": summary[top_col]})
        g = df.groupby("label", observed=True)
        means = g["tau"].mean()
        total_var = df["tau"].var(ddof=0)
        between = ((g["tau"].mean() - df["tau"].mean()) ** 2 * g["tau"].count()).sum() / max(df["tau"].count(), 1)
        oat = summary.loc[changed.map(lambda c, p=p: c == [p]), tau_col]
        rows.append(
            {
                "param": p[2:],
                "ranking_metric": metric,
                "n_values": int(label.nunique()),
                "tau_range": float(means.max() - means.min()) if means.notna().any() else float("nan"),
                "tau_eta_sq": float(between / total_var) if total_var and total_var > 0 else float("nan"),
                "top1_kept_range": float(g["top"].mean().max() - g["top"].mean().min()),
                "oat_settings": int(len(oat)),
                "oat_min_tau": float(oat.min()) if len(oat) else float("nan"),
            }
        )
    out = pd.DataFrame(rows)
    if not out.empty:
        out = out.sort_values(["tau_range", "top1_kept_range"], ascending=False, na_position="last", kind="stable")
    return out.reset_index(drop=True)


def metric_ranges(summary: pd.DataFrame, params: list[str], metrics: list[str], max_levels: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    detail, spans = [], []
    for p in params:
        label, x = param_levels(summary[p], max_levels)
        for m in metrics:
            df = pd.DataFrame({"label": label, "x": x, "v": summary[f"{m}_mean"]})
            g = df.groupby("label", observed=True, sort=False)
            stats = g["v"].agg(["count", "mean", "min", "max"])
            xs = g["x"].mean()
            for lab, st in stats.iterrows():
                detail.append({"param": p[2:], "value": lab, "x": xs[lab], "metric": m, "n_settings": int(st["count"]),
                               "mean": st["mean"], "min": st["min"], "max": st["max"]})  # fmt: skip
            spans.append({"param": p[2:], "metric": m, "range": float(stats["mean"].max() - stats["mean"].min()),
                          "min": float(df["v"].min()), "max": float(df["v"].max())})  # fmt: skip
    return pd.DataFrame(detail), pd.DataFrame(spans)


# --- plots ---------------------------------------------------------------------------------------


def _save(plt, fig, path: Path, dpi: int) -> bool:  # noqa: ANN001
    """Write the figure and free it (pyplot keeps every open figure); True: the plot was drawn."""
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return True


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def plot_agreement(agree: pd.DataFrame, group_by: list[str], metric: str, path: Path) -> bool:
    df = agree[agree["metric"] == metric]
    if df.empty or df["kendall_tau"].notna().sum() == 0:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4))
    order = df.groupby("setting")["kendall_tau"].mean().sort_values(ascending=False).index
    pos = {s: k for k, s in enumerate(order)}
    groups = df.groupby(group_by, observed=True) if group_by else [("all", df)]
    for gkey, gdf in groups:
        xs = gdf["setting"].map(pos)
        ax.scatter(xs, gdf["kendall_tau"], s=10, label=str(gkey if not isinstance(gkey, tuple) else "/".join(map(str, gkey))))
        lost = gdf[~gdf["top1_kept"]]
        ax.scatter(lost["setting"].map(pos), lost["kendall_tau"], s=40, facecolors="none", edgecolors="red")
    ax.set_xlabel("settings, by mean tau (red ring: top-1 condition changed)")
    ax.set_ylabel(f"Kendall tau vs default ({metric})")
    ax.set_ylim(-1.05, 1.05)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return _save(plt, fig, path, 110)


def plot_influence(infl: pd.DataFrame, path: Path) -> bool:
    if infl.empty:
        return False
    df = infl.dropna(subset=["tau_range"])
    if df.empty:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(df) + 1.2))
    ax.barh(df["param"][::-1], df["tau_range"][::-1], color="tab:blue")
    ax.set_xlabel("spread of mean Kendall tau across the parameter's values")
    ax.set_title(f"what moves the rankings ({df['ranking_metric'].iloc[0]})")
    fig.tight_layout()
    return _save(plt, fig, path, 110)


def plot_param(param: str, summary: pd.DataFrame, by_group: pd.DataFrame, group_by: list[str], metrics: list[str],
               tau_col: str, max_levels: int, path: Path) -> bool:  # fmt: skip
    col = summary[f"p.{param}"]
    label, x = param_levels(col, max_levels)
    numeric = x.notna().all()
    plt = _plt()
    panels = ["tau", *metrics][:4]  # every metric x parameter is in metric_ranges.png; drawing is slow
    ncols = min(4, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.0 * ncols, 2.6 * nrows), squeeze=False)
    key = x if numeric else label
    order = sorted(key.unique()) if numeric else sorted(label.unique())
    pos = {v: k for k, v in enumerate(order)}
    for ax, panel in zip(axes.flat, panels):
        if panel == "tau":
            series = {"all": summary.assign(k=key).groupby("k")[tau_col].mean()}
            ax.set_title("Kendall tau vs default", fontsize=8)
        else:
            merged = by_group.merge(pd.DataFrame({"setting": summary["setting"], "k": key}), on="setting")
            if group_by:
                series = {str(g): d.groupby("k")[f"{panel}_mean"].mean() for g, d in merged.groupby(group_by[0], observed=True)}
            else:
                series = {"all": merged.groupby("k")[f"{panel}_mean"].mean()}
            ax.set_title(panel, fontsize=8)
        for name, s in series.items():
            s = s.reindex(order)
            xs = list(s.index) if numeric else [pos[v] for v in s.index]
            ax.plot(xs, s.to_numpy(), marker="o", ms=3, label=name)
        if not numeric:
            ax.set_xticks(range(len(order)))
            ax.set_xticklabels([str(o)[:12] for o in order], rotation=30, fontsize=6)
        ax.tick_params(labelsize=6)
        ax.locator_params(axis="y", nbins=4)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    axes.flat[min(1, len(panels) - 1)].legend(fontsize=6)
    fig.suptitle(param, fontsize=10)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.14, top=0.80 if nrows == 1 else 0.88, wspace=0.3, hspace=0.55)
    return _save(plt, fig, path, 72)


def plot_ranges(spans: pd.DataFrame, path: Path) -> bool:
    if spans.empty:
        return False
    table = spans.pivot_table(index="param", columns="metric", values="range", aggfunc="first")
    scale = (spans.groupby("metric")["max"].max() - spans.groupby("metric")["min"].min()).replace(0, np.nan)
    rel = table / scale.reindex(table.columns)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(1.0 + 0.7 * len(table.columns), 1.0 + 0.4 * len(table.index)))
    im = ax.imshow(rel.to_numpy(dtype=float), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(table.columns)))
    ax.set_xticklabels(table.columns, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(table.index)))
    ax.set_yticklabels(table.index, fontsize=7)
    fig.colorbar(im, ax=ax, label="range of means / overall range")
    ax.set_title("metric ranges per parameter", fontsize=9)
    fig.tight_layout()
    return _save(plt, fig, path, 110)


# --- the report ----------------------------------------------------------------------------------


def write_report(out_dir: str | Path, cfg: ReportConfig) -> list[str]:
    """Write the tables and plots; returns the report files (relative to the output folder)."""
    out_dir = Path(out_dir)
    rep = out_dir / "report"
    rep.mkdir(parents=True, exist_ok=True)
    settings = pd.read_parquet(out_dir / "settings.parquet")
    committed = read_table(out_dir, "partials")
    parts = committed.to_pandas() if committed is not None else pd.DataFrame()
    metrics = list(dict.fromkeys(cfg.metrics))
    rank_metrics = list(dict.fromkeys(cfg.ranking_metrics))
    by_cell = reduce(parts, [*cfg.group_by, cfg.rank_by])
    by_group = reduce(parts, list(cfg.group_by))
    pooled = reduce(parts, [])
    rankings, agree = rankings_and_agreement(by_cell, list(cfg.group_by), cfg.rank_by, rank_metrics)

    summary = settings.drop(columns=["rules_json"]).merge(pooled, on="setting", how="left")
    for metric in rank_metrics:
        a = agree[agree["metric"] == metric].groupby("setting")
        summary[f"tau_mean.{metric}"] = summary["setting"].map(a["kendall_tau"].mean())
        summary[f"tau_min.{metric}"] = summary["setting"].map(a["kendall_tau"].min())
        summary[f"top1_kept_share.{metric}"] = summary["setting"].map(a["top1_kept"].mean())
    params = _param_columns(settings)
    infl = pd.concat([influence(summary, params, m, cfg.max_levels_per_param) for m in rank_metrics], ignore_index=True)
    detail, spans = metric_ranges(summary, params, metrics, cfg.max_levels_per_param)
    write_table(summary, out_dir, "setting_summary", formats=("parquet",))

    files: list[tuple[str, str]] = []

    def table(df: pd.DataFrame, name: str, what: str) -> None:
        write_table(df, rep, name.removesuffix(".csv"), formats=("csv",))
        files.append((f"report/{name}", what))

    keep = ["setting", "origin", *params, "n"] + [c for c in summary.columns if c.startswith(("tau_", "top1_"))]
    keep += [f"{m}_mean" for m in metrics] + ["early_stop_rate"]
    table(summary[keep], "settings.csv", "one row per setting: parameter values, pooled metric means, mean/min Kendall tau and top-1 kept share vs the default")
    table(agree, "agreement.csv", "per setting, group and ranking metric: Kendall tau vs the default's ranking, top-1 condition, top-1 kept")
    table(rankings, "rankings.csv", "per setting, group and ranking metric: each condition's mean and rank")
    table(by_cell[["setting", *cfg.group_by, cfg.rank_by, "n", *[f"{m}_mean" for m in metrics], "early_stop_rate"]], "cells.csv",
          "per setting, group and condition: n, metric means, early-stop rate")  # fmt: skip
    table(infl, "param_influence.csv", "which parameters move rankings most (tau_range, tau_eta_sq, top1_kept_range, one-at-a-time min tau)")
    table(detail, "metric_ranges.csv", "per parameter value: mean/min/max over settings of each metric's pooled mean")
    table(spans, "metric_range_summary.csv", "per parameter and metric: spread of the metric's mean across the parameter's values")

    if cfg.plots:
        primary = rank_metrics[0]
        if plot_agreement(agree, list(cfg.group_by), primary, rep / "ranking_agreement.png"):
            files.append(("report/ranking_agreement.png", f"Kendall tau of every setting vs the default, per group ({primary})"))
        first = infl[infl["ranking_metric"] == primary] if not infl.empty else infl
        if plot_influence(first, rep / "param_influence.png"):
            files.append(("report/param_influence.png", "parameters ranked by how much they move the rankings"))
        if plot_ranges(spans, rep / "metric_ranges.png"):
            files.append(("report/metric_ranges.png", "how far each parameter moves each metric (relative to its overall range)"))
        ordered = list(first["param"]) if not first.empty else [p[2:] for p in params]
        for p in ordered[: cfg.max_param_plots]:
            name = f"param_{_safe(p)}.png"
            shown = list(dict.fromkeys(rank_metrics + metrics))[:3]
            if plot_param(p, summary, by_group, list(cfg.group_by), shown, f"tau_mean.{primary}", cfg.max_levels_per_param, rep / name):
                what = f"Kendall tau and the means of {', '.join(shown)} against {p} (one line per {', '.join(cfg.group_by) or 'sweep'})"
                files.append((f"report/{name}", what))

    files.append(("setting_summary.parquet", "settings.csv with every aggregated column (Parquet)"))
    files.append(("report/headline.json", "the headline above as JSON (what `ray-knowsim sweep` prints)"))
    _index(rep, out_dir, files, summary, infl, rank_metrics)
    return ["report/index.md"] + [f for f, _ in files]


def headline(summary: pd.DataFrame, infl: pd.DataFrame, rank_metrics: list[str], top: int = 3) -> dict:
    """The sweep's headline for the primary ranking metric: mean/min Kendall tau vs the default,
    the top-1 kept share, the most influential parameters. index.md and `ray-knowsim sweep` both
    say it from this dict (report/headline.json), so the terminal and the report agree."""
    primary = rank_metrics[0]
    tau = summary[f"tau_mean.{primary}"]
    first = infl[infl["ranking_metric"] == primary].dropna(subset=["tau_range"]).head(top) if not infl.empty else infl
    has = bool(tau.notna().any())
    return {
        "ranking_metric": primary, "settings": int(len(summary)),
        "mean_tau": float(tau.mean()) if has else None, "min_tau": float(tau.min()) if has else None,
        "top1_kept_share": float(summary[f"top1_kept_share.{primary}"].mean()) if has else None,
        "influential": [{"param": r.param, "tau_range": float(r.tau_range)} for r in first.itertuples()],
    }


def headline_sentences(h: dict) -> list[str]:
    """index.md's headline sentences of :func:`headline`."""
    m = h["ranking_metric"]
    if h["mean_tau"] is None:
        lines = [f"Ranking by {m}: fewer than two conditions per group, so no Kendall tau (top-1 is trivially kept)."]
    else:
        lines = [f"Ranking by {m}: mean Kendall tau vs the default {h['mean_tau']:.3f} (min {h['min_tau']:.3f}); "
                 f"top-1 condition kept in {h['top1_kept_share']:.0%} of (setting, group) pairs."]
    if h["influential"]:
        lines.append("Most influential parameters: " + ", ".join(f"{p['param']} (tau range {p['tau_range']:.3f})"
                                                                  for p in h["influential"]) + ".")
    return lines


def _index(rep: Path, out_dir: Path, files: list[tuple[str, str]], summary: pd.DataFrame, infl: pd.DataFrame, rank_metrics: list[str]) -> None:
    manifest = {}
    if (out_dir / "sweep.json").exists():
        manifest = json.loads((out_dir / "sweep.json").read_text())
    lines = [f"# Sweep report: {manifest.get('name', out_dir.name)}", ""]
    lines.append(f"{len(summary)} settings x {manifest.get('n_conversations', '?')} conversations; source: {manifest.get('source', '?')}.")
    h = headline(summary, infl, rank_metrics)
    write_text_atomic(json.dumps(h, indent=1), rep / "headline.json")
    lines += headline_sentences(h)
    lines += ["", "| file | what |", "| --- | --- |"]
    lines += [f"| [{f}](../{f}) | {what} |" for f, what in files]
    lines += ["", "Outputs beside report/: `rows/` (one row per setting x conversation), `aggregates.parquet`, "
              "`settings.parquet`, `identity.csv` (default setting vs the recorded metrics), `sweep.json`.", ""]  # fmt: skip
    lines += ["## Definitions", "", (__doc__ or "").split("Definitions (also written into index.md):", 1)[-1].strip(), ""]
    write_text_atomic("\n".join(lines), rep / "index.md")


__all__ = ["LOWER_BETTER", "headline", "headline_sentences", "influence", "metric_ranges", "rankings_and_agreement", "write_report"]
