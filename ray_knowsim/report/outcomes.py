"""The report's account of what went wrong: an incomplete run, a simulator that does not work,
failed sessions by error kind per condition, truncated answers per role.

The numbers are not computed here: the counts are :mod:`ray_knowsim.tables.outcomes` (the same
function the run's tables and the viewer use), the checks :mod:`ray_knowsim.tables.sanity`, the n of
N planned :meth:`ray_knowsim.io.rundir.RunStatus.completeness`. This module renders them, as HTML
and as Markdown, for the page's top (the flags) and for each task's section (the tables).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from ray_knowsim.tables.outcomes import TRUNCATION_COLUMNS
from ray_knowsim.schema.results import TRUNCATION_ROLES
from ray_knowsim.report.conversation_html import e
from ray_knowsim.report.escape import escape_md as _md

if TYPE_CHECKING:
    from ray_knowsim.report.content import ReportContent

CSS = """
.banner.sanity { border-color:#b91c1c; background:#fef2f2; color:#7f1d1d; }
.banner.sanity li { margin:2px 0; }
.banner.incomplete { border-color:#1d4ed8; background:#eff6ff; color:#1e3a8a; }
.failed-share { color:#b91c1c; }
td.reason { max-width:46em; font-size:12px; color:#374151; overflow-wrap:anywhere; }
"""


def _task_rows(df: pd.DataFrame | None, task: str | None) -> pd.DataFrame:
    if df is None or df.empty:
        return pd.DataFrame(columns=[] if df is None else df.columns)
    return df[df["task"] == task] if task is not None and "task" in df.columns else df


# ----------------------------------------------------------------------------- the page's flags


def flags_html(c: "ReportContent") -> str:
    """The incomplete-run banner and the sanity warnings, on top of the page."""
    out = []
    comp = c.completeness
    if comp is not None and comp.incomplete:
        out.append(f'<div class="banner incomplete" id="incomplete-banner" role="note"><b>Incomplete run: {e(comp.progress)} '
                   f"planned sessions.</b> {e(comp.text)}. Reported with --allow-incomplete: the tables and ranks cover only "
                   "what was committed, and may name another winner than the full run.</div>")
    if c.sanity is not None and c.sanity.warnings:
        items = "".join(f'<li data-check="{e(w.check)}" data-severe="{str(w.severe).lower()}"><b>{"severe" if w.severe else "warning"}'
                        f"</b> ({e(w.check)}): {e(w.text)}</li>" for w in c.sanity.warnings)
        out.append(f'<div class="banner sanity" id="sanity-warnings" role="alert"><b>{e(c.sanity.heading())}</b> '
                   "These checks read the rows themselves (ray_knowsim.tables.sanity; thresholds there): a broken learner-side "
                   f"model or tutor makes numbers that look like results.<ul>{items}</ul></div>")
    return "".join(out)


def flags_markdown(c: "ReportContent") -> list[str]:
    out: list[str] = []
    comp = c.completeness
    if comp is not None and comp.incomplete:
        out += [f"> **Incomplete run: {_md(comp.progress)} planned sessions.** {_md(comp.text)}. Reported with "
                "--allow-incomplete: the tables and ranks cover only what was committed.", ""]
    if c.sanity is not None and c.sanity.warnings:
        out += [f"> **{_md(c.sanity.heading()).rstrip('.')}** (checks of ray\\_knowsim.io.sanity):"]
        out += [f"> - **{'severe' if w.severe else 'warning'}** ({_md(w.check)}): {_md(w.text)}" for w in c.sanity.warnings]
        out.append("")
    return out


# ----------------------------------------------------------------------------- next to the metrics


def _failed_of(c: "ReportContent", condition: str, level: str | None) -> tuple[int, int]:
    """(failed, all) sessions of a condition (at one level, or over every level) of this section."""
    levels = [level] if level is not None else c.summary.levels
    counts = [c.summary.status.get((condition, lv)) for lv in levels]
    total = sum(sum(n.values()) for n in counts if n)
    return total - sum(n.get("ok", 0) for n in counts if n), total


def failed_note_html(c: "ReportContent", condition: str, level: str | None = None) -> str:
    """Beside a cell's n: how many of its sessions failed (the means leave them out), e.g. "+6 failed (25%)"."""
    failed, total = _failed_of(c, condition, level)
    if not failed:
        return ""
    return f'<span class="ci failed-share" data-failed="{failed}">+{failed:,} failed ({100 * failed / total:.0f}%)</span>'


def failed_note_markdown(c: "ReportContent", condition: str, level: str | None = None) -> str:
    failed, total = _failed_of(c, condition, level)
    return f" (+{failed:,} failed, {100 * failed / total:.0f}%)" if failed else ""


# ----------------------------------------------------------------------------- per task


def failed_html(c: "ReportContent") -> str:
    rows = _task_rows(c.failure_kinds, c.task)
    if rows.empty:
        return '<section id="failed-sessions"><h2>Failed sessions</h2><p class="lead">No session failed.</p></section>'
    trs = "".join(
        f'<tr data-condition="{e(r["condition"])}" data-kind="{e(r["error_kind"])}"><td class="cond">{e(r["condition"])}</td>'
        f'<td>{e(r["error_kind"])}</td><td>{e(r["failure_class"])}</td><td class="num">{int(r["n_failed"]):,}</td>'
        f'<td class="num">{int(r["n_sessions"]):,}</td><td class="num">{100 * float(r["share"]):.1f}%</td>'
        f'<td class="reason">{e(r["example"] or "–")}</td></tr>'
        for _, r in rows.iterrows()
    )
    total = int(rows["n_failed"].sum())
    return (
        '<section id="failed-sessions"><h2>Failed sessions by error kind</h2>'
        f'<p class="lead">{total:,} failed session(s), per condition and error kind (levels summed; per level in '
        "RUN_DIR/tables/failures.csv). The means above leave these out: a condition that fails often is measured on "
        "its easier cases. infra failures are rerun by a resume; model failures are results.</p>"
        '<table id="failed-table"><thead><tr><th>Condition</th><th>Error kind</th><th>Class</th><th class="num">failed</th>'
        f'<th class="num">of sessions</th><th class="num">share</th><th>Reason (first seen)</th></tr></thead><tbody>{trs}</tbody></table></section>'
    )


def truncations_html(c: "ReportContent") -> str:
    rows = _task_rows(c.truncations, c.task)
    if rows.empty or not int(rows["llm_truncations"].sum()):
        return '<section id="truncations"><h2>Truncated answers</h2><p class="lead">No answer was cut at max_tokens.</p></section>'
    unattributed = int(rows["unattributed"].sum()) > 0
    head = "".join(f'<th class="num">{e(r)}</th>' for r in TRUNCATION_ROLES) + ('<th class="num">role not recorded</th>' if unattributed else "")
    trs = "".join(
        f'<tr data-condition="{e(r["condition"])}"><td class="cond">{e(r["condition"])}</td>'
        + "".join(f'<td class="num" data-role="{e(role)}">{int(r[col]):,}</td>' for role, col in zip(TRUNCATION_ROLES, TRUNCATION_COLUMNS))
        + (f'<td class="num">{int(r["unattributed"]):,}</td>' if unattributed else "") + "</tr>"
        for _, r in rows.iterrows()
    )
    return (
        '<section id="truncations"><h2>Truncated answers per role</h2>'
        '<p class="lead">Answers cut at the role\'s max_tokens, per condition and role, over every session (a truncated '
        "first try is asked again with the role's whole budget; one cut at the cap fails as &lt;role&gt;_truncated unless it "
        "still reads). A tutor's long answers are the tutor's, not extractor drift.</p>"
        f'<table id="truncation-table"><thead><tr><th>Condition</th>{head}</tr></thead><tbody>{trs}</tbody></table></section>'
    )


def task_sections_markdown(c: "ReportContent", deeper: str) -> list[str]:
    out: list[str] = []
    rows = _task_rows(c.failure_kinds, c.task)
    out += [f"{deeper}## Failed sessions by error kind", ""]
    if rows.empty:
        out += ["No session failed.", ""]
    else:
        out += ["| Condition | Error kind | Class | failed | of sessions | share | Reason (first seen) |",
                "| --- | --- | --- | ---: | ---: | ---: | --- |"]
        out += [f"| {_md(r['condition'])} | {_md(r['error_kind'])} | {_md(r['failure_class'])} | {int(r['n_failed']):,} | "
                f"{int(r['n_sessions']):,} | {100 * float(r['share']):.1f}% | {_md(r['example'] or '–')} |" for _, r in rows.iterrows()]
        out.append("")
    trunc = _task_rows(c.truncations, c.task)
    if not trunc.empty and int(trunc["llm_truncations"].sum()):
        out += [f"{deeper}## Truncated answers per role", "", "| Condition | " + " | ".join(TRUNCATION_ROLES) + " |",
                "| --- |" + " ---: |" * len(TRUNCATION_ROLES)]
        out += [f"| {_md(r['condition'])} | " + " | ".join(f"{int(r[col]):,}" for col in TRUNCATION_COLUMNS) + " |" for _, r in trunc.iterrows()]
        out.append("")
    return out


__all__ = ["CSS", "failed_html", "failed_note_html", "failed_note_markdown", "flags_html", "flags_markdown", "task_sections_markdown", "truncations_html"]
