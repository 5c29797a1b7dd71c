"""The leaderboard: every condition of every compared run, per task and metric, on the item win rate (pure).

One quantity from verdict to leaderboard: per (task, metric) at the level-marginal, conditions are
ordered by :func:`ray_knowsim.stats.leaderboard.board` from the ``paired`` table's win rates and
significant verdicts: a condition's position is its TIER (1 + the longest chain of significant
defeats above it: conditions no verdict separates share a tier, a winner is never in its loser's
tier, a cycle shares one tier and is named), rows within a tier by mean item rank
(``1 + sum_j (1 - theta_ij)``, theta_ij the share of matched items i wins over j, ties half) as
description only; ★ only for a condition that significantly beats every other condition
directly; beside every board the family's smallest detectable win rate. Beside it, as description:
the level-marginal mean with its item-clustered 95 % CI (the run's tables show the same) and the
paper's mean rank (:func:`ray_knowsim.stats.ranks.paper_mean_ranks` over KG, DC, CO, IQ: ranks
of means, no uncertainty). Across several runs that paper's figure ranks every run's conditions
together, so it is NOT each run's own mean rank; ``mean_rank_in_run`` gives that one and
``ranked_set`` says which set the leaderboard ranked.
"""

from __future__ import annotations

from ray_knowsim.stats.multiplicity import correction_name

import html
import math
from typing import Sequence

import pandas as pd

from ray_knowsim.compare.paired import ALL_LEVELS, beats_matrix, too_few_items
from ray_knowsim.compare.sentences import interval_text
from ray_knowsim.stats.leaderboard import Detectable, board, board_line, tier_note
from ray_knowsim.stats.defaults import ALPHA, POWER
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS, PAPER_MEAN_RANK_LABEL, PAPER_MEAN_RANK_NOTE, paper_mean_ranks

UNRANKED = frozenset({"cost_usd", "turns"})
COLUMNS = ["task", "metric", "condition", "run", "position", "star", "mean_item_rank", "beats", "tier_note", "cycle",
           "detectable_win_rate", "detectable", "tiers", "mean", "ci_low",
           "ci_high", "zero_width", "n", "n_items", "rank_of_mean", "mean_rank", "mean_rank_used", "mean_rank_in_run", "ranked_set"]


def ranked_set_text(conditions: Sequence[str], runs_of: dict[str, str]) -> str:
    """What a leaderboard ranks: one run's conditions, or several runs' together (then its mean
    rank is not any run's own)."""
    runs = list(dict.fromkeys(runs_of.get(c, "") for c in conditions))
    if len(runs) <= 1:
        return f"ranks the {len(conditions)} conditions of one run: its mean rank is the run's own (terminal, report, tables/ranks)"
    return (f"ranks {len(conditions)} conditions of {len(runs)} runs together: its mean rank is not comparable with each "
            "run's own mean rank (see mean_rank_in_run)")


def leaderboard(best: pd.DataFrame, paired: pd.DataFrame, runs_of: dict[str, str] | None = None,
                level: str = ALL_LEVELS, alpha: float = ALPHA, power: float = POWER) -> pd.DataFrame:
    """One row per (task, metric, condition) at ``level`` (default the level-marginal), rows in
    leaderboard order per (task, metric); columns :data:`COLUMNS`. ``position`` is the tier from
    the verdicts (:func:`ray_knowsim.stats.leaderboard.board`); ``tiers`` the whole board as a
    line and ``detectable`` the family's smallest detectable effect, for every surface to show."""
    runs_of = runs_of or {}
    part = best[best["knowledge_level"] == level]
    pairs = paired[paired["knowledge_level"] == level]
    rows: list[dict] = []
    for task, g in part.groupby("task", sort=True):
        conds = list(dict.fromkeys(g["condition"]))
        means = {m: dict(zip(gm["condition"], gm["mean"])) for m, gm in g.groupby("metric", sort=False)}
        _, paper = paper_mean_ranks(means, MEAN_RANK_METRICS)
        own: dict[str, float | None] = {}
        for run in dict.fromkeys(runs_of.get(c, "") for c in conds):
            mine = [c for c in conds if runs_of.get(c, "") == run]
            _, got = paper_mean_ranks({m: {c: v[c] for c in mine if c in v} for m, v in means.items()}, MEAN_RANK_METRICS)
            own.update({c: got[c].value if c in got else None for c in mine})
        ranked = ranked_set_text(conds, runs_of)
        pt = pairs[pairs["task"] == task]
        for metric, gm in g.groupby("metric", sort=False):
            here = list(gm["condition"])
            pm = pt[pt["metric"] == metric]
            theta = {(r.condition_a, r.condition_b): r.win_rate_ties_half for r in pm.itertuples()}
            beats = [(r.better, r.condition_b if r.better == r.condition_a else r.condition_a)
                     for r in pm.itertuples() if isinstance(r.better, str)]
            fam = int(pm["family_size"].max()) if len(pm) and "family_size" in pm else 1
            b = board(here, theta, beats, Detectable(int(pm["n_items"].max()) if len(pm) else 0, alpha, fam, power))
            by = gm.set_index("condition")
            for c in b.order:
                r = by.loc[c]
                cyc = next((" > ".join([*cy, cy[0]]) for cy in b.cycles if c in cy), "")
                pr = paper.get(c)
                rows.append({"task": task, "metric": metric, "condition": c, "run": runs_of.get(c, ""),
                             "position": b.position[c], "star": b.star == c, "mean_item_rank": b.mean_item_rank[c],
                             "beats": ", ".join(b.beats[c]), "tier_note": tier_note(b, c), "cycle": cyc,
                             "detectable_win_rate": b.detectable.win_rate, "detectable": b.detectable.text(), "tiers": board_line(b), "mean": r["mean"], "ci_low": r["ci_low"],
                             "ci_high": r["ci_high"], "zero_width": bool(r["zero_width"]), "n": r["n"], "n_items": r["n_items"],
                             "rank_of_mean": r["rank"], "mean_rank": pr.value if pr and pr.value is not None else math.nan,
                             "mean_rank_used": pr.used if pr else 0,
                             "mean_rank_in_run": own.get(c) if own.get(c) is not None else math.nan, "ranked_set": ranked})
    return pd.DataFrame(rows, columns=COLUMNS)


def _paper_rows(board_: pd.DataFrame) -> pd.DataFrame:
    """Per (task, condition) the paper's mean rank columns, sorted by it."""
    cols = ["task", "condition", "run", "mean_rank", "mean_rank_used", "mean_rank_in_run", "ranked_set"]
    return board_[cols].drop_duplicates(["task", "condition"]).sort_values(["task", "mean_rank", "condition"], na_position="last")


def _f(x, d: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#f7f8fa}
table{border-collapse:collapse;margin:10px 0 24px;background:#fff}th,td{border:1px solid #d9dde5;padding:4px 8px}
th{background:#eef1f6;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ci{color:#6b7280;font-size:12px}.best{font-weight:700}.note{color:#555;max-width:70em}
td.win{background:#e7f6ec}td.self{background:#eee}
.flag{border:2px solid #1d4ed8;background:#eff6ff;color:#1e3a8a;padding:6px 12px;border-radius:6px;max-width:70em}"""


def render_html(board_: pd.DataFrame, paired: pd.DataFrame, metrics: Sequence[str], title: str,
                notes: Sequence[str] = (), alpha: float = ALPHA, flags: Sequence[str] = ()) -> str:
    """A self-contained page: per task, per metric the smallest detectable effect, then the
    leaderboard on the item win rate (tier from the verdicts, ★, why that tier with n.s. where no
    verdict stands, mean item rank and mean [95% CI] as description, whom it beats), the verdicts in words, the
    paper's mean rank (and which set of conditions it ranks), the who-beats-whom matrix;
    ``flags`` (e.g. an incomplete run) stand out on top."""
    e = html.escape
    out = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>", f"<title>{e(title)}</title>",
           f"<style>{CSS}</style></head><body>", f"<h1>{e(title)}</h1>"]
    if flags:
        out.append("<div id='incomplete-runs' class='flag' role='note'>" + "".join(f"<p><b>{e(f)}</b></p>" for f in flags) + "</div>")
    out += [f"<p class='note'>{e(n)}</p>" for n in notes]
    for task in board_["task"].unique() if not board_.empty else []:
        part = board_[board_["task"] == task]
        out.append(f"<h2>{e(str(task))}: leaderboard on the item win rate (level-marginal)</h2>")
        out.append(f"<p class='note ranked-set'>{e(str(part['ranked_set'].iloc[0]))}</p>")
        out.append("<div id='leaderboard-grid'>")
        for metric in [m for m in metrics if m in set(part["metric"])]:
            pm = part[part["metric"] == metric]
            out.append(f"<h3>{e(metric.upper())}</h3><p class='note detectable'>{e(str(pm['detectable'].iloc[0]))}</p>"
                       f"<table class='board' data-metric='{e(metric)}'><thead><tr><th>tier</th>"
                       "<th>condition</th><th>why this tier (n.s. = no verdict)</th><th>mean item rank (descriptive)</th>"
                       "<th>significantly beats</th><th>mean [95% CI] (descriptive)</th></tr></thead><tbody>")
            for _, r in pm.iterrows():
                star = " ★" if r["star"] else ""
                cyc = f" <span class='ci'>(cycle: {e(r['cycle'])})</span>" if r["cycle"] else ""
                ci = interval_text(r["ci_low"], r["ci_high"], 3, "every item has the same mean")
                out.append(f"<tr data-condition='{e(str(r['condition']))}'><td class='num'>{int(r['position'])}</td>"
                           f"<td class='{'best' if r['star'] else ''}'>{e(str(r['condition']))}{star}{cyc}</td>"
                           f"<td>{e(r['tier_note']) or '–'}</td>"
                           f"<td class='num'>{_f(r['mean_item_rank'], 2)}</td><td>{e(r['beats']) or '–'}</td>"
                           f"<td class='num'>{_f(r['mean'])} <span class='ci'>{e(ci)}</span></td></tr>")
            out.append("</tbody></table>")
        out.append("</div>")
        sentences = paired[(paired["task"] == task) & (paired["knowledge_level"] == ALL_LEVELS) & paired["better"].notna()]["sentence"]
        if len(sentences):
            out.append("<h3>Verdicts</h3><ul class='verdicts'>" + "".join(f"<li>{e(s)}</li>" for s in sentences) + "</ul>")
        paper = _paper_rows(part)
        names = ", ".join(m.upper() for m in MEAN_RANK_METRICS)
        out.append(f"<h3 class='paper-rank'>{e(PAPER_MEAN_RANK_LABEL[0].upper() + PAPER_MEAN_RANK_LABEL[1:])} ({e(names)})</h3>"
                   f"<p class='note'>{e(PAPER_MEAN_RANK_NOTE)}</p>"
                   f"<table class='paper-rank'><thead><tr><th>condition</th><th>{e(PAPER_MEAN_RANK_LABEL)}</th><th>its run's own</th></tr></thead><tbody>"
                   + "".join(f"<tr><td>{e(str(r['condition']))}</td><td class='num'>{_f(r['mean_rank'], 2)}</td>"
                             f"<td class='num'>{_f(r['mean_rank_in_run'], 2)}</td></tr>" for _, r in paper.iterrows())
                   + "</tbody></table>")
        out.append(beats_html(paired, task, ALL_LEVELS, alpha))
    out.append("</body></html>")
    return "\n".join(out)


def beats_note(paired: pd.DataFrame) -> str:
    """What a cell of the who-beats-whom matrix means (the correction as compare applied it)."""
    effect = "effect" in paired.columns and bool(paired["effect"].notna().any())
    return ("A cell lists the metrics on which the row's condition beats the column's: exact sign test over items "
            f"(each item's mean paired difference; tied items count in the totals, not in the test), {correction_name(effect)} "
            "over the family, so a listed win is one whose win-rate interval at its family level excludes 1/2.")


def beats_html(paired: pd.DataFrame, task: str, level: str, alpha: float = ALPHA) -> str:
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
            f"<p class='note'>{e(beats_note(paired))}</p>"
            f"<table><thead><tr><th>row beats column</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def beats_markdown(paired: pd.DataFrame, task: str, level: str, alpha: float = ALPHA) -> list[str]:
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


__all__ = ["COLUMNS", "beats_html", "beats_note", "beats_markdown", "leaderboard", "ranked_set_text", "render_html"]
