"""`ray-knowsim sweep` ends with a short summary (issue 51): the mean Kendall tau vs the default and
the most influential parameter -- the numbers report/index.md states, from one function -- lines
at most 100 columns; ``--json`` prints the record (progress on stderr) with the same numbers."""

from __future__ import annotations

import json

import yaml

from ray_knowsim.cli.main import main
from tests.doubles.sweep_runs import run_dir_config

SPACE = {"grid": {"capacity_ratio": [0.4, 0.55, 0.7], "hinge": [True, False]}}


def _config(run_dir, tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(run_dir_config(run_dir, tmp_path / "out", space=SPACE, report={"plots": False})))
    return path


def test_the_summary_leads_with_the_reports_headline(run_dir, tmp_path, capsys):
    path = _config(run_dir, tmp_path)
    assert main(["sweep", str(path), "--no-ray"]) == 0
    printed = capsys.readouterr().out
    summary = printed[printed.index("sweep 't':\n"):].splitlines()  # after the progress lines
    assert max(len(line) for line in printed.splitlines()) <= 100 and len(summary) <= 8
    head = json.loads((tmp_path / "out" / "report" / "headline.json").read_text())
    index = (tmp_path / "out" / "report" / "index.md").read_text()
    tau, first = f"{head['mean_tau']:.3f}", head["influential"][0]
    assert f"mean Kendall tau vs the default {tau}" in index and f"{first['param']} (tau range {first['tau_range']:.3f})" in index
    assert summary[1].startswith(f"  mean Kendall tau vs the default {tau} (min {head['min_tau']:.3f}) over 6 settings")
    assert f"  most influential parameter: {first['param']} (tau range {first['tau_range']:.3f})" in summary[3]
    assert "54/54 conversations reproduced" in summary[4]
    assert summary[-1] == f"report: {tmp_path / 'out' / 'report' / 'index.md'}"
    # --report-only says the same headline
    assert main(["sweep", str(path), "--report-only"]) == 0
    again = capsys.readouterr().out.splitlines()
    assert again[1:4] == summary[1:4] and again[-1].startswith("report: ")


def test_json_prints_the_record_alone_with_the_same_numbers(run_dir, tmp_path, capsys):
    path = _config(run_dir, tmp_path)
    assert main(["sweep", str(path), "--no-ray", "--json"]) == 0
    out, err = capsys.readouterr()
    record = json.loads(out)
    assert "pieces" in err  # progress went to stderr
    assert record["headline"] == json.loads((tmp_path / "out" / "report" / "headline.json").read_text())
    assert record["identity"]["mismatching_conversations"] == 0 and record["report"].endswith("index.md")
    assert record["pieces_run"] + record["pieces_skipped"] > 0
