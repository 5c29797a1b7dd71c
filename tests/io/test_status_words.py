"""One word for each run status and one wording for "no price", wherever a person reads them: the
run command's final line (run.fan_out.RunOutcome.status_word), the report and the viewer all take
the word from io.rundir.STATUS_WORDS; every cost shown is schema.price.usd_text. An all-failed run
is "all sessions failed" in all three, and an unpriced run never reads "$0.0000"."""

from __future__ import annotations

from pathlib import Path

import pytest

from ray_knowsim.run.fan_out import RunOutcome
from ray_knowsim.io.rundir import STATUS_WORDS, open_run, status_key, status_words
from ray_knowsim.report.build import ReportOptions, build_report
from ray_knowsim.schema.price import NO_PRICE
from ray_knowsim.view.discover import run_status
from tests.doubles.rundirs import committed_run


@pytest.mark.parametrize(("reason", "committed", "failed", "errored", "key"), [
    (None, 10, 0, False, "complete"), (None, 10, 3, False, "with_failures"), (None, 10, 10, False, "all_failed"),
    (None, 10, 0, True, "failed"), ("interrupted", 4, 4, False, "interrupted"), ("running", 0, 0, False, "running"),
    ("stopped_on_failures", 6, 6, False, "stopped_on_failures"), ("incomplete", 3, 0, False, "incomplete"),
])  # fmt: skip
def test_status_key(reason, committed, failed, errored, key):
    assert status_key(reason, committed, failed, errored=errored) == key and key in STATUS_WORDS


def _outcome(n_ok: int, n_failed: int, **kw) -> RunOutcome:
    return RunOutcome(Path("."), "r", "h", n_ok + n_failed, n_ok, n_failed, 0, 1, **kw)


@pytest.mark.timeout(300)
def test_an_all_failed_run_has_one_word_in_the_terminal_the_report_and_the_viewer(tmp_path):
    run_dir = committed_run(tmp_path, "all_failed", n_sessions=16, all_failed=True, status="ok_with_failed_sessions", seed=6)
    reader = open_run(run_dir)
    st = reader.status()
    viewer_word, _ = run_status(reader.manifest, st.completeness(), st.n_committed, st.n_failed)
    terminal_word = _outcome(0, 16).status_word
    report = build_report(run_dir, tmp_path / "report", ReportOptions(allow_incomplete=True))
    assert report.content.status[0] == viewer_word == terminal_word == STATUS_WORDS["all_failed"] == "all sessions failed"
    assert "<b>status</b>all sessions failed" in report.html_path.read_text(encoding="utf-8")
    assert "**status**: all sessions failed" in report.markdown_path.read_text(encoding="utf-8")
    assert _outcome(16, 0).status_word == status_words({"status": "ok"}, st.completeness(), 16, 0)[0] == "complete"


def test_an_unpriced_run_reads_no_price_given_never_zero_dollars(tmp_path):
    from ray_knowsim.view.discover import RunInfo

    info = RunInfo.__new__(RunInfo)
    info.cost_usd, info.priced_sessions, info.committed = None, 0, 16
    assert info.cost_text == NO_PRICE
    info.priced_sessions = 4
    assert info.cost_text == f"{NO_PRICE} (4 of 16 sessions priced)"
