"""`ray-knowsim validate` end to end on synthetic data with a planted answer."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from scipy.stats import binomtest

from ray_knowsim.cli.main import main


def run_validate(capsys, human, run, out, *extra):
    rc = main(["validate", "--human", str(human), "--sim", str(run), "--out", str(out), *extra])
    return rc, capsys.readouterr()


def planted_rows(planted, simulator):
    return {(r["grouping"], r["group"]): (r["k"], r["n"], r["n_not_evaluable"]) for r in planted["agreement"][simulator]}


def got_rows(agreement, simulator):
    sub = agreement[agreement.simulator == simulator]
    return {(r.grouping, r.group): (r.k, r.n, r.n_not_evaluable) for r in sub.itertuples()}


def test_recovers_the_planted_agreement_exactly(synthetic, tmp_path, capsys):
    human, run, planted = synthetic
    out = tmp_path / "val"
    rc, cap = run_validate(capsys, human, run, out)
    assert rc == 0, cap.err
    agreement = pd.read_parquet(out / "agreement.parquet")
    assert set(agreement.simulator) == {"structured", "zero-shot-cot"}
    for simulator in ("structured", "zero-shot-cot"):
        assert got_rows(agreement, simulator) == planted_rows(planted, simulator)
    for r in agreement[agreement.n > 0].itertuples():
        assert r.p_value == pytest.approx(binomtest(r.k, r.n, 0.5, alternative="greater").pvalue, rel=1e-12)
    overall = planted_rows(planted, "structured")[("overall", "all")]
    assert f"{overall[0]}/{overall[1]}" in cap.out and "Sign agreement" in cap.out
    # the baseline simulator has IQ only: its KG/DC/CO pairs are all "not evaluable"
    base = agreement[(agreement.simulator == "zero-shot-cot") & (agreement.grouping == "metric")].set_index("group")
    assert (base.loc[["KG", "DC", "CO"], "n"] == 0).all() and (base.loc[["KG", "DC", "CO"], "n_not_evaluable"] > 0).all()
    # concept coverage: human conversations mention IUs {1,2,3}, simulated ones {2,3,4} of the same item
    cov = pd.read_parquet(out / "coverage.parquet")
    assert len(cov) > 0 and (cov.jaccard == planted["coverage_jaccard"]).all()
    assert (cov.mean_pairwise_jaccard == 0.5).all()
    # every table in both formats, plus the summary
    for name in ("agreement", "pairs", "cell_means", "spearman", "coverage", "coverage_summary", "human_sessions"):
        assert (out / f"{name}.parquet").is_file() and (out / f"{name}.csv").is_file()
    summary = json.loads((out / "validation.json").read_text())
    assert summary["params"]["threshold"] == 0.15 and any("strategy arm (convention)" in n for n in summary["notes"])
    # Figure 2 data: z-scored cells; planted sim order == human order where all pairs agree
    cells = pd.read_parquet(out / "cell_means.parquet")
    assert cells[cells.simulator == "structured"].sim_z.notna().sum() == 2 * 3 * 7 * 3  # arms, levels, task-metrics, conditions
    pairs = pd.read_parquet(out / "pairs.parquet")
    assert set(pairs.cliffs_delta.abs()) <= {0.0, 1.0}


@pytest.mark.parametrize("share", [1.0, 0.0])
def test_all_or_nothing_plantings(synth, tmp_path, capsys, share):
    human, run = tmp_path / "h", tmp_path / "r"
    synth.main(["--out", str(human), "--sim-out", str(run), "--agreement", str(share), "--participants", "1",
                "--trials", "1", "--tie-rate", "0.5", "--seed", "11"])
    capsys.readouterr()
    rc, cap = run_validate(capsys, human, run, tmp_path / "v", "--no-coverage", "--threshold", "0.5")
    assert rc == 0, cap.err
    agreement = pd.read_parquet(tmp_path / "v" / "agreement.parquet")
    assert (agreement.k == (agreement.n if share == 1.0 else 0)).all()
    assert agreement[agreement.grouping == "overall"].n.iloc[0] > 20
    assert not (tmp_path / "v" / "coverage.parquet").exists()


def test_sim_map_file_and_simulator_filter_and_metric_map(synthetic, tmp_path, capsys):
    human, run, planted = synthetic
    sim_map = tmp_path / "map.json"
    sim_map.write_text(json.dumps({
        "strategy": {"0": "gpt-5.4:socratic", "1": "gpt-5.4:adaptive", "2": "gpt-5.4:comprehensive"},
        "model": {"GPT-5.4": "gpt-5.4:validation_study_minimal",
                  "Gemini 3 Pro": ["gemini-3-pro-preview:validation_study_minimal"],
                  "Claude Opus 4.7": "claude-opus-4-7:validation_study_minimal"},
    }))
    rc, cap = run_validate(capsys, human, run, tmp_path / "v", "--sim-map", str(sim_map), "--simulator", "structured",
                           "--metric-map", "KG=kg_es", "--no-coverage")
    assert rc == 0, cap.err
    agreement = pd.read_parquet(tmp_path / "v" / "agreement.parquet")
    assert set(agreement.simulator) == {"structured"}
    want = planted_rows(planted, "structured")
    got = got_rows(agreement, "structured")
    # kg_es is empty in the synthetic run: KG pairs become not evaluable, everything else unchanged
    kg_k, kg_n, _ = want[("metric", "KG")]
    assert got[("metric", "KG")] == (0, 0, kg_n)
    assert got[("metric", "DC")] == want[("metric", "DC")]
    assert got[("overall", "all")][:2] == (want[("overall", "all")][0] - kg_k, want[("overall", "all")][1] - kg_n)
    assert "sim map" in cap.out


def test_errors_exit_2_with_a_message(synthetic, tmp_path, capsys):
    human, run, _ = synthetic
    rc, cap = run_validate(capsys, human, tmp_path / "no-run", tmp_path / "v")
    assert rc == 2 and "no 'sessions' table" in cap.err
    rc, cap = run_validate(capsys, tmp_path, run, tmp_path / "v")
    assert rc == 2 and "no KnowChat .jsonl/.xlsx files" in cap.err
    rc, cap = run_validate(capsys, human, run, tmp_path / "v", "--metric-map", "XX=kg")
    assert rc == 2 and "unknown human metric" in cap.err
    rc, cap = run_validate(capsys, human, run, tmp_path / "v", "--metric-map", "KG=no_such_column")
    assert rc == 2 and "missing column(s) no_such_column" in cap.err


def test_no_matching_simulation_still_writes_human_tables_but_fails(synthetic, tmp_path, capsys):
    human, run, planted = synthetic
    rc, cap = run_validate(capsys, human, run, tmp_path / "v", "--simulator", "nobody")
    assert rc == 1 and "no simulated session matched" in cap.err
    pairs = pd.read_parquet(tmp_path / "v" / "pairs.parquet")
    assert not pairs.evaluable.any()
    assert int(pairs.high_signal.sum()) == planted_rows(planted, "structured")[("overall", "all")][1]


def test_synthetic_run_follows_the_results_contract(synthetic):
    import pyarrow.dataset as ds

    from ray_knowsim.schema.results import SessionRow, TurnRow

    _, run, _ = synthetic
    for name, model in (("sessions", SessionRow), ("turns", TurnRow)):
        rows = ds.dataset(run / name).head(5).to_pylist()
        assert len(rows) == 5
        for row in rows:
            model.model_validate(row)


def inspect(capsys, human, *extra):
    rc = main(["validate", "--human", str(human), "--inspect", *extra])
    return rc, capsys.readouterr()


def test_inspect_card_layout_reads_every_session(synthetic, capsys):
    rc, cap = inspect(capsys, synthetic[0])
    assert rc == 0, cap.err
    out = cap.out
    assert "layout: knowchat-card, built in" in out
    for arm, task in (("strategy", "math"), ("strategy", "expertqa"), ("model", "math"), ("model", "expertqa")):
        assert f"{arm} / {task}: 27 sessions, 9 participants (3 sessions each)" in out
        assert f"files       {task}_{arm}_conversations.jsonl + {task}_{arm}.xlsx" in out
    assert out.count("participants novice 3 (9 sessions), intermediate 3 (9 sessions), advanced 3 (9 sessions)") == 4
    assert "[prescreening: items Q1..Q10 summed, max 10]" in out
    assert out.count("conditions  Socratic 9, Adaptive 9, Comprehensive 9") == 2
    assert out.count("conditions  GPT-5.4 9, Gemini 3 Pro 9, Claude Opus 4.7 9") == 2
    assert out.count("pretest items Q1..Q7 summed, max 7; posttest items Q1..Q7 summed, max 7; KG for 27 of 27") == 2
    assert out.count("DC from 'survey' column 'Delivery Calibration': 27 values") == 4
    assert "arm strategy: 18 participants (math 9, expertqa 9, in both tasks 0)" in out
    assert out.rstrip().endswith("total: 108 sessions, 36 participants (ids counted per arm), 4 of 4 (arm, task) pairs loaded")


def test_inspect_legacy_layout_and_subfolders(synthetic_legacy, tmp_path, capsys):
    import shutil

    nested = tmp_path / "release" / "data"
    shutil.copytree(synthetic_legacy[0], nested)
    (tmp_path / "release" / "README.xlsx").write_bytes(b"not read")
    rc, cap = inspect(capsys, tmp_path / "release")
    assert rc == 0, cap.err
    assert "strategy / math: 27 sessions" in cap.out and "[prescreening: column 'score' of column 'max score']" in cap.out
    assert "ignored (no arm and task in the name): README.xlsx" in cap.out
    assert "total: 108 sessions" in cap.out


def test_inspect_names_the_problem_and_exits_2(human_copy, tmp_path, capsys):
    import openpyxl

    wb = openpyxl.load_workbook(human_copy / "math_model.xlsx")
    wb["posttest"].cell(5, 4).value = "n/a"
    wb.save(human_copy / "math_model.xlsx")
    rc, cap = inspect(capsys, human_copy)
    assert rc == 2
    assert "math_model.xlsx, sheet 'posttest', row 5, column 'Q2': expected an item score (a number), got 'n/a'" in cap.err
    assert "model / math: NOT LOADED" in cap.out and "strategy / math: 27 sessions" in cap.out
    assert "total: 81 sessions" in cap.out and "3 of 4 (arm, task) pairs loaded" in cap.out
    rc, cap = inspect(capsys, tmp_path / "nowhere")
    assert rc == 2 and "not a folder" in cap.err
    bad = tmp_path / "bad.yaml"
    bad.write_text("sheets: {mian: {names: [x]}}\n")
    rc, cap = inspect(capsys, human_copy, "--layout", str(bad))
    assert rc == 2 and "bad.yaml" in cap.err and "mian" in cap.err


def test_validate_needs_sim_unless_inspect(synthetic, capsys):
    rc = main(["validate", "--human", str(synthetic[0])])
    assert rc == 2 and "--sim RUN_DIR is required" in capsys.readouterr().err


def test_legacy_layout_recovers_the_planted_agreement(synthetic, synthetic_legacy, tmp_path, capsys):
    _, run, planted = synthetic
    human, planted_legacy = synthetic_legacy
    assert planted_legacy["agreement"] == planted["agreement"]  # same seed: same planting
    rc, cap = run_validate(capsys, human, run, tmp_path / "v", "--no-coverage")
    assert rc == 0, cap.err
    agreement = pd.read_parquet(tmp_path / "v" / "agreement.parquet")
    for simulator in ("structured", "zero-shot-cot"):
        assert got_rows(agreement, simulator) == planted_rows(planted, simulator)
