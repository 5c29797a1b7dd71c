"""One run, every surface (issue 51): a fixed run made by ``ray-knowsim run`` on the offline model,
then read back the way a person reads it -- the dry run printed before it, the terminal after it,
the report, ``ray-knowsim compare`` (its terminal and compare.json), and the viewer's run and
comparison pages -- and every fact shown on more than one of them is the same number in the same
words: the run's status, the multiplicity rule, the family's size and the items a verdict needs,
each significant verdict, the cost per decision and why it is in tokens.

The design decides something (30 generated practice items, two tutors, one level: a family of 16
needs 10 items), so the verdicts are not an empty list that every surface would trivially agree on.
The adaptive run's sessions are held the same way by tests/adaptive/test_one_voice.py, an
interrupted run's (Ctrl-C's message against its status line) by tests/run/test_stop_early.py."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re

import pandas as pd
import pytest

from ray_knowsim.cli.main import main as cli
from ray_knowsim.io.rundir import run_status_text
from ray_knowsim.schema.price import PRICED_AT_ZERO
from ray_knowsim.stats.multiplicity import correction_name, correction_short
from tests.doubles.run_config import write_config
from tests.doubles.viewer_http import get

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_local"), pytest.mark.timeout(900)]

CONFIG = {
    "name": "surfaces",
    "tasks": [{"name": "math", "items": "pkg:demo/practice_math.jsonl", "graphs": "pkg:demo/iu_practice_math.json"}],
    "levels": ["novice"],
    "models": {"offline": {"backend": "offline"}},
    "roles": {"user_sim": "offline", "extractor": "offline", "judge": "offline", "assistant": {"model": "offline"}},
    "conditions": [{"name": "adaptive", "strategy": "adaptive"}, {"name": "comprehensive", "strategy": "comprehensive"}],
    "trials": 1, "seed": 42, "max_turns": 4, "engine": {"shard_size": 10},
}  # fmt: skip


def _said(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli(argv)
    return code, out.getvalue()


def _flat(text: str) -> str:
    """Text with its line folds undone (the terminal wraps at 100 columns)."""
    return " ".join(text.split())


def _pages(root, run_name: str, cmp_name: str) -> tuple[str, str]:
    import threading

    from ray_knowsim.view.data import Files
    from ray_knowsim.view.discover import discover
    from ray_knowsim.view.routes import ViewState
    from ray_knowsim.view.server import serve

    state = ViewState(Files([root]))
    ready, started, stop = [], threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(state, "127.0.0.1", 0, lambda u: (ready.append(u), started.set()), stop),
                              daemon=True)
    thread.start()
    assert started.wait(30), "the viewer did not start"
    try:
        ids = {en.path.name: en.id for en in discover(state.files)}
        pages = [get(f"{ready[0]}{kind}/{ids[name]}") for kind, name in (("run", run_name), ("compare", cmp_name))]
    finally:
        stop.set()
        thread.join(10)
    assert all(status == 200 for status, _, _ in pages), [p[:2] for p in pages]
    return pages[0][2], pages[1][2]


@pytest.fixture(scope="module")
def said(tmp_path_factory) -> dict:
    from ray_knowsim.report.build import ReportOptions, build_report

    root = tmp_path_factory.mktemp("every_surface")
    config = write_config(root / "config", CONFIG)
    run, cmp = root / "surfaces", root / "cmp"
    code, dry = _said(["run", str(config), "-o", str(run), "--dry-run"])
    assert code == 0, dry
    code, terminal = _said(["run", str(config), "-o", str(run)])
    assert code == 0, terminal
    report = build_report(run, root / "report", ReportOptions(sample=0)).markdown_path.read_text(encoding="utf-8")
    code, compared = _said(["compare", str(run), "--out", str(cmp)])
    assert code == 0, compared
    run_page, compare_page = _pages(root, run.name, cmp.name)
    return {"run": run, "dry": _flat(dry), "terminal": _flat(terminal), "report": report, "compared": _flat(compared),
            "compare_json": json.loads((cmp / "compare.json").read_text(encoding="utf-8")),
            "paired": pd.read_parquet(cmp / "paired.parquet"), "run_page": html.unescape(run_page),
            "compare_page": _flat(html.unescape(re.sub(r"<[^>]+>", " ", compare_page)))}


def _terminal_verdicts(terminal: str) -> list[str]:
    block = terminal.split(" verdicts: ", 1)[1].split(" cost per decision: ", 1)[0]
    return [s.strip() for s in re.split(r"(?:^| )- ", block.strip()) if s.strip()]


def _report_verdicts(report: str) -> list[str]:
    block = report.split("\n## Verdicts\n", 1)[1].split("\n#", 1)[0]
    return [line[2:].strip() for line in block.splitlines() if line.startswith("- ")]


def test_the_run_decides_something(said):
    """The premise: without verdicts, every surface would agree on nothing."""
    significant = [v for v in said["compare_json"]["verdicts"] if v["significant"]]
    assert len(significant) >= 2, said["compare_json"]["verdicts"]


def test_every_significant_verdict_reads_the_same_in_the_terminal_the_report_compare_and_the_viewer(said):
    sentences = [f"{v['task']}: {v['sentence']}" for v in said["compare_json"]["verdicts"] if v["significant"]]
    assert _terminal_verdicts(said["terminal"]) == sentences
    assert _report_verdicts(said["report"]) == sentences
    for sentence in sentences:
        assert sentence in said["compared"], sentence
        assert sentence.split(": ", 1)[1] in said["compare_page"], sentence  # one task: the page names it once


def test_the_status_reads_the_same_in_the_terminal_the_report_and_the_viewer(said):
    status = run_status_text(said["run"])
    assert status == "complete (all 60 planned sessions committed, none failed)"
    assert re.search(rf"run surfaces-\w+: {re.escape(status)}; ", said["terminal"]), said["terminal"][-600:]
    assert f"- **status**: {status}\n" in said["report"]
    word, why = status.split(" (", 1)
    assert f"{why[:-1]}." in said["run_page"] and f">{word}<" in said["run_page"]


def test_the_family_and_the_items_a_verdict_needs_are_the_dry_runs_and_compares(said):
    paired = said["paired"]
    family, need = int(paired["family_size"].iloc[0]), int(paired["min_items"].iloc[0])
    assert (family, need) == (16, 10) and paired["family_size"].nunique() == paired["min_items"].nunique() == 1
    assert f"family of {family} comparisons" in said["dry"]
    assert f"a verdict needs at least {need} non-tied items" in said["dry"]
    assert f"over a family of {family}," in said["report"] and f"over a family of {family}," in said["compared"]


def test_the_multiplicity_rule_has_one_name(said):
    rule = correction_name(False)
    assert rule in said["report"] and rule in said["compare_json"]["test"] and rule in said["compare_page"]
    assert correction_short(False) in said["compared"]
    for surface in ("report", "compared", "compare_page"):
        assert "Bonferroni" not in said[surface], surface  # no effect margin: Holm's closure, named so everywhere


def test_the_cost_per_decision_and_why_it_is_in_tokens(said):
    line = re.search(r"cost per decision: (.*?\))", said["terminal"]).group(1)
    assert line.endswith(f"; cost: {PRICED_AT_ZERO})") and "decisions reached" in line
    assert f"**Cost per decision:** {line}" in said["report"]
    assert f'<span id="cost-per-decision">{line}</span>' in said["run_page"]
    # before the run, the same reason: the offline model is priced at $0 for the simulator and the judge
    assert "at best " in said["dry"] and f"; cost: {PRICED_AT_ZERO})" in said["dry"]
