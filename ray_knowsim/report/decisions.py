"""The report's decision sections: "who beats whom" per level and what the run cost.

Both come from the same code as ``ray-knowsim compare`` (:mod:`ray_knowsim.compare`) and the
run's cost table (:mod:`ray_knowsim.io.cost`), computed from the run directory's session rows.
"""

from __future__ import annotations

import html
import logging
import math
from pathlib import Path

import pandas as pd

from ray_knowsim.compare.leaderboard import NOTE as BEATS_NOTE
from ray_knowsim.compare.leaderboard import beats_html, beats_markdown
from ray_knowsim.compare.paired import ALL_LEVELS, CompareOptions, analyse
from ray_knowsim.model.states import level_order
from ray_knowsim.compare.pipeline import default_metrics
from ray_knowsim.compare.runs import load_runs
from ray_knowsim.io.cost import cost_table, read_cost_columns
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.score.store import RunScores

log = logging.getLogger(__name__)
NOTE = (BEATS_NOTE + " The family is every comparison of the run (alpha 0.05); CO and PO count lower as better. "
        "Details with intervals and minimum detectable effects: ray-knowsim compare RUN_DIR --out DIR.")


def decision_sections(run_dir: str | Path, n_boot: int = 1000, scores: RunScores | None = None,
                      reader: RunReader | None = None) -> tuple[list[str], list[str]]:
    """(HTML sections, Markdown lines); empty when there is nothing to compare or cost.
    ``scores`` / ``reader``: the run's score sets and reader when the caller already has them."""
    html_parts: list[str] = []
    md: list[str] = []
    try:
        run = load_runs([run_dir])[0]
    except Exception as exc:  # noqa: BLE001 - a run compare cannot read (e.g. an old format): the report shows the rest
        why = f"not computed: compare cannot read this run ({type(exc).__name__}: {exc})"
        log.warning("report of %s: who-beats-whom %s", run_dir, why)
        html_parts.append(f'<section id="who-beats-whom"><h2>Who beats whom</h2><p class="lead">{html.escape(why)}</p></section>')
        md += ["## Who beats whom", "", why, ""]
        run = None
    if run is not None and len(run.conditions) > 1 and len(run.sessions):
        tables = analyse(run.sessions, run.conditions, CompareOptions(metrics=default_metrics(run.sessions), n_boot=n_boot))
        paired = tables["paired"]
        blocks, md_blocks = [], []
        for task in sorted(paired["task"].unique()):
            here = [v for v in paired[paired["task"] == task]["knowledge_level"].unique() if v != ALL_LEVELS]
            levels = [*level_order(here), ALL_LEVELS]
            for level in levels:
                blocks.append(beats_html(paired, task, level))
                md_blocks += [f"### {task}, level {level}", "", *beats_markdown(paired, task, level), ""]
        html_parts.append('<section id="who-beats-whom"><h2>Who beats whom</h2>'
                          f'<p class="lead">{html.escape(NOTE)}</p>{"".join(blocks)}</section>')
        md += ["## Who beats whom", "", NOTE, "", *md_blocks]
    reader = reader if reader is not None else RunReader.open(run_dir)
    if reader.sessions.files:
        scores = scores if scores is not None else RunScores.load(run_dir, reader)
        cost = cost_table(read_cost_columns(reader.sessions, scores.attach if scores.sets else None))
        html_parts.append(_cost_html(cost))
        md += _cost_md(cost)
    return html_parts, md


def _usd(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"${x:,.4f}"


def _cost_rows(cost: pd.DataFrame) -> list[list[str]]:
    return [[str(r["task"]), str(r["condition"]), f"{int(r['n_sessions']):,}", f"{int(r['requests']):,}",
             f"{int(r['prompt_tokens']):,}", f"{int(r['cached_prompt_tokens']):,}", f"{int(r['completion_tokens']):,}",
             _usd(r["cost_usd"]), _usd(r["cost_usd_per_session"])] for _, r in cost.iterrows()]


HEADS = ["task", "condition", "sessions", "requests", "prompt tokens", "cached prompt", "completion tokens", "cost (USD)", "per session"]


def _cost_html(cost: pd.DataFrame) -> str:
    e = html.escape
    num = ' class="num"'
    body = "".join("<tr>" + "".join(f"<td{num if k > 1 else ''}>{e(v)}</td>" for k, v in enumerate(row)) + "</tr>"
                   for row in _cost_rows(cost))
    return ('<section id="cost"><h2>Cost</h2><p class="lead">Tokens the models reported and their price (USD per million '
            'tokens on each model entry; the offline model is free). "–": a model without a price.</p>'
            f'<table><thead><tr>{"".join(f"<th>{e(h)}</th>" for h in HEADS)}</tr></thead><tbody>{body}</tbody></table></section>')


def _cost_md(cost: pd.DataFrame) -> list[str]:
    out = ["## Cost", "", "| " + " | ".join(HEADS) + " |", "|---|---|" + "---:|" * (len(HEADS) - 2)]
    out += ["| " + " | ".join(row) + " |" for row in _cost_rows(cost)]
    return out + [""]


__all__ = ["decision_sections"]
