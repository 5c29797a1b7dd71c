"""The pages of one run: its overview, its conversation list and one conversation.

The list is one page of rows chosen on the server (``view.query``); a conversation is drawn by the
report's own renderer (``report.conversation_html``), so the viewer and the report cannot disagree
on what a turn shows.
"""

from __future__ import annotations

from typing import Any, Sequence
from urllib.parse import quote as url_quote

from ray_knowsim.io.rundir import STATUS_WORDS
from ray_knowsim.tables.sanity import SanityReport
from ray_knowsim.schema.failures import error_kind, error_text
from ray_knowsim.report.conversation_html import conversation_article, legend
from ray_knowsim.report.banner import BANNER_HEADING
from ray_knowsim.report.explain import ConversationView
from ray_knowsim.report.metrics import metric_specs
from ray_knowsim.report.per_decision import LABEL as PER_DECISION
from ray_knowsim.stats.ranks import PAPER_MEAN_RANK_LABEL
from ray_knowsim.view.discover import Entry, RunInfo
from ray_knowsim.view.html import e, fmt_value, href, page, status_badge, table
from ray_knowsim.view.query import EQUALS, RANGES, SORTABLE, Page, SessionQuery

#: what a raw table is, where its name alone could read as a verdict (tables/ranks orders conditions by means)
RAW_TABLE_NOTES = {"ranks": f": {PAPER_MEAN_RANK_LABEL}, per metric and its mean; not a verdict"}
SPECS = metric_specs("final", "kg")
#: the list's columns: (header, row key, numeric)
LIST_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("task", "task", False), ("item", "item_id", False), ("level", "knowledge_level", False), ("condition", "condition", False),
    ("status", "status", False), ("error", "error", False), ("turns", "turns", True), ("stop", "stop_reason", False),
    ("KG", "kg", True), ("NKG", "nkg", True), ("DC", "dc", True), ("CO", "co", True), ("IQ", "iq", True), ("cost $", "cost_usd", True),
)  # fmt: skip
LABELS = {"task": "task", "level": "level", "condition": "condition", "item": "item", "status": "status",
          "outcome": "outcome (stop reason)", "error": "error kind"}  # fmt: skip
#: the status words (io.rundir.STATUS_WORDS) of a run that did not end as planned
INCOMPLETE = tuple(STATUS_WORDS[k] for k in ("interrupted", "incomplete", "failed", "running", "stopped_on_failures"))


def run_url(entry: Entry, sub: str = "") -> str:
    return href(f"/run/{entry.id}{sub}")


def crumbs(info: RunInfo, *more: tuple[str, str | None]) -> list[tuple[str, str | None]]:
    return [("all outputs", "/"), (info.entry.label, run_url(info.entry)), *more]


def tabs(info: RunInfo) -> str:
    links = [("overview", run_url(info.entry)), (f"conversations ({info.committed:,})", run_url(info.entry, "/sessions"))]
    if info.failed:
        links.append((f"failed only ({info.failed:,})", href(f"/run/{info.entry.id}/sessions", "failed=1")))
    return '<nav class="tabs">' + "".join(f'<a href="{e(u)}">{e(t)}</a>' for t, u in links) + "</nav>"


def incomplete_banner(info: RunInfo) -> str:
    if info.status not in INCOMPLETE:
        return ""
    return (
        f'<div class="banner" id="incomplete-banner" role="note"><b>Incomplete run: {e(info.progress)} planned sessions.</b> '
        f"{e(info.status_detail)}. Its tables and rankings cover only what was committed.</div>"
    )


def facts(info: RunInfo) -> str:
    items = [
        ("status", status_badge(info.status, info.status_detail, info.sanity_flag)),
        ("sessions", e(f"{info.sessions or info.progress + ' planned sessions'} · {info.ok:,} ok · {info.failed:,} failed")),
        ("models", e(", ".join(info.models) or "–")),
        ("conditions", e(str(len(info.conditions)))),
        ("cost", e(info.cost_text)),
        *([(PER_DECISION, f'<span id="cost-per-decision">{e(info.per_decision)}</span>')] if info.per_decision else []),
        ("time", e("–" if info.seconds is None else f"{info.seconds / 60:,.1f} min over {len(info.manifest.get('invocations') or [])} invocation(s)")),
        ("created", e(info.created_at or "–")),
        ("config hash", e(info.config_hash or "–")),
    ]
    if not info.follows_markers:
        items.append(("rows", e("no commit markers (shards/): every Parquet file under sessions/ is read as found")))
    if info.refused_files:
        items.append(("refused", e(f"shards naming files outside the folders: {', '.join(info.refused_files)}")))
    return '<div class="facts" id="run-facts">' + "".join(f"<span><b>{e(k)}</b>{v}</span>" for k, v in items) + "</div>"


def sanity_banner(sanity: SanityReport | None) -> str:
    """The run's sanity warnings (io.sanity), when there are any, under the heading that names the
    component their evidence points at (the simulator, the tutor, or both), as the report's banner does."""
    if sanity is None or not sanity.warnings:
        return ""
    items = "".join(f'<li data-check="{e(w.check)}" data-severe="{str(w.severe).lower()}"><b>{"severe" if w.severe else "warning"}</b> '
                    f"({e(w.check)}): {e(w.text)}</li>" for w in sanity.warnings)
    return (f'<div class="banner" id="sanity-warnings" role="alert"><b>{e(sanity.heading())}</b> These checks read the '
            f"rows themselves (ray_knowsim.tables.sanity; thresholds there).<ul>{items}</ul></div>")


def overview(info: RunInfo, banner: str | None, counts: dict[str, dict[str, int]], failures: list[dict[str, Any]],
             tables: Sequence[tuple[str, str]], estimate: dict[str, Any] | None, related: Sequence[tuple[str, str, str]],
             sanity: SanityReport | None = None, results: str = "", audit: Any = None) -> str:
    """The run's front page: what went wrong (banners), its facts, then its results (``results``:
    :func:`ray_knowsim.view.results.results_html`), then the failed sessions, the conversations
    and the raw tables. ``failures``: :func:`ray_knowsim.view.query.failure_counts`; ``tables``:
    (name, rendered table HTML); ``related``: (kind, label, url); ``sanity``: the simulator's checks."""
    rid = info.entry.id
    body = [incomplete_banner(info), sanity_banner(sanity)]
    if banner:
        body.append(f'<div class="banner" id="offline-banner" role="note"><b>{e(BANNER_HEADING)}</b> {e(banner)}</div>')
    body.append(f'<section id="summary"><h2>Run {e(info.name)}</h2>{facts(info)}<p class="note">{e(info.status_detail)}.</p></section>')
    body.append(results)
    if results:
        comparisons = [(label, url) for kind, label, url in related if kind == "comparison"]
        where = (", ".join(f'<a href="{e(url)}">{e(label)}</a>' for label, url in comparisons) if comparisons else
                 f"none found yet: <code>ray-knowsim compare RUN_DIR --out DIR</code> makes one, and "
                 f"<code>ray-knowsim report RUN_DIR</code> shows them")
        body.append(f'<p class="note" id="verdicts-pointer">These tables describe; who significantly beats whom (the sign test '
                    f"over items, and the ★ it gives) is on a comparison's page: {where}.</p>")
    browse = []
    for key in ("level", "condition"):
        links = " · ".join(
            f'<a href="{e(href(f"/run/{rid}/sessions", {key: v}))}">{e(v)}</a> ({n:,})' for v, n in counts.get(key, {}).items()
        )
        if links:
            browse.append(f"<p><b>{e(LABELS[key])}:</b> {links}</p>")
    body.append(f'<section id="browse"><h2>Conversations</h2><p><a href="{e(run_url(info.entry, "/sessions"))}">all {info.committed:,}</a>'
                + (f' · <a href="{e(href(f"/run/{rid}/sessions", "failed=1"))}">failed only ({info.failed:,})</a>' if info.failed else "")
                + f'</p>{"".join(browse)}</section>')
    if failures:
        rows = []
        for f in failures:
            cond, kind, n = f["condition"], f["error_kind"], f["n_failed"]
            link = href(f"/run/{rid}/sessions", {"condition": cond, "failed": 1, **({} if kind == "failed" else {"error": kind})})
            rows.append((e(cond), e(kind), e(f["failure_class"]), f'<a href="{e(link)}">{n:,}</a>',
                         e(f"{100 * f['share']:.1f}% of {f['n_sessions']:,}"), e(f["example"] or "–")))
        body.append('<section id="failures"><h2>Failed sessions by error kind</h2><p class="lead">Per condition (the run\'s '
                    "tables/failures counts them the same way); each count lists its sessions; the reason is the first one seen.</p>"
                    + table(["condition", "error kind", "class", "sessions", "share", "reason"], rows, "failure-table",
                            [False, False, False, True, True, False]) + "</section>")
    else:
        body.append('<section id="failures"><h2>Failed sessions by error kind</h2><p class="lead">No session failed.</p></section>')
    if audit is not None:
        body.append(audit_section(info, audit))
    if tables:
        parts = "".join(f'<details><summary><h3 id="table-{e(name)}">{e(name)}{e(RAW_TABLE_NOTES.get(name, ""))}</h3></summary>{html}</details>'
                        for name, html in tables)
        body.append(f'<section id="tables"><h2>Raw tables</h2><p class="lead">RUN_DIR/tables/ as the run wrote them, every column '
                    f"(bounds, n and items per metric, the early-stop variants, cost); each opens on a click.</p>{parts}</section>")
    if estimate:
        totals = estimate.get("totals") or {}
        rows = [(e(k), e(fmt_value(v))) for k, v in totals.items()]
        body.append('<section id="estimate"><h2>Dry-run estimate</h2>' + table(["total", "value"], rows, "estimate-table", [False, True]) + "</section>")
    if related:
        items = "".join(f'<li>{e(kind)}: <a href="{e(url)}">{e(label)}</a></li>' for kind, label, url in related)
        body.append(f'<section id="related"><h2>Related outputs</h2><ul>{items}</ul></section>')
    invocations = info.manifest.get("invocations") or []
    if invocations:
        rows = [(e(inv.get("started_at")), e(inv.get("finished_at") or "–"), e(inv.get("status")), e(fmt_value((inv.get("totals") or {}).get("seconds"))),
                 e(" ".join(str(a) for a in inv.get("argv") or [])))
                for inv in invocations]
        body.append('<section id="invocations"><h2>Invocations</h2>'
                    + table(["started", "finished", "status", "seconds", "command"], rows, "invocation-table", [False, False, False, True, False]) + "</section>")
    return page(f"{info.name} — {info.status}", "".join(body), crumbs(info), info.entry.label, tabs(info))


#: flagged sessions the run page lists (the rest: tables/audit_flags)
AUDIT_LISTED = 200


def audit_section(info: RunInfo, audit: Any) -> str:
    """The simulator audit (``audit.run.RunAudit``): the share of flagged sessions per condition and
    level, then each flagged session with its first flag, a link to its conversation."""
    from ray_knowsim.audit.checks import FLAG_KINDS

    rid = info.entry.id
    n, flagged = len(audit.sessions), audit.flagged_ids()
    head = (f"{len(flagged):,} of {n:,} ok sessions flagged" + (f" ({100 * len(flagged) / n:.0f}%)" if n else "")
            + f": {len(audit.flagged_ids('learner')):,} by a learner check, {len(audit.flagged_ids('extractor')):,} by an extractor check."
            + (f" {len(audit.not_audited):,} ok session(s) have no readable IU graph and were not audited." if audit.not_audited else ""))
    lead = ("Deterministic checks of the simulator against its own state (ray_knowsim.audit): the learner claiming or using an IU "
            "its state holds unaware, revealing the answer, or ending against its state; the extractor labelling an IU the reply "
            "never touches, ignoring one it covers at length, or labelling alike whatever the reply says. Each flag quotes its evidence.")
    summary = audit.tables()["audit"]
    rows = [(e(r["task"]), e(r["condition"]), e(r["knowledge_level"]), e(f"{int(r['n_flagged'])} of {int(r['n_sessions'])}"),
             e(f"{100 * float(r['flagged_share']):.0f}%"), e(int(r["n_learner_flagged"])), e(int(r["n_extractor_flagged"])))
            for _, r in summary.iterrows()]
    shares = table(["task", "condition", "level", "flagged", "share", "learner", "extractor"], rows, "audit-shares",
                   [False, False, False, True, True, True, True])
    first: dict[str, Any] = {}
    for f in audit.flags:
        first.setdefault(f.session_id, (f, set()))[1].add(f.kind)
    listed = []
    for sid, (f, kinds) in list(first.items())[:AUDIT_LISTED]:
        link = href(f"/run/{rid}/conversation", f"sid={_quote(sid)}")
        listed.append((f'<a class="audit-link" href="{e(link)}">{e(sid)}</a>', e(f.turn), e(", ".join(sorted(kinds))),
                       e(f.iu or "–"), e(f.evidence), e(f.why)))
    flags_table = table(["session", "turn", "kinds", "IU", "evidence (first flag)", "why"], listed, "audit-flags") if listed else ""
    more = f"<p class=note>{len(first) - AUDIT_LISTED:,} more in tables/audit_flags.</p>" if len(first) > AUDIT_LISTED else ""
    kinds = ", ".join(f"{k} ({FLAG_KINDS[k][0]})" for k in FLAG_KINDS)
    return (f'<section id="audit"><h2>Simulator audit</h2><p class="lead">{e(lead)}</p><p id="audit-headline"><b>{e(head)}</b></p>'
            f'{shares}{flags_table}{more}<p class="note">Kinds: {e(kinds)}.</p></section>')


def audit_flags_box(flags: Sequence[Any]) -> str:
    """The audit's flags on one conversation, above its transcript."""
    if not flags:
        return '<div class="note" id="audit-flags-none">The simulator audit flags nothing in this conversation.</div>'
    rows = [(e(f.turn), e(f.kind), e(f.iu or "–"), e(f.state or f.label or "–"), e(f.evidence), e(f.why)) for f in flags]
    return ('<div class="problems" id="audit-flags"><b>Simulator audit: ' + e(f"{len(flags)} flag(s)") + "</b>"
            + table(["turn", "kind", "IU", "state / label", "evidence", "why"], rows, "audit-flag-table") + "</div>")


def review_box(review: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> str:
    """The LLM review's findings on one conversation (one table per score set holding a review)."""
    parts = []
    for name, found in review:
        if not found:
            parts.append(f'<div class="note review-findings">LLM review ({e(name)}): no simulator error found.</div>')
            continue
        rows = [(e(f.get("turn")), e(f.get("party")), e(f.get("kind")), e(f.get("iu") or "–"), e(f.get("severity")),
                 e(f.get("evidence")) + ("" if f.get("quoted", True) else " <i>(not found verbatim in the turn)</i>"),
                 e(f.get("explanation") or "")) for f in found]
        parts.append(f'<div class="problems review-findings"><b>LLM review ({e(name)}): {e(len(found))} finding(s)</b>'
                     + table(["turn", "party", "kind", "IU", "severity", "evidence", "why"], rows, "review-table") + "</div>")
    return f'<div id="review-findings">{"".join(parts)}</div>' if parts else ""


# ----------------------------------------------------------------------------- the list


def _select(name: str, label: str, values: Sequence[str], chosen: str | None) -> str:
    opts = '<option value="">(any)</option>' + "".join(
        f'<option value="{e(v)}"{" selected" if v == chosen else ""}>{e(v)}</option>' for v in values
    )
    return f'<label>{e(label)}<select name="{e(name)}">{opts}</select></label>'


def filter_form(info: RunInfo, q: SessionQuery, facet_values: dict[str, list[str]]) -> str:
    selects = "".join(_select(key, LABELS[key], facet_values.get(key, []), q.equals.get(key)) for key in EQUALS)
    ranges = "".join(
        f'<span class="range">{e(col)} <input class="num" name="min.{e(col)}" placeholder="min" value="{e(_bound(q, col, 0))}">'
        f'–<input class="num" name="max.{e(col)}" placeholder="max" value="{e(_bound(q, col, 1))}"></span>'
        for col in RANGES
    )
    sort = "".join(f'<option value="{e(c)}"{" selected" if c == q.sort else ""}>{e(c)}</option>' for c in SORTABLE)
    per = "".join(f'<option{" selected" if n == q.per else ""}>{n}</option>' for n in (25, 50, 100, 200))
    return (
        f'<form class="filters" id="filters" method="get" action="{e(run_url(info.entry, "/sessions"))}">{selects}'
        f'<label>session id contains<input name="q" value="{e(q.q)}"></label>'
        f'<label><span><input type="checkbox" name="failed" value="1"{" checked" if q.failed_only else ""}> failed only</span></label>'
        f"<fieldset><legend>metric ranges</legend>{ranges}</fieldset>"
        f'<label>sort by<select name="sort">{sort}</select></label>'
        f'<label><span><input type="checkbox" name="desc" value="1"{" checked" if q.desc else ""}> descending</span></label>'
        f'<label>per page<select name="per">{per}</select></label>'
        f'<button type="submit" id="apply">Apply</button> <a href="{e(run_url(info.entry, "/sessions"))}">reset</a></form>'
    )


def _bound(q: SessionQuery, col: str, k: int) -> str:
    value = q.ranges.get(col, (None, None))[k]
    return "" if value is None else fmt_value(float(value), 6).rstrip("0").rstrip(".")


def _pager(info: RunInfo, q: SessionQuery, p: Page) -> str:
    base = f"/run/{info.entry.id}/sessions"
    prev = f'<a id="page-prev" href="{e(href(base, q.params(page=p.page - 1)))}">◀ previous</a>' if p.page > 1 else "<span>◀ previous</span>"
    nxt = f'<a id="page-next" href="{e(href(base, q.params(page=p.page + 1)))}">next ▶</a>' if p.page < p.pages else "<span>next ▶</span>"
    last = min(p.first + len(p.rows) - 1, p.matched)
    return (f'<div class="pager">{prev}<span id="page-pos">sessions {p.first:,}–{last:,} of {p.matched:,} matching '
            f"({p.total:,} committed) · page {p.page} of {p.pages}</span>{nxt}</div>")


def sessions_list(info: RunInfo, q: SessionQuery, p: Page, facet_values: dict[str, list[str]], problems: Sequence[str]) -> str:
    base = f"/run/{info.entry.id}/sessions"
    heads = ['<a href="{}">session</a>'.format(e(href(base, q.params(sort="session_id", desc=q.sort == "session_id" and not q.desc, page=1))))]
    for label, key, _ in LIST_COLUMNS:
        sort_key = "error_kind" if key == "error" else key
        if sort_key in SORTABLE:
            arrow = (" ▼" if q.desc else " ▲") if q.sort == sort_key else ""
            heads.append(f'<a href="{e(href(base, q.params(sort=sort_key, desc=q.sort == sort_key and not q.desc, page=1)))}">{e(label)}{arrow}</a>')
        else:
            heads.append(e(label))
    conv = q.params(page=1)
    rows = []
    for r in p.rows:
        sid = r.get("session_id") or ""
        link = href(f"/run/{info.entry.id}/conversation", f"sid={_quote(sid)}" + (f"&{conv}" if conv else ""))
        cells = [f'<a class="conv-link" href="{e(link)}">{e(sid)}</a>']
        for _, key, _ in LIST_COLUMNS:
            value = r.get(key)
            cells.append(status_badge(str(value)) if key == "status" and value is not None else e(fmt_value(value)))
        rows.append(cells)
    problem_box = ('<div class="problems" id="query-problems">' + "<br>".join(e(x) for x in problems) + "</div>") if problems else ""
    grid = table(heads, rows, "session-table", [False, *[n for _, _, n in LIST_COLUMNS]])
    body = (f"{incomplete_banner(info)}<section id=\"list\"><h2>Conversations</h2>{filter_form(info, q, facet_values)}{problem_box}"
            f"{_pager(info, q, p)}{grid if p.rows else '<p class=lead id=no-match>No session matches these filters.</p>'}</section>")
    return page(f"{info.name}: conversations", body, crumbs(info, ("conversations", None)), info.entry.label, tabs(info))


def _quote(text: str) -> str:
    return url_quote(text, safe="")


# ----------------------------------------------------------------------------- one conversation


def conversation(info: RunInfo, view: ConversationView, trajectory: str | None, q: SessionQuery,
                 prev_id: str | None, next_id: str | None, position: int | None, matched: int,
                 audit_flags: Sequence[Any] | None = None,
                 review: Sequence[tuple[str, Sequence[dict[str, Any]]]] = ()) -> str:
    s = view.session
    sid = str(s.get("session_id") or "")
    back = q.params()
    base = f"/run/{info.entry.id}/conversation"

    def step(ident: str, other: str | None, text: str) -> str:
        if other is None:
            return f"<span>{e(text)}</span>"
        return f'<a id="{ident}" href="{e(href(base, f"sid={_quote(other)}" + (f"&{back}" if back else "")))}">{e(text)}</a>'

    where = f"{position:,} of {matched:,} in the list" if position else "not in the current list"
    stepper = (f'<div class="stepper">{step("conv-prev", prev_id, "◀ previous")}<span id="conv-pos">{e(where)}</span>'
               f'{step("conv-next", next_id, "next ▶")}<a href="{e(href(f"/run/{info.entry.id}/sessions", back))}">back to the list</a>'
               '<label><input type="checkbox" id="only-moves"> only turns where an IU moved</label></div>')
    failed = ""
    if s.get("status") != "ok":
        reason = error_text(s.get("error"), s.get("error_detail"))
        failed = (f'<div class="problems" id="session-error"><b>status {e(s.get("status"))}</b>: {e(error_kind(s.get("error")) or "no error recorded")}'
                  f'{" · attempt " + e(s.get("attempt")) if s.get("attempt") else ""}'
                  + (f'<div id="session-error-detail">{e(reason)}</div>' if reason else "") + "</div>")
    judge = f'<p class="note">judge error: {e(s.get("judge_error"))}</p>' if s.get("judge_error") else ""
    flagged = (audit_flags_box(audit_flags) if audit_flags is not None else "") + review_box(review)
    body = (f'<section id="conversation">{stepper}{failed}{judge}{flagged}{legend()}'
            f"{conversation_article(view, SPECS, trajectory, 'conv-0')}</section>")
    return page(sid, body, crumbs(info, ("conversations", href(f"/run/{info.entry.id}/sessions", back)), (sid, None)), info.entry.label, tabs(info))


__all__ = ["conversation", "overview", "sessions_list"]
