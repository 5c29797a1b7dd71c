"""The report says what went wrong: it refuses an incomplete run unless told (then flags it), counts
failed sessions by error kind per condition with their reasons, truncated answers per role, and
warns when the simulator does not work. Runs are committed synthetic runs with planted failures."""

from __future__ import annotations

import re

import pytest

from ray_knowsim.cli.main import main
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.report.build import IncompleteRun, ReportOptions, build_report
from tests.doubles.broken import HTTP_400_DETAIL, broken_simulator, failures, truncations
from tests.doubles.rundirs import committed_run

PLAN = {"model-a:adaptive": (4, "extractor_http_400", HTTP_400_DETAIL), "model-b:socratic": (2, "assistant_truncated", None)}
TRUNCATED = {"model-a:comprehensive": {"assistant": 3}, "model-b:socratic": {"extractor": 1}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("plain_sight")
    return {
        "interrupted": committed_run(root, "interrupted", n_sessions=18, planned=96, status="interrupted", max_turns=3, seed=1),
        "failing": committed_run(root, "failing", n_sessions=24, max_turns=3, seed=2,
                                 edit=lambda s, t: truncations(*failures(s, t, PLAN), TRUNCATED)),
        "broken": committed_run(root, "broken", n_sessions=24, max_turns=3, seed=3, edit=broken_simulator),
        "all_failed": committed_run(root, "all_failed", n_sessions=12, all_failed=True, seed=4),
    }


def test_an_incomplete_run_is_refused_unless_told_then_flagged(runs, tmp_path, capsys):
    with pytest.raises(IncompleteRun, match=r"18 of 96 planned sessions committed: interrupted .*--allow-incomplete"):
        build_report(runs["interrupted"], tmp_path / "no")
    assert not (tmp_path / "no").exists()  # nothing written
    assert main(["report", str(runs["interrupted"]), "--out", str(tmp_path / "cli"), "--sample", "0"]) == 2
    assert "--allow-incomplete" in capsys.readouterr().err
    result = build_report(runs["interrupted"], tmp_path / "yes", ReportOptions(sample=0, allow_incomplete=True))
    page = result.html_path.read_text()
    banner = re.search(r'<div class="banner incomplete" id="incomplete-banner"[^>]*>(.*?)</div>', page).group(1)
    assert "18 of 96" in banner and "interrupted" in banner
    assert "**Incomplete run: 18 of 96 planned sessions.**" in result.markdown_path.read_text()
    # a complete run carries no such banner
    page = build_report(runs["failing"], tmp_path / "complete", ReportOptions(sample=0)).html_path.read_text()
    assert 'id="incomplete-banner"' not in page


def test_failed_sessions_by_kind_per_condition_with_their_reasons(runs, tmp_path):
    result = build_report(runs["failing"], tmp_path, ReportOptions(sample=0))
    page, md = result.html_path.read_text(), result.markdown_path.read_text()
    rows = re.findall(r'<tr data-condition="([^"]+)" data-kind="([^"]+)"><td class="cond">[^<]*</td><td>[^<]*</td><td>(\w+)</td>'
                      r'<td class="num">(\d+)</td><td class="num">(\d+)</td><td class="num">([\d.]+)%</td><td class="reason">([^<]*)</td>', page)
    sessions = RunReader.open(runs["failing"]).sessions.read(["condition"]).to_pandas().condition.value_counts()
    got = {(c, k): (cls, int(n), int(of), reason) for c, k, cls, n, of, _, reason in rows}
    assert got == {
        ("model-a:adaptive", "extractor_http_400"): ("infra", 4, sessions["model-a:adaptive"], HTTP_400_DETAIL),
        ("model-b:socratic", "assistant_truncated"): ("model", 2, sessions["model-b:socratic"], "–"),
    }
    assert f"| model-a:adaptive | extractor\\_http\\_400 | infra | 4 |" in md
    # next to the metrics: each condition's n says how many of its sessions the means leave out
    marginal = re.search(r'<table class="results" id="marginal-table">(.*?)</table>', page).group(1)
    notes = dict(re.findall(r'<td class="cond">([^<]+)</td><td class="num n">\d+<span class="ci failed-share" data-failed="(\d+)"', marginal))
    assert notes == {"model-a:adaptive": "4", "model-b:socratic": "2"}
    assert re.search(r"\| model-a:adaptive \| \d+ \(\+4 failed, \d+%\) \|", md)


def test_truncations_are_shown_per_role_not_as_extractor_drift(runs, tmp_path):
    result = build_report(runs["failing"], tmp_path, ReportOptions(sample=0))
    page = result.html_path.read_text()
    sessions = RunReader.open(runs["failing"]).sessions.read(["condition"]).to_pandas().condition.value_counts()
    table = re.search(r'<table id="truncation-table">(.*?)</table>', page).group(1)
    cells = {(c, role): int(n) for c, row in re.findall(r'<tr data-condition="([^"]+)">(.*?)</tr>', table)
             for role, n in re.findall(r'data-role="(\w+)">(\d+)<', row)}
    assert cells[("model-a:comprehensive", "assistant")] == 3 * sessions["model-a:comprehensive"]
    assert cells[("model-b:socratic", "extractor")] == sessions["model-b:socratic"]
    assert cells[("model-a:adaptive", "assistant")] == 0 and cells[("model-b:socratic", "assistant")] == 0
    chips = dict(re.findall(r'<span class="chip"><b>([^<]+)</b>([^<]*)</span>', page))
    assert "truncated" not in chips["extractor drift"]
    assert chips["truncated answers"] == (f"user_sim 0, assistant {3 * sessions['model-a:comprehensive']}, "
                                          f"extractor {sessions['model-b:socratic']}")


def test_a_simulator_that_does_not_work_is_said_on_the_page(runs, tmp_path):
    result = build_report(runs["broken"], tmp_path, ReportOptions(sample=0))
    page, md = result.html_path.read_text(), result.markdown_path.read_text()
    box = re.search(r'<div class="banner sanity" id="sanity-warnings"[^>]*>(.*?)</div>', page).group(1)
    checks = dict(re.findall(r'<li data-check="(\w+)" data-severe="(\w+)">', box))
    assert checks == {"uniform_labels": "true", "frozen_states": "true", "constant_judge": "true"}
    assert "72 of 72 answers" in box and "IQ 1 to every one of 24 judged conversations" in box
    assert "**The simulator may not be working**" in md
    # a working run's page has no such box
    assert 'id="sanity-warnings"' not in build_report(runs["failing"], tmp_path / "ok", ReportOptions(sample=0)).html_path.read_text()


def test_a_run_whose_every_session_failed_is_reported_with_its_failures(runs, tmp_path):
    page = build_report(runs["all_failed"], tmp_path, ReportOptions(sample=0)).html_path.read_text()
    kinds = re.findall(r'data-kind="([^"]+)"><td class="cond">[^<]*</td><td>[^<]*</td><td>\w+</td><td class="num">(\d+)</td>'
                       r'<td class="num">(\d+)</td><td class="num">100.0%</td>', page)
    assert kinds and {k for k, _, _ in kinds} == {"assistant_http_404"} and sum(int(n) for _, n, _ in kinds) == 12
    assert all(n == of for _, n, of in kinds)
