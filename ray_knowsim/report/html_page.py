"""The self-contained HTML page: inline CSS and JS, images as data URIs, nothing fetched.

Every piece of text that comes from a run (messages, condition names, IU labels, evidence) goes
through :func:`e` (HTML escaping). Table cells carry ``data-*`` attributes with the full-precision
value so tests and scripts can read the page without parsing the formatted text. Each
conversation is drawn by :mod:`ray_knowsim.report.conversation_html`, which ``ray-knowsim view``
shares.
"""

from __future__ import annotations

from typing import Iterable

from ray_knowsim.schema.results import FAILURE_MODES
from ray_knowsim.report.content import ReportContent
from ray_knowsim.report.banner import BANNER_HEADING
from ray_knowsim.report.conversation_html import CONVERSATION_CSS, conversation_article, e, legend
from ray_knowsim.report.conversation_html import attrs as _attrs
from ray_knowsim.compare.sentences import interval_text
from ray_knowsim.report.metrics import fmt, ranked_specs
from ray_knowsim.report.tables import ALL_LEVELS_SCOPE, coverage_note, has_positions, paper_rank_rows, position_lead
from ray_knowsim.stats.ranks import PAPER_MEAN_RANK_LABEL, PAPER_MEAN_RANK_NOTE
from ray_knowsim.stats.leaderboard import TIER_RULE
from ray_knowsim.stats.coverage import MEASURED as COVERAGE
from ray_knowsim.report.outcomes import CSS as OUTCOME_CSS
from ray_knowsim.report.outcomes import failed_html, failed_note_html, flags_html, truncations_html
from ray_knowsim.report.plots import FM_LABELS, FM_ORDER


#: the results tables' own rules (the marginal and per-level tables, the failure-mode table), shared
#: with ``ray-knowsim view``, which shows the same tables
RESULTS_CSS = """
td.num .ci { display:block; color:var(--muted); font-size:11px; white-space:normal; max-width:12em; margin-left:auto; }
td.num .rank, td.rank { color:var(--muted); font-size:11px; }
td.best { background:var(--best, #e3f4e8); font-weight:700; }
td.best .mean::after { content:" ★"; color:#2e9e5b; font-size:11px; }
td.num .pos { color:var(--muted); font-size:11px; }
ul.verdicts li { margin:2px 0; }
tbody.level-block th.level { background:#f7f9fb; text-transform:capitalize; border-right:1px solid var(--line); }
tbody.level-block tr:first-child td, tbody.level-block tr:first-child th { border-top:2px solid #c6d0da; }
"""

CSS = """
:root { --ink:#1d232b; --muted:#5d6978; --line:#dde3ea; --bg:#f6f8fa; --card:#fff; --accent:#1f5f99; --best:#e3f4e8; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--ink); background:var(--bg); }
header.top { background:#17324d; color:#fff; padding:22px 32px 18px; }
header.top h1 { margin:0 0 4px; font-size:22px; }
header.top .sub { color:#b9c9da; font-size:13px; word-break:break-all; }
.chips { display:flex; flex-wrap:wrap; gap:6px; margin-top:12px; }
.chip { background:rgba(255,255,255,.12); border-radius:12px; padding:2px 10px; font-size:12px; }
.chip b { font-weight:600; color:#cfe3f7; margin-right:4px; }
nav { position:sticky; top:0; z-index:5; background:#fff; border-bottom:1px solid var(--line); padding:8px 32px; display:flex; gap:18px; font-size:13px; }
nav a { color:var(--accent); text-decoration:none; }
main { max-width:1280px; margin:0 auto; padding:8px 32px 60px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:16px 20px; margin:18px 0; }
h2 { margin:0 0 6px; font-size:18px; }
p.lead { color:var(--muted); margin:0 0 12px; }
.callouts { display:flex; flex-wrap:wrap; gap:10px; margin:6px 0 14px; }
.callout { border-left:4px solid var(--accent); background:#eef4fa; padding:6px 12px; border-radius:4px; }
.banner { border:2px solid #b45309; background:#fff7ed; color:#7c2d12; padding:10px 14px; border-radius:6px; margin:10px 0 16px; }
.task-title { border-bottom:2px solid var(--accent); padding-bottom:4px; }
.callout .k { color:var(--muted); font-size:12px; display:block; }
figure { margin:8px 0; text-align:center; }
figure img { max-width:100%; height:auto; }
figcaption { color:var(--muted); font-size:12px; }
table { border-collapse:collapse; width:100%; font-variant-numeric:tabular-nums; }
th, td { padding:5px 8px; border-bottom:1px solid var(--line); text-align:left; vertical-align:top; }
thead th { background:#f0f3f6; font-weight:600; position:sticky; top:37px; }
td.num, th.num { text-align:right; white-space:nowrap; }
.note { color:var(--muted); font-size:12px; }
.viewer-bar { display:flex; flex-wrap:wrap; gap:10px; align-items:center; margin-bottom:10px; }
.viewer-bar select { font-size:13px; padding:3px 6px; max-width:560px; }
.viewer-bar button { font-size:13px; padding:3px 10px; }
@media (max-width: 900px) { main { padding:8px 10px; } }
""" + RESULTS_CSS + CONVERSATION_CSS

JS = """
(function () {
  var sel = document.getElementById('conv-select');
  if (!sel) { return; }
  var arts = Array.prototype.slice.call(document.querySelectorAll('article.conv'));
  function show(id) {
    arts.forEach(function (a) { a.hidden = (a.id !== id); });
    document.getElementById('conv-pos').textContent = (sel.selectedIndex + 1) + ' / ' + sel.options.length;
  }
  function step(d) {
    var i = (sel.selectedIndex + d + sel.options.length) % sel.options.length;
    sel.selectedIndex = i; show(sel.value);
  }
  sel.addEventListener('change', function () { show(sel.value); });
  document.getElementById('conv-prev').addEventListener('click', function () { step(-1); });
  document.getElementById('conv-next').addEventListener('click', function () { step(1); });
  var only = document.getElementById('only-moves');
  only.addEventListener('change', function () { document.body.classList.toggle('only-moves', only.checked); });
  show(sel.value);
})();
"""


def render_html(c: ReportContent) -> str:
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{e(c.title)}</title><style>{CSS}{OUTCOME_CSS}</style></head><body>",
        _header(c),
        _nav(c),
        "<main>",        _banner(c), flags_html(c),
        *_task_sections(c),
        *c.decisions_html,
        _conversations(c),
        _method(c),
        "</main>",
        f"<script>{JS}</script>",
        "</body></html>",
    ]
    return "\n".join(parts)


_SECTION_IDS = ("glance", "marginal", "per-level", "paper-rank", "failure-modes", "overview-plot", "marginal-table",
                "per-level-table", "paper-rank-table", "failure-mode-plot", "failed-sessions", "failed-table", "truncations", "truncation-table")


def _nav(c: ReportContent) -> str:
    if len(c.sections) <= 1:
        return ('<nav><a href="#glance">At a glance</a><a href="#marginal">Marginal table</a><a href="#per-level">Per level</a>'
                '<a href="#paper-rank">Paper\'s mean rank</a><a href="#failure-modes">Failure modes</a><a href="#failed-sessions">Failed sessions</a><a href="#conversations">Conversations</a><a href="#method">Method</a></nav>')
    tasks = "".join(f'<a href="#task-{e(t.task)}">Task: {e(t.task)}</a>' for t in c.sections)
    return f'<nav>{tasks}<a href="#conversations">Conversations</a><a href="#method">Method</a></nav>'


def _banner(c: ReportContent) -> str:
    return f'<div class="banner" id="offline-banner" role="note"><b>{e(BANNER_HEADING)}</b> {e(c.banner)}</div>' if c.banner else ""


def _task_sections(c: ReportContent) -> list[str]:
    """The results, one block per task (tasks are never pooled). With one task the page keeps
    its plain section ids; with several, each block's ids end in ``-<task>``."""
    sections = c.sections or [c]
    if len(sections) == 1:
        s = sections[0]
        return [_glance(s), marginal_html(s), per_level_html(s), paper_rank_html(s), failure_modes_html(s), failed_html(s), truncations_html(s)]
    out = []
    for s in sections:
        body = "".join((_glance(s), marginal_html(s), per_level_html(s), paper_rank_html(s), failure_modes_html(s), failed_html(s),
                        truncations_html(s)))
        for ident in _SECTION_IDS:
            body = body.replace(f'id="{ident}"', f'id="{ident}-{e(s.task)}"')
        out.append(f'<div class="task" id="task-{e(s.task)}"><h2 class="task-title">Task: {e(s.task)}</h2>{body}</div>')
    return out


def _header(c: ReportContent) -> str:
    chips = "".join(f'<span class="chip"><b>{e(k)}</b>{e(v)}</span>' for k, v in c.facts())
    return (
        f'<header class="top"><h1>{e(c.title)}</h1>'
        f'<div class="sub">{e(c.run_dir)} · generated {e(c.generated)}</div>'
        f'<div class="chips">{chips}</div></header>'
    )


def _glance(c: ReportContent) -> str:
    callouts = []
    for s in c.specs:  # the ★: a condition that significantly beats every other (verdicts, not means)
        w = [r.condition for r in c.marginal if r.best.get(s.key)]
        if w:
            callouts.append((f"beats every other on {s.label} (all levels)", ", ".join(w)))
    if not callouts:
        callouts.append(("best", "no condition significantly beats every other on any metric (see Verdicts)"))
    box = "".join(f'<div class="callout"><span class="k">{e(k)}</span>{e(v)}</div>' for k, v in callouts)
    fig = c.figures.get("overview")
    img = (
        f'<figure><img id="overview-plot" alt="metric means per level with 95% confidence intervals" src="{fig}">'
        f"<figcaption>Mean per (condition, level) with 95% item-clustered intervals; metrics {e(c.variant_text)}.</figcaption></figure>"
        if fig
        else ""
    )
    return f'<section id="glance"><h2>At a glance</h2><div class="callouts">{box}</div>{img}</section>'


def _metric_headers(c: ReportContent, with_position_col: bool) -> str:
    out = []
    for s in c.specs:
        out.append(f'<th class="num" title="{e(s.description)}">{e(s.label)} {s.arrow}</th>')
        if with_position_col:
            out.append(f'<th class="num" title="position on the item win rate (the verdicts\' leaderboard)">{e(s.label)} position</th>')
    return "".join(out)


def _status_title(c: ReportContent, condition: str, level: str) -> str:
    counts = c.summary.status.get((condition, level), {})
    return e(", ".join(f"{n} {status}" for status, n in sorted(counts.items())))


def _mean_rank_names(c: ReportContent) -> str:
    return ", ".join(s.label for s in ranked_specs(c.specs))


def _ci_html(ci, decimals: int) -> str:
    """A cell's 95 % item-clustered interval below its mean ("" without one: fewer than 2 items)."""
    if ci is None or ci.ci_low != ci.ci_low or ci.ci_high != ci.ci_high:
        return ""
    return f'<span class="ci">{e(interval_text(ci.ci_low, ci.ci_high, decimals, "every item has the same mean"))}</span>'


def _partial(used: int, total: int) -> str:
    """Say so when a mean rank averages fewer metrics than the table has (e.g. baselines: IQ only)."""
    return f'<span class="ci">over {used} of {total} metrics</span>' if 0 < used < total else ""


def marginal_html(c: ReportContent) -> str:
    """The level-marginalised table: per condition (in the run's order) each metric's mean, its 95 %
    item-clustered interval and (with verdicts) its position on the item win rate and ★; n with the
    failed sessions beside it. No rank of the mean here: it has its own table (:func:`paper_rank_html`)."""
    positions, in_levels = has_positions(c.per_level, c.marginal)
    rows = []
    for r in c.marginal:
        missing = r.missing_levels(c.summary.levels)
        dagger = f' <span class="note" title="no data for: {e(", ".join(missing))}">†</span>' if missing else ""
        cells = []
        for s in c.specs:
            v = r.values[s.key]
            cls = "num best" if r.best[s.key] else "num"
            cells.append(
                f'<td class="{cls}"{_attrs(data_metric=s.key, data_condition=r.condition, data_value=repr(float(v)) if v is not None else "")}>'
                f'<span class="mean">{fmt(v, s.decimals)}</span>{_ci_html(r.intervals.get(s.key), s.decimals)}</td>'
            )
            if positions:
                pos = r.positions.get(s.key)
                cells.append(f'<td class="rank num"{_attrs(data_position=s.key, data_condition=r.condition)}>{pos if pos is not None else "–"}</td>')
        rows.append(
            f'<tr><td class="cond">{e(r.condition)}{dagger}</td><td class="num n">{r.n:,}{failed_note_html(c, r.condition)}</td>{"".join(cells)}</tr>'
        )
    return (
        '<section id="marginal"><h2>Level-marginalised results</h2>'
        '<p class="lead">Per condition, the unweighted mean of its level means (each level counts equally, '
        'whatever its number of conversations), below it its 95% interval clustered by item. '
        f"{position_lead(positions, in_levels)}</p>"
        f'<table class="results" id="marginal-table"><thead><tr><th>Condition</th><th class="num">n</th>'
        f'{_metric_headers(c, positions)}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        '<p class="note">† a level without data for this condition: its marginal averages the levels it has.</p></section>'
    )


def per_level_html(c: ReportContent) -> str:
    """One block per knowledge level: mean, 95 % item-clustered interval and (with verdicts) the
    position on the item win rate (#) and ★ per metric; n."""
    in_marginal, positions = has_positions(c.per_level, c.marginal)
    bodies = []
    for block in c.per_level:
        trs = []
        for i, r in enumerate(block.rows):
            head = f'<th class="level" rowspan="{len(block.rows)}">{e(block.level)}</th>' if i == 0 else ""
            cells = []
            for s in c.specs:
                cell = r.cells[s.key]
                m = cell.moments
                ci_txt = _ci_html(cell.ci, s.decimals)
                n_txt = f" n={m.n}" if m.n != r.n and m.n else ""
                pos_txt = f"#{cell.position}" if cell.position is not None else ""
                extra = f'<span class="pos">{pos_txt}{n_txt}</span>' if pos_txt or n_txt else ""
                cells.append(
                    f'<td class="{"num best" if cell.best else "num"}"'
                    f'{_attrs(data_metric=s.key, data_condition=r.condition, data_level=block.level, data_value=repr(float(m.value)) if m.value is not None else "", data_n=m.n, data_position=cell.position)}>'
                    f'<span class="mean">{fmt(m.value, s.decimals)}</span>{ci_txt}{extra}</td>'
                )
            trs.append(
                f"<tr>{head}<td class=\"cond\">{e(r.condition)}</td>"
                f'<td class="num n" title="{_status_title(c, r.condition, block.level)}">{r.n:,}{failed_note_html(c, r.condition, block.level)}</td>{"".join(cells)}</tr>'
            )
        bodies.append(f'<tbody class="level-block"{_attrs(data_level=block.level)}>{"".join(trs)}</tbody>')
    return (
        '<section id="per-level"><h2>Results per knowledge level</h2>'
        '<p class="lead">Mean over conversations with status ok, below it its 95% interval clustered by item (item-clustered '
        'standard error, Student t on items − 1 degrees of freedom: items, not conversations, are the sampled unit; no '
        'interval below 2 items). '
        "n = conversations in the cell (a metric's own n is shown when some values are missing). "
        + position_lead(positions, in_marginal).replace("Position", "# = position within the level", 1) + "</p>"
        + (f'<p class="note coverage-note">{e(note)}</p>' if (note := coverage_note(c.per_level)) else "") +
        f'<table class="results" id="per-level-table"><thead><tr><th>Level</th><th>Condition</th><th class="num">n</th>'
        f'{_metric_headers(c, False)}</tr></thead>{"".join(bodies)}</table></section>'
    )


def paper_rank_html(c: ReportContent) -> str:
    """The paper's mean rank, in its own labelled table (ranks of the means; descriptive): over all
    levels, then per level, rows by mean rank within each."""
    specs = ranked_specs(c.specs)  # the paper's mean rank is over the ranked metrics only
    rows = paper_rank_rows(c.per_level, c.marginal, specs)
    trs = []
    for r in rows:
        level = None if r.scope == ALL_LEVELS_SCOPE else r.scope
        ranks = "".join(f'<td class="num"{_attrs(data_rank=s.key, data_condition=r.condition, data_level=level)}>'
                        f'{r.ranks[s.key] if r.ranks[s.key] is not None else "–"}</td>' for s in specs)
        trs.append(f'<tr><td>{e(r.scope)}</td><td class="cond">{e(r.condition)}</td>{ranks}'
                   f'<td class="num"{_attrs(data_paper_mean_rank=r.condition, data_level=level)}>{fmt(r.mean_rank, 2)}'
                   f"{_partial(r.ranks_used, len(specs))}</td></tr>")
    heads = "".join(f'<th class="num" title="{e(s.label)}: rank of the mean">{e(s.label)}</th>' for s in specs)
    return (
        f'<section id="paper-rank"><h2>{e(PAPER_MEAN_RANK_LABEL[0].upper() + PAPER_MEAN_RANK_LABEL[1:])}</h2>'
        f'<p class="lead">{e(PAPER_MEAN_RANK_NOTE)} Columns: each metric\'s rank of the mean, then their mean, over '
        f'{e(_mean_rank_names(c))}, as in tables/ranks and the terminal.</p>'
        f'<table class="results" id="paper-rank-table"><thead><tr><th>Levels</th><th>Condition</th>{heads}'
        f'<th class="num" title="{e(PAPER_MEAN_RANK_LABEL)}">mean rank</th></tr></thead><tbody>{"".join(trs)}</tbody></table></section>'
    )


def failure_modes_html(c: ReportContent) -> str:
    """The failure-mode shares per (level, condition), with the chart when ``c.figures`` holds one."""
    fig = c.figures.get("failure_modes")
    if not c.failures:
        return '<section id="failure-modes"><h2>Failure modes</h2><p class="lead">No explained-IU events recorded (no structured conversations).</p></section>'
    img = f'<figure><img id="failure-mode-plot" alt="failure-mode shares per level and condition" src="{fig}"></figure>' if fig else ""
    head = "".join(f'<th class="num"><span class="swatch {m}"></span>{e(FM_LABELS[m])}</th>' for m in FM_ORDER)
    trs = []
    for r in c.failures:
        cells = "".join(
            f'<td class="num"{_attrs(data_fm=m, data_condition=r.condition, data_level=r.level, data_count=r.counts[m])}>'
            f'{fmt(100 * r.share(m) if r.share(m) is not None else None, 1)}%<span class="rank"> · {fmt(r.per_conversation(m), 2)}/conv</span></td>'
            for m in FM_ORDER
        )
        trs.append(f'<tr><td>{e(r.level)}</td><td class="cond">{e(r.condition)}</td>{cells}<td class="num">{r.total:,}</td></tr>')
    return (
        '<section id="failure-modes"><h2>Failure modes</h2>'
        '<p class="lead">What happened to every IU the assistant explained, turn by turn (spec §10): '
        "effective (absorbed), under-absorbed (in reach, no step: shallow or at its ceiling), overload-wasted "
        "(load above capacity, the dropoff ate the step), prereq-blocked (a prerequisite too weak), redundant "
        "(already known well). Shares of all explained-IU events, and mean count per conversation.</p>"
        f"{img}<details><summary>Table</summary><table id=\"failure-table\"><thead><tr><th>Level</th><th>Condition</th>{head}"
        f'<th class="num">events</th></tr></thead><tbody>{"".join(trs)}</tbody></table></details></section>'
    )


def _conversations(c: ReportContent) -> str:
    if not c.conversations:
        return f'<section id="conversations"><h2>Conversations</h2><p class="lead">{e(c.sample_note or "No conversations to show.")}</p></section>'
    options = "".join(
        f'<option value="conv-{k}">{e(v.session.get("knowledge_level"))} · {e(v.session.get("condition"))} · {e(v.session.get("session_id"))}</option>'
        for k, v in enumerate(c.conversations)
    )
    arts = "".join(
        conversation_article(v, c.specs, c.trajectories[k] if k < len(c.trajectories) else None, f"conv-{k}")
        for k, v in enumerate(c.conversations)
    )
    return (
        '<section id="conversations"><h2>Conversations</h2>'
        f'<p class="lead">{e(c.sample_note)} Each turn: the two messages, the load against capacity, and every IU that was '
        "explained, attempted or moved, with why.</p>"
        f'<div class="viewer-bar"><button id="conv-prev" type="button">◀</button><select id="conv-select">{options}</select>'
        '<button id="conv-next" type="button">▶</button><span id="conv-pos" class="note"></span>'
        '<label><input type="checkbox" id="only-moves"> only turns where an IU moved</label></div>'
        f"{legend()}{arts}</section>"
    )


def _method(c: ReportContent) -> str:
    items: Iterable[str] = [
        f"Metrics: {e(c.variant_text)}. " + " ".join(f"<b>{e(s.label)}</b> ({e(s.column)}): {e(s.description)}." for s in c.specs),
        "Unit: one conversation with status ok; conversations with any other status are counted in the header and excluded.",
        "Per-level cells: mean over conversations with its 95% interval clustered by item (item-clustered sandwich "
        "standard error, Student t on items − 1 degrees of freedom; no interval below 2 items; a zero-width interval is "
        "marked as such); a metric missing for a conversation (e.g. state metrics of baseline simulators, IQ without a "
        "judge) is skipped, not zero. The intervals describe; no verdict rests on them. Their coverage at few items is "
        "measured on KG-like data (stats/coverage: " + ", ".join(f"{cov:.0%} at {n}" for n, (cov, _) in sorted(COVERAGE.items()))
        + " items, against 95 %); the per-level section says how far its own intervals fall short.",
        "Level-marginalised value: unweighted mean of the level means (the reference code pooled conversations instead; "
        "the two agree when every level has the same count).",
        f"Positions and ★ in the results tables: per metric and level, the leaderboard on the item win rate from the "
        f"verdicts below: {TIER_RULE}; nothing in those tables is ordered by a mean.",
        e(PAPER_MEAN_RANK_NOTE) + " (Its own table; CO: lower is better; ties share the best rank.)",
        e(c.verdicts.method) if c.verdicts is not None else "Verdicts: none (fewer than two conditions).",
        "Failure modes are summed from the session rows' fm_* counts; the conversation viewer re-derives each IU's "
        "class from the recorded states and signals and flags any turn whose derived counts differ from the recorded ones.",
    ]
    lis = "".join(f"<li>{i}</li>" for i in items)
    fm = ", ".join(e(m) for m in FAILURE_MODES)
    return f'<section id="method"><h2>Method</h2><ul>{lis}</ul><p class="note">Failure-mode columns: {fm}.</p></section>'
