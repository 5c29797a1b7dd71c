"""The report's simulator audit: how many sessions the audit flags per condition and level, which
ones and why, and which verdicts change without them.

Nothing is computed here but the rendering: the flags are :func:`ray_knowsim.audit.run.audit_run`
(the run's ``tables/audit*`` hold the same), the verdicts :mod:`ray_knowsim.compare.sensitivity`
(compare's verdict procedure, run twice). The viewer's run page lists the same flagged sessions,
each a link to its conversation.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import pandas as pd

from ray_knowsim.audit.checks import FLAG_KINDS
from ray_knowsim.audit.run import RunAudit

#: flagged sessions listed with their evidence (the tables and the viewer hold every one)
LISTED = 40
NOTE = ("Deterministic checks of the simulator against its own state (ray_knowsim.audit; no model, no cost): the learner "
        "claiming or using an IU its state holds unaware (matched against the IU's wording in the graph), revealing the "
        "answer, or announcing an end its state contradicts; the extractor labelling well_explained an IU the reply never "
        "touches, not_mentioned one it covers at length, or the same labels whatever the reply says. Lexical: a flag is "
        "evidence to read, quoted below; it misses paraphrases. Open each flagged conversation in the viewer "
        "(ray-knowsim view RUN_DIR: the run's page lists them).")


@dataclass
class AuditSection:
    audit: RunAudit
    sensitivity: pd.DataFrame | None = None  # compare.sensitivity.verdict_sensitivity's table
    why_no_sensitivity: str = ""
    changed: list[str] = field(default_factory=list)
    review: pd.DataFrame | None = None  # score.review's agreement of the LLM review with the audit (None: no review)


def _share_rows(summary: pd.DataFrame) -> list[list[str]]:
    return [[str(r["task"]), str(r["condition"]), str(r["knowledge_level"]), f"{int(r['n_flagged'])} of {int(r['n_sessions'])}",
             f"{100 * float(r['flagged_share']):.0f}%", str(int(r["n_learner_flagged"])), str(int(r["n_extractor_flagged"]))]
            for _, r in summary.iterrows()]


SHARE_HEAD = ["task", "condition", "level", "flagged sessions", "share", "learner", "extractor"]
FLAG_HEAD = ["session", "turn", "kind", "IU", "evidence", "why"]


def _headline(a: RunAudit) -> str:
    n, flagged = len(a.sessions), len(a.flagged_ids())
    learner, extractor = len(a.flagged_ids("learner")), len(a.flagged_ids("extractor"))
    share = f" ({100 * flagged / n:.0f}%)" if n else ""
    tail = "" if a.answers_checked else " The items' reference answers could not be read: the answer check did not run."
    if a.not_audited:
        tail += f" {len(a.not_audited):,} ok session(s) have no readable IU graph and were not audited."
    return (f"{flagged:,} of {n:,} ok sessions flagged{share}: {learner:,} by a learner check, {extractor:,} by an "
            f"extractor check; {len(a.flags):,} flags in all.{tail}")


def _kind_counts(a: RunAudit) -> list[list[str]]:
    rows = []
    for kind, (party, meaning) in FLAG_KINDS.items():
        sessions = {f.session_id for f in a.flags if f.kind == kind}
        rows.append([kind, party, meaning, str(len(sessions)), str(sum(f.kind == kind for f in a.flags))])
    return rows


def _listed(a: RunAudit) -> list[list[str]]:
    first: dict[str, list] = {}
    for f in a.flags:  # one line per (session, kind): its first flag
        first.setdefault(f"{f.session_id}\x00{f.kind}", [f.session_id, str(f.turn), f.kind, f.iu, f.evidence, f.why])
    return list(first.values())[:LISTED]


def _table_html(head: list[str], rows: list[list[str]], css: str = "") -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{css}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _table_md(head: list[str], rows: list[list[str]]) -> list[str]:
    from ray_knowsim.report.escape import escape_md as _md

    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(_md(c) for c in r) + " |" for r in rows)]


def _sensitivity_text(s: AuditSection) -> str:
    if s.sensitivity is None:
        return s.why_no_sensitivity or "Verdicts were not recomputed."
    n = len(s.sensitivity)
    k = int(s.sensitivity["changed"].sum()) if n else 0
    if not s.audit.flagged_ids():
        return "No session is flagged, so no verdict depends on a flagged one."
    return (f"Recomputed without the flagged sessions (compare's verdict procedure): {k} of {n} verdicts change"
            + (":" if k else "; every verdict holds without them."))


REVIEW_HEAD = ["score set", "kind", "sessions", "audit flags", "review finds", "both", "agreement", "kappa", "review TPR", "review TNR"]
REVIEW_NOTE = ("The optional LLM review of the simulator (ray-knowsim score RUN_DIR --judges simulator_review --name review) "
               "against this audit, session by session: per kind, how many sessions each side flags, both, Cohen's kappa and "
               "the review's TPR/TNR with the audit as the reference. The review's findings, with severity and quoted "
               "evidence, are in its score set's rows.")


def _num(v: object, fmt: str = "{:.2f}") -> str:
    return "-" if v is None or pd.isna(v) else fmt.format(v)


def _review_rows(review: pd.DataFrame) -> list[list[str]]:
    shared = review[review["shared"].astype(bool)]
    return [[str(r["score_set"]), str(r["kind"]), _num(r["n_sessions"], "{:.0f}"), _num(r["n_audit"], "{:.0f}"),
             _num(r["n_review"], "{:.0f}"), _num(r["n_both"], "{:.0f}"), _num(r["agreement"]), _num(r["kappa"]),
             _num(r["review_tpr"]), _num(r["review_tnr"])] for _, r in shared.iterrows()]


def _review_only(review: pd.DataFrame) -> str:
    rest = review[~review["shared"].astype(bool) & (review["n_review"].fillna(0) > 0)]
    if rest.empty:
        return ""
    return "Kinds only the review knows: " + ", ".join(f"{r['kind']} ({int(r['n_review'])} sessions, {r['score_set']})" for _, r in rest.iterrows()) + "."


def audit_html(s: AuditSection) -> str:
    a = s.audit
    parts = [f'<section id="simulator-audit"><h2>Simulator audit</h2><p class="lead">{html.escape(NOTE)}</p>',
             f'<p id="audit-headline"><b>{html.escape(_headline(a))}</b></p>']
    summary = a.tables()["audit"]
    if not summary.empty:
        parts.append(_table_html(SHARE_HEAD, _share_rows(summary), "audit-shares"))
        parts.append(_table_html(["kind", "party", "what it means", "sessions", "flags"], _kind_counts(a), "audit-kinds"))
    parts.append(f'<h3>Verdicts without the flagged sessions</h3><p id="audit-sensitivity">{html.escape(_sensitivity_text(s))}</p>')
    if s.changed:
        parts.append("<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in s.changed) + "</ul>")
    listed = _listed(a)
    if listed:
        more = len({(f.session_id, f.kind) for f in a.flags}) - len(listed)
        parts.append(f"<h3>Flagged sessions</h3><p>First flag of each (session, kind){f'; {more} more in tables/audit_flags' if more > 0 else ''}.</p>")
        parts.append(_table_html(FLAG_HEAD, listed, "audit-flags"))
    if s.review is not None and not s.review.empty:
        parts.append(f'<h3 id="review-agreement">LLM review vs the audit</h3><p>{html.escape(REVIEW_NOTE)}</p>')
        parts.append(_table_html(REVIEW_HEAD, _review_rows(s.review), "review-agreement"))
        if _review_only(s.review):
            parts.append(f"<p>{html.escape(_review_only(s.review))}</p>")
    parts.append("</section>")
    return "".join(parts)


def audit_markdown(s: AuditSection) -> list[str]:
    a = s.audit
    out = ["## Simulator audit", "", NOTE, "", f"**{_headline(a)}**", ""]
    summary = a.tables()["audit"]
    if not summary.empty:
        out += [*_table_md(SHARE_HEAD, _share_rows(summary)), ""]
    out += ["### Verdicts without the flagged sessions", "", _sensitivity_text(s), "", *(f"- {line}" for line in s.changed), ""]
    listed = _listed(a)
    if listed:
        out += ["### Flagged sessions", "", *_table_md(FLAG_HEAD, listed), ""]
    if s.review is not None and not s.review.empty:
        out += ["### LLM review vs the audit", "", REVIEW_NOTE, "", *_table_md(REVIEW_HEAD, _review_rows(s.review)), ""]
        if _review_only(s.review):
            out += [_review_only(s.review), ""]
    return out


__all__ = ["AuditSection", "audit_html", "audit_markdown"]
