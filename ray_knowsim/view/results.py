"""A run page's results: the report's own tables (level-marginalised, per level, failure modes).

Why the report's: the numbers come from the report's reduction (:mod:`ray_knowsim.report.aggregate`
and :mod:`ray_knowsim.report.tables`, the statistics the run's ``tables/`` and the terminal use)
and the HTML from the report's renderers (:mod:`ray_knowsim.report.html_page`), so the viewer,
the report and the terminal cannot show different numbers for one run. The metrics are the
report's (:func:`ray_knowsim.report.metrics.metric_specs`: the mean rank's, in its order, KG, DC,
CO, IQ); the other columns (NKG, IC, PO, engagement, the early-stop variants) stay in the raw tables below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ray_knowsim.report.aggregate import RunSummary
from ray_knowsim.report.content import ReportContent
from ray_knowsim.report.html_page import failure_modes_html, marginal_html, paper_rank_html, per_level_html
from ray_knowsim.report.metrics import MetricSpec, metric_specs
from ray_knowsim.report.tables import failure_table, marginal_table, per_level_table
from ray_knowsim.view.html import e

#: the report's metrics, in the report's (= the mean rank's) order
SPECS: tuple[MetricSpec, ...] = metric_specs("final", "kg")
METRIC_COLUMNS: tuple[str, ...] = tuple(s.column for s in SPECS)
#: the ids the report's sections carry (suffixed per task when a run has several)
SECTION_IDS = ("marginal", "per-level", "paper-rank", "failure-modes", "marginal-table", "per-level-table", "paper-rank-table",
               "failure-table", "failure-mode-plot")


def section(summary: RunSummary, task: str | None) -> ReportContent:
    """The report's content of one task's tables (no conversations, no figures)."""
    return ReportContent(
        title="", run_dir=Path("."), variant="final", specs=SPECS, summary=summary,
        per_level=per_level_table(summary, SPECS), marginal=marginal_table(summary, SPECS), failures=failure_table(summary),
        conversations=[], generated="", task=task,
    )  # fmt: skip


def results_html(summaries: Mapping[str | None, RunSummary]) -> str:
    """Per task: the marginal table, the per-level table, the paper's mean rank (its own labelled
    table) and the failure-mode table (folded). No verdicts are computed here, so no positions or ★."""
    if not summaries:
        return '<section id="results"><h2>Results</h2><p class="lead">No committed session yet: no results.</p></section>'
    several = len(summaries) > 1
    out = []
    for task, summary in summaries.items():
        c = section(summary, task)
        body = marginal_html(c) + per_level_html(c) + paper_rank_html(c) + failure_modes_html(c)
        if several:
            for ident in SECTION_IDS:
                body = body.replace(f'id="{ident}"', f'id="{ident}-{e(task)}"')
        title = f'<h2 class="task-title">Task: {e(task)}</h2>' if task else ""
        out.append(f'<div class="task-results" data-task="{e(task or "")}">{title}{body}</div>')
    return f'<div id="results">{"".join(out)}</div>'


__all__ = ["METRIC_COLUMNS", "SPECS", "results_html", "section"]
