"""The leaderboard: every condition of every compared run, ranked per task, with CIs (pure).

Built from the ``best`` table's level-marginal rows (``knowledge_level == "all"``): per task and
condition the level-marginal mean of each metric, its item-clustered 95 % CI (the run's tables
show the same), its rank (orientation-aware) and its probability of being best; ``mean_rank`` is
THE mean rank of :mod:`ray_knowsim.stats.ranks` (over KG, DC, CO, IQ among the compared metrics:
the terminal, ``tables/ranks`` and the report show the same number); rows are sorted by the
number of metrics ranked (most first), then by ``mean_rank``. Other metrics are ranked but not
averaged; ``cost_usd`` (when priced) is shown but not ranked. Conditions of an adaptive run have
unequal n (``<metric>_n``): an eliminated condition's means cover fewer items.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

import pandas as pd

from ray_knowsim.compare.paired import ALL_LEVELS, beats_matrix, too_few_items
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS, mean_rank

UNRANKED = frozenset({"cost_usd", "turns"})


def leaderboard(best: pd.DataFrame, runs_of: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per (task, condition): ``<metric>``, ``<metric>_ci_low/_ci_high``, ``<metric>_rank``,
    ``<metric>_prob_best`` per metric, ``mean_rank``, ``position`` (1 = best mean rank)."""
    part = best[best["knowledge_level"] == ALL_LEVELS]
    rows = []
    for (task, cond), g in part.groupby(["task", "condition"], sort=False):
        row: dict = {"task": task, "condition": cond, "run": (runs_of or {}).get(cond, "")}
        ranked = []
        for _, r in g.iterrows():
            m = r["metric"]
            row[m] = r["mean"]
            row[f"{m}_ci_low"], row[f"{m}_ci_high"] = r["ci_low"], r["ci_high"]
            row[f"{m}_n"] = r["n"]
            row[f"{m}_rank"] = r["rank"]
            row[f"{m}_items"] = r["n_items"]
            row[f"{m}_prob_best"] = r["prob_best"]
            if m in MEAN_RANK_METRICS and not math.isnan(r["rank"]):
                ranked.append(r["rank"])
        got = mean_rank(ranked)
        row["mean_rank"] = got if got is not None else math.nan
        row["ranked_metrics"] = len(ranked)
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=["task", "condition", "run", "mean_rank", "position"])
    # a condition with fewer metrics (a baseline simulator has no KG/DC/CO) is ranked after those
    # with more: a mean over one metric is no match for a mean over eight
    df["_key"] = -df["ranked_metrics"] * 1000 + df["mean_rank"].fillna(999)
    df = df.sort_values(["task", "_key", "condition"]).reset_index(drop=True)
    df["position"] = df.groupby("task")["_key"].rank(method="min")
    return df.drop(columns="_key")


def _f(x, d: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#f7f8fa}
table{border-collapse:collapse;margin:10px 0 24px;background:#fff}th,td{border:1px solid #d9dde5;padding:4px 8px}
th{background:#eef1f6;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ci{color:#6b7280;font-size:12px}.best{font-weight:700}.note{color:#555;max-width:70em}
td.win{background:#e7f6ec}td.self{background:#eee}
.flag{border:2px solid #1d4ed8;background:#eff6ff;color:#1e3a8a;padding:6px 12px;border-radius:6px;max-width:70em}"""


def render_html(board: pd.DataFrame, paired: pd.DataFrame, metrics: Sequence[str], title: str,
                notes: Sequence[str] = (), alpha: float = 0.05, flags: Sequence[str] = ()) -> str:
    """A self-contained page: per task the leaderboard (mean [95% CI], rank, P(best)) and the
    level-marginal who-beats-whom matrix; ``flags`` (e.g. an incomplete run) stand out on top."""
    e = html.escape
    out = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>", f"<title>{e(title)}</title>",
           f"<style>{CSS}</style></head><body>", f"<h1>{e(title)}</h1>"]
    if flags:
        out.append("<div id='incomplete-runs' class='flag' role='note'>" + "".join(f"<p><b>{e(f)}</b></p>" for f in flags) + "</div>")
    out += [f"<p class='note'>{e(n)}</p>" for n in notes]
    for task in board["task"].unique() if not board.empty else []:
        part = board[board["task"] == task]
        shown = [m for m in metrics if m in part.columns]
        out.append(f"<h2>{e(str(task))}: leaderboard (level-marginal)</h2><table><thead><tr><th>#</th><th>condition</th>")
        out += [f"<th>{e(m.upper())}</th>" for m in shown]
        out.append(f"<th>mean rank ({e(', '.join(m.upper() for m in MEAN_RANK_METRICS if m in shown))})</th></tr></thead><tbody>")
        for _, r in part.iterrows():
            out.append(f"<tr><td class='num'>{_f(r['position'], 0)}</td><td>{e(str(r['condition']))}</td>")
            for m in shown:
                top = r.get(f"{m}_rank") == 1 and m not in UNRANKED
                pb = r.get(f"{m}_prob_best")
                out.append(f"<td class='num{' best' if top else ''}'>{_f(r[m])}<br><span class='ci'>[{_f(r[f'{m}_ci_low'])}, "
                           f"{_f(r[f'{m}_ci_high'])}]" + (f" P(best) {_f(pb, 2)}" if m not in UNRANKED else "") + "</span></td>")
            out.append(f"<td class='num'>{_f(r['mean_rank'], 2)}</td></tr>")
        out.append("</tbody></table>")
        out.append(beats_html(paired, task, ALL_LEVELS, alpha))
    out.append("</body></html>")
    return "\n".join(out)


NOTE = ("A cell lists the metrics on which the row's condition beats the column's: exact sign test over items "
        "(each item's mean paired difference; ties dropped), Bonferroni over the family, so a listed win is one whose "
        "family-adjusted win-rate interval excludes 1/2.")


def beats_html(paired: pd.DataFrame, task: str, level: str, alpha: float = 0.05) -> str:
    """Row beats column on the listed metrics; a sentence instead when the items are too few for
    any verdict (an empty matrix would look like "no differences")."""
    e = html.escape
    conds, wins = beats_matrix(paired, task, level)
    if not conds:
        return ""
    few = too_few_items(paired, task, alpha, level)
    if few:
        return f"<h3>Who beats whom — {e(str(task))}, level {e(level)}</h3><p class='note too-few'>{e(few)}</p>"
    head = "".join(f"<th>{e(c)}</th>" for c in conds)
    rows = []
    for a in conds:
        cells = []
        for b in conds:
            if a == b:
                cells.append("<td class='self'></td>")
                continue
            ms = wins.get((a, b), [])
            cells.append(f"<td class='{'win' if ms else ''}'>{e(', '.join(m.upper() for m in ms))}</td>")
        rows.append(f"<tr><th>{e(a)}</th>{''.join(cells)}</tr>")
    return (f"<h3>Who beats whom — {e(str(task))}, level {e(level)}</h3>"
            f"<p class='note'>{e(NOTE)}</p>"
            f"<table><thead><tr><th>row beats column</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def beats_markdown(paired: pd.DataFrame, task: str, level: str, alpha: float = 0.05) -> list[str]:
    conds, wins = beats_matrix(paired, task, level)
    if not conds:
        return []
    few = too_few_items(paired, task, alpha, level)
    if few:
        return [few]
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    out = ["| row beats column | " + " | ".join(esc(c) for c in conds) + " |", "|---" * (len(conds) + 1) + "|"]
    for a in conds:
        cells = ["—" if a == b else ", ".join(m.upper() for m in wins.get((a, b), [])) for b in conds]
        out.append(f"| {esc(a)} | " + " | ".join(cells) + " |")
    return out


__all__ = ["NOTE", "beats_html", "beats_markdown", "leaderboard", "render_html"]
