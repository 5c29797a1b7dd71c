"""`ray-knowsim report`: files, printed path, numbers, escaping, self-containment, errors."""

from __future__ import annotations

import html
import re
from pathlib import Path

from tests.doubles.report_expect import expected_tables, formatted, page_cells

from ray_knowsim.cli.main import main
from tests.doubles.synthetic import HTML_PROBE


def _check_tables(page: str, run_dir: Path, variant: str) -> int:
    exp = expected_tables(run_dir, variant)
    cells = page_cells(page)
    checked = 0
    for (cond, level, key), value in exp["per_level"].items():
        assert cells[("per-level-table", key, cond, level)] == formatted(value, key), (cond, level, key)
        checked += 1
    for (cond, key), value in exp["marginal"].items():
        assert cells[("marginal-table", key, cond, None)] == formatted(value, key), (cond, key)
        rank = exp["rank"][(cond, key)]
        assert cells[("paper-rank-table", f"rank:{key}", cond, None)] == ("–" if rank is None else str(rank))
        checked += 2
    return checked


def test_cli_writes_page_and_markdown_and_prints_the_path(small_run, tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["report", str(small_run.run_dir), "--out", str(out), "--sample", "3", "--seed", "2"])
    assert rc == 0
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert Path(printed) == (out / "report.html").resolve() and Path(printed).is_file()
    md = (out / "report.md").read_text()
    page = Path(printed).read_text()
    assert _check_tables(page, small_run.run_dir, "final") > 40
    assert page.count('class="conv"') == 3
    exp = expected_tables(small_run.run_dir)
    for (cond, key), value in exp["marginal"].items():  # the Markdown holds the same numbers
        if value == value:
            assert formatted(value, key) in md, (cond, key)
    assert "| Level | Condition | n |" in md and "## Failure modes" in md and "final (end of conversation)" in md


def test_page_is_self_contained_and_escapes_conversation_text(small_report):
    explicit, sampled = small_report
    page = explicit.html_path.read_text()
    # no resource is fetched from anywhere: every src/href is a data URI or an in-page anchor
    for attr in re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page):
        assert attr.startswith(("data:", "#")), attr
    assert "url(" not in page and "@import" not in page and "http://" not in page and "https://" not in page
    assert page.count("<script") == 1  # ours only
    assert HTML_PROBE not in page and html.escape(HTML_PROBE, quote=True) in page
    assert page.count("data:image/png;base64,") == 3  # overview, failure modes, one trajectory
    assert explicit.content.conversations[0].session["session_id"].endswith("model-a:adaptive/0")
    # sampling spreads over levels and conditions
    shown = [v.session for v in sampled.content.conversations]
    assert len(shown) == 4 and len({s["knowledge_level"] for s in shown}) >= 2 and len({s["condition"] for s in shown}) >= 3


def test_early_stop_variant_reads_the_es_columns(small_run, tmp_path, capsys):
    rc = main(["report", str(small_run.run_dir), "--out", str(tmp_path), "--metrics", "es", "--sample", "0"])
    assert rc == 0
    path = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert path.name == "report_es.html"
    page = path.read_text()
    _check_tables(page, small_run.run_dir, "es")
    assert "at the virtual early stop" in page and "kg_es" in page
    assert "at the virtual early stop" in (tmp_path / "report_es.md").read_text()


def test_errors_are_clear(small_run, tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "sessions/" in capsys.readouterr().err
    assert main(["report", str(small_run.run_dir), "--out", str(tmp_path), "--sessions", "no/such/session"]) == 2
    assert "no/such/session" in capsys.readouterr().err
