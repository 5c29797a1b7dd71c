"""One run's cost per decision reads the same on every surface (issue 50): the terminal's result
after ``ray-knowsim run``, the report's Markdown and HTML, and the viewer's run page all print
the sentence of :func:`ray_knowsim.report.per_decision.run_per_decision`. Built from a committed
run directory (priced, with verdicts), without Ray or a model."""

from __future__ import annotations

import html
import re

import pytest

from ray_knowsim.io.rundir import RunReader
from ray_knowsim.report.decisions import run_verdicts
from ray_knowsim.report.per_decision import LABEL, run_per_decision
from ray_knowsim.report.run_result import result_lines
from ray_knowsim.score.spend import spend_of_run
from ray_knowsim.tables.cost import run_cost_table
from ray_knowsim.tables.reduce import ITEM_KEYS, SUM_COLUMNS, build_tables, normalise_sums, partial_moments
from tests.doubles.rundirs import committed_run, winning_every_item
from tests.doubles.viewer_http import served_run_page

A, B = "tutor-a", "tutor-b"
PRICE = 0.0125  # USD per session


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("per_decision")
    return committed_run(root / "runs", "planted", n_sessions=20 * 6, max_turns=2, seed=3, edit=winning_every_item(A),
                         price=PRICE, conditions={A: (2.5, 0.75, 0.8), B: (2.5, 0.75, 0.8)})


@pytest.fixture(scope="module")
def expected(run) -> str:
    """The one sentence, from the report's verdicts and THE cost table's run row."""
    reader = RunReader.open(run)
    per = run_per_decision(run_verdicts(run), run_cost_table(reader, None, spend_of_run(reader)).iloc[-1].to_dict())
    assert per is not None and per.unit == "usd" and per.decisions >= 4  # KG at every level and over all levels
    assert per.line.endswith(f"decisions reached, ${120 * PRICE:,.2f} in all)")
    return per.line


def _tables(run_dir) -> dict:
    rows = RunReader.open(run_dir).sessions.read()
    sums = partial_moments(rows).to_pandas().groupby(list(ITEM_KEYS), as_index=False)[list(SUM_COLUMNS)].sum()
    return build_tables(normalise_sums(sums))


def test_the_terminal_says_it(run, expected):
    text = " ".join(line.strip() for line in result_lines(run, _tables(run)))
    assert f"{LABEL}: {expected}" in text


def test_the_report_says_it_in_markdown_and_html(run, expected, tmp_path):
    from ray_knowsim.report.build import ReportOptions, build_report

    out = build_report(run, tmp_path / "report", ReportOptions(sample=0))
    assert f"**{LABEL.capitalize()}:** {expected}" in out.markdown_path.read_text(encoding="utf-8")
    page = out.html_path.read_text(encoding="utf-8")
    found = re.search(r'<p class="lead" id="cost-per-decision"><b>[^<]*</b> ([^<]*)</p>', page)
    assert found and html.unescape(found.group(1)) == expected


def test_the_viewers_run_page_says_it(run, expected):
    page = served_run_page(run.parent, run.name)
    found = re.search(r'<span id="cost-per-decision">([^<]*)</span>', page)
    assert found and html.unescape(found.group(1)) == expected
