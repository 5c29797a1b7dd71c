"""The index of everything under the viewer's folders, and the pages of sweeps and comparisons.

The index is the one page that links every run, sweep and leaderboard found; each sweep and
comparison links back to the runs it read.
"""

from __future__ import annotations

from ray_knowsim.stats.multiplicity import correction_name

from pathlib import Path
from typing import Any, Sequence

from ray_knowsim.compare.paired import ALL_LEVELS
from ray_knowsim.compare.sentences import interval_text
from ray_knowsim.schema.metrics import find_metric
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS, PAPER_MEAN_RANK_LABEL, PAPER_MEAN_RANK_NOTE, higher_is_better
from ray_knowsim.view.discover import Entry, RunInfo
from ray_knowsim.view.html import attrs, e, fmt_value, href, page, status_badge, table
from ray_knowsim.view.verdicts import Board, BoardCell, Verdict

METRIC_LABELS = {"cost_usd": "cost $"}


def metric_label(metric: str) -> str:
    """A leaderboard column's header: the metric catalogue's label, else :data:`METRIC_LABELS`', else upper case."""
    found = find_metric(metric)
    return found.label if found is not None and metric == found.name else METRIC_LABELS.get(metric, metric.upper())


def metric_decimals(metric: str) -> int:
    found = find_metric(metric)
    return found.decimals if found is not None else 4 if metric == "cost_usd" else 3


def entry_url(entry: Entry) -> str:
    return href(f"/{entry.kind}/{entry.id}")


def file_url(entry: Entry, rel: str) -> str:
    return href(f"/file/{entry.id}/{rel}")


def index(roots: Sequence[str], runs: Sequence[RunInfo], broken: Sequence[tuple[Entry, str]], sweeps: Sequence[tuple[Entry, dict]],
          compares: Sequence[tuple[Entry, dict]]) -> str:
    rows = []
    for info in runs:
        time = "–" if info.seconds is None else f"{info.seconds / 60:,.1f} min"
        rows.append([
            f'<a class="run-link" href="{e(entry_url(info.entry))}">{e(info.entry.label)}</a><br><span class="note">{e(info.name)}</span>',
            status_badge(info.status, info.status_detail, info.sanity_flag), e(info.progress), e(f"{info.ok:,}"), e(f"{info.failed:,}"),
            e(", ".join(info.models) or "–"), e(info.cost_text), e(time), e(info.created_at or "–"),
        ])  # fmt: skip
    for entry, why in broken:
        rows.append([e(entry.label), status_badge("unknown", why), e(why), "", "", "", "", "", ""])
    body = [f'<section id="runs"><h2>Runs ({len(runs):,})</h2>']
    if rows:
        body.append(table(["run", "status", "sessions (n of N planned)", "ok", "failed", "models", "cost", "time", "created"], rows,
                          "run-table", [False, False, True, True, True, False, True, True, False]))
    else:
        body.append('<p class="lead">No run directory found (a folder holding manifest.json or sessions/).</p>')
    body.append("</section>")
    if sweeps:
        srows = [[f'<a href="{e(entry_url(en))}">{e(en.label)}</a>', e(m.get("name")), e(m.get("status")), e(fmt_value(m.get("n_settings"))),
                  e(fmt_value(m.get("n_conversations"))), e(m.get("source"))] for en, m in sweeps]
        body.append(f'<section id="sweeps"><h2>Sweeps ({len(sweeps)})</h2>'
                    + table(["sweep", "name", "status", "settings", "conversations", "source"], srows, "sweep-table", [False, False, False, True, True, False]) + "</section>")
    if compares:
        crows = [[f'<a href="{e(entry_url(en))}">{e(en.label)}</a>', e(", ".join(str(r.get("label")) for r in m.get("runs") or []))] for en, m in compares]
        body.append(f'<section id="compares"><h2>Comparisons ({len(compares)})</h2>' + table(["comparison", "runs"], crows, "compare-table") + "</section>")
    sub = "folders: " + ", ".join(roots)
    return page("ray-knowsim view", "".join(body), [("all outputs", None)], sub)


def _links(related: Sequence[tuple[str, str]]) -> str:
    if not related:
        return ""
    return '<p>Runs read: ' + ", ".join(f'<a href="{e(u)}">{e(t)}</a>' for t, u in related) + "</p>"


def sweep(entry: Entry, manifest: dict[str, Any], related: Sequence[tuple[str, str]], images: Sequence[str],
          tables: Sequence[tuple[str, str]], files: Sequence[str]) -> str:
    """A sweep's folder: its manifest, plots (``report/*.png``) and tables (``report/*.csv``)."""
    keys = ("name", "status", "source", "n_settings", "n_conversations", "conversations_per_block", "blocks", "backend",
            "seconds", "identity")
    shown = {k: manifest[k] for k in keys if k in manifest}
    runs = manifest.get("runs") or []
    if runs:  # the last invocation's layout: pieces are cut for the cluster each run met
        shown.update({f"last run: {k}": runs[-1][k] for k in ("cpus", "settings_per_piece", "pieces") if k in runs[-1]})
    facts = "".join(f"<span><b>{e(k)}</b>{e(fmt_value(v))}</span>" for k, v in shown.items())
    body = [f'<section id="sweep-summary"><h2>Sweep {e(manifest.get("name") or entry.label)}</h2><div class="facts">{facts}</div>{_links(related)}</section>']
    if images:
        figs = "".join(f'<figure><img alt="{e(rel)}" src="{e(file_url(entry, rel))}"><figcaption>{e(rel)}</figcaption></figure>' for rel in images)
        body.append(f'<section id="sweep-plots"><h2>Plots</h2>{figs}</section>')
    if tables:
        parts = "".join(f'<h3>{e(rel)} <a href="{e(file_url(entry, rel))}">(CSV)</a></h3>{html}' for rel, html in tables)
        body.append(f'<section id="sweep-tables"><h2>Tables</h2>{parts}</section>')
    if files:
        body.append('<section id="sweep-files"><h2>Files</h2><ul class="files">'
                    + "".join(f'<li><a href="{e(file_url(entry, rel))}">{e(rel)}</a></li>' for rel in files) + "</ul></section>")
    return page(f"sweep {manifest.get('name') or entry.label}", "".join(body), [("all outputs", "/"), (entry.label, None)], entry.label)


def _board_cell(cell: BoardCell | None, metric: str) -> str:
    """A leaderboard cell: its position on the item win rate (★: beats every other), the mean and
    its 95 % interval (description), whom it significantly beats."""
    if cell is None:
        return '<td class="num">–</td>'
    decimals = metric_decimals(metric)
    pos = "–" if cell.position is None else f"#{cell.position:g}"  # the tier from the verdicts (compare's position)
    ci = (f'<span class="ci">{e(interval_text(cell.ci_low, cell.ci_high, decimals, "every item has the same mean"))}</span>'
          if cell.ci_low is not None and cell.ci_high is not None else "")
    beats = f'<span class="beats">beats {e(cell.beats)}</span>' if cell.beats else ""
    cycle = f'<span class="beats">cycle: {e(cell.cycle)}</span>' if cell.cycle else ""
    step = cell.tier_note.replace(f"cycle {cell.cycle}", "").strip("; ") if cell.tier_note else ""
    cycle += f'<span class="beats tier-note">{e(step)}</span>' if step else ""
    return (f'<td class="num{" best" if cell.star else ""}"{attrs(data_metric=metric, data_position=pos)}><span class="pos">{e(pos)}</span> '
            f'<span class="mean">{e(fmt_value(cell.mean, decimals))}</span>{ci}{beats}{cycle}</td>')


def _board(b: Board) -> str:
    """The leaderboard (positions on the item win rate per metric, rows in name order), then the
    paper's mean rank in its own labelled table, never as a column beside the positions."""
    several_runs = len(set(b.runs.values())) > 1
    heads = "".join(f'<th class="num">{e(metric_label(m))} {"↑" if higher_is_better(m) else "↓"}</th>' for m in b.metrics)
    rows = []
    for c in b.conditions:
        cells = "".join(_board_cell(b.cells.get((c, m)), m) for m in b.metrics)
        run = f"<td>{e(b.runs.get(c))}</td>" if several_runs else ""
        rows.append(f'<tr data-condition="{e(c)}"><td class="cond">{e(c)}</td>{run}{cells}</tr>')
    mr = ", ".join(m.upper() for m in MEAN_RANK_METRICS)
    paper = sorted(b.conditions, key=lambda c: (b.mean_rank.get(c) is None, b.mean_rank.get(c) or 0.0, c))
    paper_rows = "".join(f'<tr data-condition="{e(c)}"><td class="cond">{e(c)}</td>'
                         f'<td class="num" data-paper-mean-rank="{e(c)}">{e(fmt_value(b.mean_rank.get(c), 2))}</td>'
                         + (f'<td class="num">{e(fmt_value(b.mean_rank_in_run.get(c), 2))}</td>' if several_runs else "") + "</tr>"
                         for c in paper)
    said = dict.fromkeys(b.detectable[m] for m in b.metrics if m in b.detectable)
    detectable = "".join(f'<p class="note detectable">{e(metric_label(m))}: {e(t)}</p>' for t in said
                         for m in [next(k for k in b.metrics if b.detectable.get(k) == t)])
    return (detectable + f'<table class="results board" data-task="{e(b.task)}"><thead><tr><th>Condition</th>{"<th>run</th>" if several_runs else ""}'
            f'{heads}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            + (f'<p class="note ranked-set">The leaderboard {e(b.ranked_set)}.</p>' if b.ranked_set else "")
            + f'<details class="paper-rank" data-task="{e(b.task)}"><summary>{e(PAPER_MEAN_RANK_LABEL)} over {e(mr)}</summary>'
            f'<p class="note">{e(PAPER_MEAN_RANK_NOTE)}</p><table class="results paper-rank-table"><thead><tr><th>Condition</th>'
            f'<th class="num">{e(PAPER_MEAN_RANK_LABEL)}</th>{"<th class=num>its run&#x27;s own</th>" if several_runs else ""}</tr></thead>'
            f"<tbody>{paper_rows}</tbody></table></details>")


def compare(entry: Entry, info: dict[str, Any], related: Sequence[tuple[str, str]], tables: Sequence[tuple[str, str]], has_html: bool,
            verdicts: Sequence[Verdict] = (), boards: Sequence[Board] = ()) -> str:
    """A comparison folder: its verdicts as sentences, then its leaderboard per task (metrics first,
    each cell's position on the item win rate, the mean and its interval), then the raw tables."""
    runs = "".join(f"<li>{e(r.get('label'))}: {e(r.get('path'))} ({e(', '.join(map(str, r.get('conditions') or [])))})</li>" for r in info.get("runs") or [])
    extra = f'<p><a href="{e(file_url(entry, "leaderboard.html"))}">leaderboard.html</a> (the page compare wrote; shown without scripts)</p>' if has_html else ""
    body = []
    flags = [*map(str, info.get("incomplete") or []), *map(str, info.get("warnings") or [])]
    if flags:
        body.append('<div class="banner" id="compare-flags" role="note">' + "".join(f"<p><b>{e(f)}</b></p>" for f in flags) + "</div>")
    opts = info.get("options") or {}
    family = info.get("family") or ""
    several_tasks = len({v.task for v in verdicts}) > 1

    def listed(shown: Sequence[Verdict]) -> str:
        return "".join(f'<li class="{"equivalent" if v.equivalent else "significant"}" data-task="{e(v.task)}" data-level="{e(v.level)}" '
                       f'data-metric="{e(v.metric)}">{f"<b>{e(v.task)}</b>: " if several_tasks else ""}{e(v.sentence)}</li>' for v in shown)

    overall = [v for v in verdicts if v.level == ALL_LEVELS]
    per_level = [v for v in verdicts if v.level != ALL_LEVELS]
    items = (f'<ul class="verdicts" id="verdict-list">{listed(overall)}</ul>' if overall else
             '<p class="lead">No verdict over all levels.</p>')
    if per_level:
        items += (f'<details id="verdicts-per-level"{" open" if not overall else ""}><summary>{len(per_level):,} verdict(s) within one '
                  f'knowledge level</summary><ul class="verdicts">{listed(per_level)}</ul></details>')
    too_few = "".join(f'<p class="problems too-few">{e(t)}</p>' for t in info.get("too_few_items") or [])
    lead = (f"Exact sign test over items, {e(correction_name(opts.get('effect') is not None))} over {e(family or 'the family')}"
            + (f" at alpha {e(opts.get('alpha'))}" if opts.get("alpha") is not None else "") + "; every verdict with its counts. "
            "Pairs without a verdict are in paired.csv (each with its sentence).")
    body.append(f'<section id="compare-verdicts"><h2>Verdicts ({len(verdicts):,})</h2><p class="lead">{lead}</p>{too_few}'
                + (items if verdicts else
                   '<p class="lead" id="no-verdict"><b>No verdict:</b> no pair of conditions differs significantly on any metric '
                   "at this family size; nothing here says who beats whom.</p>") + "</section>")
    if boards:
        parts = "".join((f'<h3 class="task-title">Task: {e(b.task)}</h3>' if len(boards) > 1 or b.task else "") + _board(b) for b in boards)
        body.append('<section id="compare-leaderboard"><h2>Leaderboard (level-marginal)</h2><p class="lead">Per metric, each '
                    "condition's tier (#) from the significant verdicts on the item win rate: conditions no verdict separates "
                    "share a tier, a winner is never in its loser's tier, a cycle shares one tier and is named; 'n.s. vs' marks "
                    "a step with no verdict behind it; ★ = significantly beats every other condition. Then its mean and 95% "
                    "item-clustered interval (description). The run family's smallest detectable effect is above each board. "
                    "Rows are in name order: each metric has its own positions. The paper's mean rank (ranks of means) is "
                    "apart, below each board.</p>" + parts + "</section>")
    body.append(f'<section id="compare-summary"><h2>Comparison {e(entry.label)}</h2><ul>{runs}</ul>{_links(related)}'
                f'<p class="note">{e(info.get("test") or "")}</p>{extra}</section>')
    raw = "".join(f'<details id="compare-{e(name)}"><summary><h3>{e(name)}</h3></summary><p><a href="{e(file_url(entry, name + ".csv"))}">'
                  f"{e(name)}.csv</a></p>{html}</details>" for name, html in tables)
    if raw:
        body.append(f'<section id="compare-tables"><h2>Raw tables</h2><p class="lead">What compare wrote, every column; each opens on a '
                    f"click.</p>{raw}</section>")
    return page(f"comparison {entry.label}", "".join(body), [("all outputs", "/"), (entry.label, None)], entry.label)


def sweep_source(manifest: dict[str, Any]) -> Path | None:
    """The run directory a sweep read (its config's source.run_dir against its config folder)."""
    cfg = manifest.get("config") or {}
    raw = (cfg.get("source") or {}).get("run_dir")
    if not raw:
        return None
    p = Path(raw)
    return p if p.is_absolute() else Path(cfg.get("config_dir") or ".") / p


def error_page(status: int, message: str) -> str:
    return page(f"{status}", f'<section><p class="lead" id="error-message">{e(message)}</p><p><a href="/">all outputs</a></p></section>',
                [("all outputs", "/")])


__all__ = ["compare", "entry_url", "error_page", "file_url", "index", "sweep", "sweep_source"]
