"""The terminal result after `ray-knowsim run` (issue 51): every line within 100 columns, the means
with their intervals per condition and level, the report's verdict sentences (the same function),
the offline-double caveat exactly when the manifest names a test double, and a closing ``next:``
line naming the run directory. Built from committed run directories, without Ray or a model."""

from __future__ import annotations

import json
import shlex

import pandas as pd
import pytest

from ray_knowsim.io.rundir import RunReader
from ray_knowsim.report.banner import manifest_banner
from ray_knowsim.report.metrics import metric_specs
from ray_knowsim.report.run_result import closing_lines, result_lines
from ray_knowsim.report.terminal import WIDTH, metric_block, next_line, pack, verdict_block
from ray_knowsim.report.verdicts import NO_VERDICT
from ray_knowsim.tables.reduce import ITEM_KEYS, SUM_COLUMNS, build_tables, normalise_sums, partial_moments
from tests.doubles.rundirs import committed_run, winning_every_item

A, B = "tutor-a:adaptive-with-a-long-name", "tutor-b:comprehensive"


def tables_of(run_dir) -> dict[str, pd.DataFrame]:
    """The run's level and marginal tables as the run writes them (its reduction, without Ray Data)."""
    rows = RunReader.open(run_dir).sessions.read()
    sums = partial_moments(rows).to_pandas().groupby(list(ITEM_KEYS), as_index=False)[list(SUM_COLUMNS)].sum()
    return build_tables(normalise_sums(sums))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("terminal")
    return committed_run(root, "planted", n_sessions=20 * 6, max_turns=2, seed=3, edit=winning_every_item(A),
                         conditions={A: (2.5, 0.75, 0.8), B: (2.5, 0.75, 0.8)})


def with_doubles(run_dir, roles: list[str]) -> dict:
    """Rewrite the run's manifest to name ``roles`` as answered by the offline double."""
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["test_doubles"] = roles
    path.write_text(json.dumps(manifest))
    return manifest


def test_every_line_fits_100_columns_with_the_means_and_their_intervals(planted):
    tables = tables_of(planted)
    lines = result_lines(planted, tables) + closing_lines(planted)
    assert all(len(line) <= WIDTH for line in lines), [line for line in lines if len(line) > WIDTH]
    text = "\n".join(lines)
    lm = tables["level_means"].set_index(["condition", "knowledge_level"])
    row = lm.loc[(A, "advanced")]
    half = (row["kg_ci_high"] - row["kg_ci_low"]) / 2
    assert f"{row['kg']:.3f} ±{half:.3f}" in text  # the mean with its item-clustered half-width
    mg = tables["marginal"].set_index("condition")
    assert f"{mg.loc[B, 'co']:.3f} ±{(mg.loc[B, 'co_ci_high'] - mg.loc[B, 'co_ci_low']) / 2:.3f}" in text
    for label in ("KG", "DC", "CO", "IQ"):  # the report's columns, each explained once
        assert label in lines[lines.index("synthetic: 20 items") + 1]
    assert text.count("KG knowledge gain") == 1 and "CO cognitive overload (lower is better)" in text
    assert "more in the report:" in text and "mean rank" not in text.split("more in the report:")[0]


def test_a_metric_that_does_not_fit_is_named_as_left_to_the_report(planted):
    tables = tables_of(planted)
    specs = metric_specs()
    lines = metric_block(tables, specs, "synthetic", ["novice", "intermediate", "advanced"], width=60)
    assert all(len(line) <= 60 for line in lines)
    assert lines[0].startswith("synthetic: 20 items (") and "in the report)" in lines[0]


def test_the_verdicts_are_the_reports_sentences(planted):
    from ray_knowsim.report.decisions import decision_sections

    _, md, verdicts = decision_sections(planted)
    head = md.index("## Verdicts")
    report = [line[2:] for line in md[head + 2:] if line.startswith("- ")][: len(verdicts.significant())]
    assert report and any(f"{A} teaches more (KG) than {B}" in s for s in report)
    lines = result_lines(planted, tables_of(planted))
    start = lines.index("verdicts:")
    said, current = [], None
    for line in lines[start + 1:]:
        if line.startswith("  - "):
            current = line[4:]
            said.append(current)
        elif line.startswith("    ") and said:
            said[-1] += " " + line.strip()
        else:
            break
    shown = report[: len(said) - (1 if said[-1].startswith("...") else 0)]
    assert said[: len(shown)] == shown


def test_no_verdict_is_said_in_the_reports_words():
    lines = verdict_block([NO_VERDICT])
    assert lines[0] == "verdicts:" and lines[1].startswith("  - ")
    assert " ".join(line[4:] for line in lines[1:]) == NO_VERDICT
    many = verdict_block([f"math: verdict {k}" for k in range(12)], limit=8)
    assert many[-1] == "  ... and 4 more in the report" and len(many) == 10


def test_the_caveat_is_there_exactly_when_a_test_double_answered(tmp_path):
    run = committed_run(tmp_path, "two", n_sessions=24, max_turns=2, seed=1)
    tables = tables_of(run)
    real = "\n".join(result_lines(run, tables))
    assert "NOT A REAL-MODEL MEASUREMENT" not in real and "OFFLINE" not in real
    manifest = with_doubles(run, ["extractor", "user_sim"])
    lines = result_lines(run, tables)
    start = next(k for k, line in enumerate(lines) if line.startswith("NOT A REAL-MODEL MEASUREMENT."))
    caveat = " ".join(lines[start: lines.index("", start)])
    assert caveat == f"NOT A REAL-MODEL MEASUREMENT. {manifest_banner(manifest)}"  # the report's and the viewer's text
    assert all(len(line) <= WIDTH for line in lines)


def test_the_next_line_names_the_run_dir(tmp_path, monkeypatch):
    run = committed_run(tmp_path, "two", n_sessions=24, max_turns=2, seed=1)
    lines = closing_lines(run)  # outside the working directory: the absolute path
    assert lines[0].startswith("next: ") and len(lines) <= 2
    assert f"ray-knowsim view {run.resolve()}" in lines[0] and f"ray-knowsim report {run.resolve()}" in lines[-1]
    monkeypatch.chdir(tmp_path)
    assert closing_lines(run) == ["next: ray-knowsim view two   |   ray-knowsim report two"]
    odd = "runs/a dir with spaces/" + "x" * 40
    assert next_line(odd) == [f"next: ray-knowsim view {shlex.quote(odd)}", f"      ray-knowsim report {shlex.quote(odd)}"]


def test_pack_never_splits_a_part():
    parts = [f"role{k} {1000 * k} calls/{123456 * k} tok" for k in range(8)]
    lines = pack("llm: ", parts, width=60)
    assert all(len(line) <= 60 for line in lines)
    assert " ".join(line.strip() for line in lines) == "llm: " + ", ".join(parts)
