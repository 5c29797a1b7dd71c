"""The sweep on a local Ray: default identity end to end, split independence, resume, rejection
before work, the sensitivity report, and the shipped configs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ray_knowsim.cli.main import main
from ray_knowsim.sweep.config import SweepConfigError, load_sweep_config, parse_sweep_config
from ray_knowsim.sweep import runner
from ray_knowsim.sweep.commits import read_commits
from ray_knowsim.sweep.runner import plan_sweep, read_rows, run_sweep
from ray_knowsim.sweep.conversation import META_COLUMNS
from ray_knowsim.sweep.rescore import prepare, rescore
from ray_knowsim.sweep.source import load_source
from tests.doubles.sweep_runs import reference_config, run_dir_config

ray = pytest.importorskip("ray")
CONFIGS = Path(__file__).resolve().parents[2] / "configs"

SPACE = {
    "grid": {"capacity_ratio": [0.4, 0.55, 0.7], "dropoff_softening": [1.0, 1.3]},
    "list": [{"hinge": False}, {"termination.window": 5}, {"w_state.0": 2.5}],
}


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield
    ray.shutdown()


class Interrupted(Exception):
    pass


def quiet(_: str) -> None:
    pass


def sweep(cfg_dict, **kw):
    return run_sweep(parse_sweep_config(cfg_dict), progress=quiet, **kw)


def test_default_only_space_reproduces_the_run_and_reports(run_dir, tmp_path):
    result = sweep(run_dir_config(run_dir, tmp_path / "out"))
    assert result.identity == {"checked": True, "conversations": 54, "values_compared": 54 * 28, "mismatching_conversations": 0, "tolerance": 1e-9}
    rows = read_rows(result.out_dir)
    sessions = pd.read_parquet(run_dir / "sessions")
    merged = rows.merge(sessions, on="session_id", suffixes=("", "_recorded"))
    assert len(merged) == 54
    for col in ("kg", "nkg", "dc", "ic", "co", "po", "engagement", "learning_experience", "nkg_es", "po_es", "fm_effective", "tau"):
        assert (merged[col] == merged[f"{col}_recorded"]).all(), col
    assert (merged["early_stop_turn"].fillna(0) == merged["early_stop_turn_recorded"].fillna(0)).all()
    # aggregates: one row per (setting 0, level, condition) with the mean of the recorded metric
    agg = pd.read_parquet(result.out_dir / "aggregates.parquet")
    expected = sessions[(sessions.status == "ok") & (sessions.simulator == "structured")].groupby(["knowledge_level", "condition"])["nkg"].mean()
    got = agg.set_index(["knowledge_level", "condition"])["nkg_mean"]
    assert got.sort_index().to_numpy() == pytest.approx(expected.sort_index().to_numpy(), rel=1e-12)
    index = (result.out_dir / "report" / "index.md").read_text()
    for f in result.report_files:
        assert (result.out_dir / f).exists()
        assert f == "report/index.md" or f in index
    agree = pd.read_csv(result.out_dir / "report" / "agreement.csv")
    assert (agree["kendall_tau"] == 1.0).all() and agree["top1_kept"].all()


def test_rows_do_not_depend_on_how_the_work_is_split(run_dir, tmp_path):
    outs = []
    for k, (per_task, per_block) in enumerate([(1, 54), (3, 20), (9, 7)]):
        cfg = run_dir_config(run_dir, tmp_path / f"out{k}", space=SPACE,
                             execution={"settings_per_task": per_task, "conversations_per_block": per_block})  # fmt: skip
        result = sweep(cfg, report=False)
        assert len(result.plan.settings) == 9
        assert result.pieces_run == result.layout["pieces"] == -(-9 // per_task) * -(-54 // per_block)
        outs.append(result)
    base = read_rows(outs[0].out_dir)
    assert len(base) == 9 * 54
    for other in outs[1:]:
        pd.testing.assert_frame_equal(base, read_rows(other.out_dir), check_exact=True)
    a0 = pd.read_parquet(outs[0].out_dir / "aggregates.parquet")
    for other in outs[1:]:
        pd.testing.assert_frame_equal(a0, pd.read_parquet(other.out_dir / "aggregates.parquet"), rtol=1e-12)
    # same conversation blocks, other settings split: aggregates are bit-identical
    same_chunks = sweep(run_dir_config(run_dir, tmp_path / "out_same", space=SPACE,
                                       execution={"settings_per_task": 2, "conversations_per_block": 54}), report=False)  # fmt: skip
    pd.testing.assert_frame_equal(a0, pd.read_parquet(same_chunks.out_dir / "aggregates.parquet"), check_exact=True)


def test_resume_redoes_only_a_piece_whose_files_are_gone(run_dir, tmp_path):
    cfg = run_dir_config(run_dir, tmp_path / "out", space=SPACE, execution={"settings_per_task": 2, "conversations_per_block": 30})
    first = sweep(cfg, report=False)
    n = first.pieces_run
    assert n == first.layout["pieces"] == 10  # 5 settings ranges x 2 blocks
    assert (first.pairs_run, first.pairs_skipped) == (9 * 54, 0)
    before = read_rows(first.out_dir)
    victim = read_commits(first.out_dir).markers[3]
    (first.out_dir / victim.files()["rows"]).unlink()
    (first.out_dir / ".tmp").mkdir(exist_ok=True)
    (first.out_dir / ".tmp" / "b00000-s0000003-0000005.x.parquet.deadbeef.tmp").write_bytes(b"half a file")  # killed mid-write
    assert len(read_commits(first.out_dir).markers) == n - 1
    second = sweep(cfg, report=False)
    assert (second.pieces_run, second.pieces_skipped) == (1, n - 1)
    assert second.pairs_run == victim.piece.n_settings * (30 if victim.block == 0 else 24)
    pd.testing.assert_frame_equal(before, read_rows(second.out_dir), check_exact=True)
    assert json.loads((second.out_dir / "sweep.json").read_text())["removed_broken_commits"] == [victim.piece.name]
    assert not [p for p in second.out_dir.rglob("*.tmp") if p.is_file()]
    assert not (second.out_dir / victim.files()["partials"]).exists()  # the broken commit's leftover is gone
    third = sweep(cfg, report=False)
    assert (third.pieces_run, third.pieces_skipped, third.pairs_run) == (0, n, 0)
    # a different sweep into the same folder is refused, --fresh replaces it
    changed = cfg | {"space": {"grid": {"capacity_ratio": [0.3]}}}
    with pytest.raises(SweepConfigError, match="holds a different sweep"):
        sweep(changed, report=False)
    assert sweep(changed, report=False, fresh=True).pieces_run == 1 * 2
    # so is another conversation block size: the partial sums (and so the aggregates) depend on it
    with pytest.raises(SweepConfigError, match="conversations_per_block"):
        sweep(changed | {"execution": {"conversations_per_block": 20}}, report=False)


def test_resume_on_another_piece_layout_redoes_nothing_and_equals_an_uninterrupted_sweep(run_dir, tmp_path, monkeypatch):
    """Interrupted after 3 pieces of a 2-CPU layout, resumed on a cluster sized for 16 CPUs (other
    pieces): nothing committed is redone, and rows and aggregates equal an uninterrupted sweep's."""
    space = {"grid": {"capacity_ratio": [0.4, 0.5, 0.6, 0.7], "dropoff_softening": [1.0, 1.3, 1.6]}, "list": [{"hinge": False}]}
    execution = {"conversations_per_block": 20, "target_task_seconds": 1e6}  # pieces sized by the CPU count alone
    whole = sweep(run_dir_config(run_dir, tmp_path / "whole", space=space, execution=execution), report=False)
    assert whole.layout["cpus"] == 2  # the local Ray's CPUs (ray.cluster_resources)

    cfg = run_dir_config(run_dir, tmp_path / "out", space=space, execution=execution | {"settings_per_task": 3})
    real = runner.score_piece
    calls = []

    def dies_after_three(*args, **kwargs):
        if len(calls) == 3:
            raise Interrupted  # the driver is stopped here
        calls.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "score_piece", dies_after_three)
    with pytest.raises(Interrupted):
        sweep(cfg, report=False, use_ray=False)
    monkeypatch.setattr(runner, "score_piece", real)
    out = tmp_path / "out"
    kept = {m.piece.name: m.token for m in read_commits(out).markers}
    assert sorted(kept) == sorted(p.name for p in calls) and len(kept) == 3

    resumed = sweep(cfg | {"execution": execution | {"cluster_cpus": 16}}, report=False)
    assert resumed.layout["cpus"] == 16 and resumed.layout["settings_per_piece"] != 3
    n_settings, per_block = len(resumed.plan.settings), {0: 20, 1: 20, 2: 14}
    done_before = sum(per_block[p.block] * p.n_settings for p in calls)
    assert (resumed.pairs_skipped, resumed.pairs_run) == (done_before, n_settings * 54 - done_before)
    after = read_commits(out)
    assert {m.piece.name: m.token for m in after.markers if m.piece.name in kept} == kept  # not re-committed
    new = [m for m in after.markers if m.piece.name not in kept]
    for m in new:  # the resumed pieces do not overlap what was committed
        assert not any(old.block == m.block and old.start < m.stop and m.start < old.stop for old in calls)
    pd.testing.assert_frame_equal(read_rows(whole.out_dir), read_rows(out), check_exact=True)
    pd.testing.assert_frame_equal(pd.read_parquet(whole.out_dir / "aggregates.parquet"), pd.read_parquet(out / "aggregates.parquet"),
                                  check_exact=True)  # fmt: skip
    assert resumed.identity == whole.identity
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    assert [r["cpus"] for r in runs] == [16]  # a run records itself when it finishes


def test_tasks_receive_packed_arrays_once_per_block_and_write_their_own_rows(run_dir, tmp_path, monkeypatch):
    from ray_knowsim.kernels.pack import PackedGraphs, PackedSignals
    from ray_knowsim.sweep.rescore import Prepared

    put, receipts = [], []
    real_put, real_add = ray.put, runner.PieceStats.add
    monkeypatch.setattr(ray, "put", lambda obj, **kw: put.append(obj) or real_put(obj, **kw))
    monkeypatch.setattr(runner.PieceStats, "add", lambda self, r: receipts.append(r) or real_add(self, r))
    cfg = run_dir_config(run_dir, tmp_path / "out", space=SPACE, execution={"conversations_per_block": 30, "settings_per_task": 3})
    result = sweep(cfg, report=False)
    assert result.pieces_run == 6  # 3 settings ranges x 2 blocks
    blocks = [o for o in put if isinstance(o, Prepared)]
    assert len(blocks) == 2  # each block put once, shared by its three pieces
    for prep in blocks:
        assert prep.conversations is None and prep.graphs is None and prep.keys is None
        for name, value in vars(prep).items():
            if isinstance(value, dict):
                value = list(value.values())
            items = value if isinstance(value, list) else [value]
            assert all(v is None or isinstance(v, (np.ndarray, PackedGraphs, PackedSignals, str, list)) for v in items), name
    # the rows never travel back: a receipt is a few numbers, and the files were written by the workers
    assert len(receipts) == 6 and all(isinstance(v, (int, float, str)) for r in receipts for v in r.values())
    markers = read_commits(result.out_dir).markers
    assert len(markers) == 6 and os.getpid() not in {m.pid for m in markers}
    assert sum(m.rows for m in markers) == 9 * 54 == len(read_rows(result.out_dir))


def test_pieces_are_cut_for_the_cluster_it_runs_on(run_dir, tmp_path):
    space = {"random": {"n": 40, "seed": 1, "params": {"capacity_ratio": {"uniform": [0.35, 0.8]}}}}
    execution = {"conversations_per_block": 27, "target_task_seconds": 1e6}
    here = sweep(run_dir_config(run_dir, tmp_path / "a", space=space, execution=execution), report=False)
    assert here.layout["cpus"] == int(ray.cluster_resources()["CPU"]) == 2
    bigger = sweep(run_dir_config(run_dir, tmp_path / "b", space=space, execution=execution | {"cluster_cpus": 32}), report=False)
    assert bigger.layout["cpus"] == 32
    assert bigger.pieces_run > here.pieces_run >= 2 * 4  # four pieces per CPU while the work allows
    pd.testing.assert_frame_equal(read_rows(here.out_dir), read_rows(bigger.out_dir), check_exact=True)


def test_resampled_initial_states_travel_with_the_blocks(run_dir, tmp_path):
    """Re-sampling needs the graphs and keys in the task; rows equal one in-process re-score."""
    space = {"list": [{"hinge": False}, {"init_ratios.*.known": 0.3}, {"init_ratios.*.partial": 0.05, "capacity_ratio": 0.4}]}
    cfg = parse_sweep_config(run_dir_config(run_dir, tmp_path / "out", space=space, initial_states="resample_if_changed", init_seed=4,
                                            execution={"conversations_per_block": 25, "settings_per_task": 1}))  # fmt: skip
    result = run_sweep(cfg, progress=quiet, report=False)
    assert result.pieces_run == 4 * 3
    plan = result.plan
    whole = rescore(prepare(plan.source.conversations, plan.backend), plan.settings, plan.init).to_pandas()
    for c in META_COLUMNS:
        whole[c] = whole[c].astype(str)
    expected = whole.sort_values(["setting", "conversation"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(expected, read_rows(result.out_dir), check_exact=True)
    changed = read_rows(result.out_dir, ["raw_state_progress", "nkg"], settings=[2])
    kept = read_rows(result.out_dir, ["raw_state_progress", "nkg"], settings=[0])
    assert not changed[["nkg"]].reset_index(drop=True).equals(kept[["nkg"]].reset_index(drop=True))


def test_invalid_setting_is_rejected_before_any_work(run_dir, tmp_path, monkeypatch):
    submitted = []
    monkeypatch.setattr("ray_knowsim.sweep.runner.run_pieces", lambda *a, **k: submitted.append(a))
    monkeypatch.setattr("ray_knowsim.sweep.runner.load_source", lambda *a, **k: submitted.append("load") or load_source(*a, **k))
    out = tmp_path / "out"
    bad = run_dir_config(run_dir, out, space={"grid": {"capacity_ratio": [0.5, 0.6]}, "list": [{"w_reasoning.2": -0.1}]})
    with pytest.raises(SweepConfigError, match="w_reasoning must be non-negative"):
        sweep(bad)
    assert submitted == [] and not out.exists()
    # the CLI says so and exits 2
    cfg_file = tmp_path / "bad.yaml"
    import yaml

    cfg_file.write_text(yaml.safe_dump(bad))
    assert main(["sweep", str(cfg_file)]) == 2
    assert submitted == [] and not out.exists()


def test_reference_records_sweep_and_cli(shared_ref, tmp_path, capsys):
    cfg = reference_config(shared_ref, tmp_path / "out",
                           space={"grid": {"capacity_ratio": [0.45, 0.55, 0.65], "dropoff_softening": [1.0, 1.3], "hinge": [True, False]}},
                           report={"ranking_metrics": ["nkg"], "max_param_plots": 2})  # fmt: skip
    import yaml

    path = tmp_path / "ref.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["sweep", str(path), "--check-identity"]) == 0
    out = capsys.readouterr().out
    assert "2/2 conversations reproduced" in out
    summary = pd.read_parquet(tmp_path / "out" / "setting_summary.parquet")
    assert len(summary) == 12 and summary.loc[summary.setting == 0, "origin"].item() == "default"
    spans = pd.read_csv(tmp_path / "out" / "report" / "metric_range_summary.csv")
    assert set(spans["param"]) == {"capacity_ratio", "dropoff_softening", "hinge"}
    assert spans.loc[(spans.param == "capacity_ratio") & (spans.metric == "co"), "range"].item() > 0
    assert (tmp_path / "out" / "report" / "metric_ranges.png").stat().st_size > 1000
    # --report-only rebuilds the report from the finished sweep without re-scoring
    assert main(["sweep", str(path), "--report-only"]) == 0


def test_shipped_configs_load_and_plan(shared_ref, tmp_path):
    shipped = CONFIGS / "sweep_reference.yaml"
    text = shipped.read_text(encoding="utf-8")
    assert "../../shared/knowsim-ref/" in text  # the layout it is written for: the repo next to shared/
    if (CONFIGS / "../../shared/knowsim-ref").resolve() != shared_ref.resolve():  # a checkout elsewhere
        shipped = tmp_path / shipped.name
        shipped.write_text(text.replace("../../shared/knowsim-ref", str(shared_ref)), encoding="utf-8")
    ref = load_sweep_config(shipped)
    assert {"capacity_ratio", "dropoff_softening", "hinge"} <= set(ref.space.grid or {})
    plan = plan_sweep(ref)
    assert len(plan.source.conversations) == 2 and len(plan.settings) > 100
    demo = load_sweep_config(CONFIGS / "sweep_demo.yaml")
    assert demo.resolve(demo.source.run_dir) == (CONFIGS.parent / "runs" / "demo").resolve()


def test_demo_config_runs_quickly_on_a_small_run(run_dir, tmp_path):
    """configs/sweep_demo.yaml's space over a run of the demo's size (the real demo run needs the engine)."""

    demo = load_sweep_config(CONFIGS / "sweep_demo.yaml", output=str(tmp_path / "out"))
    cfg = demo.model_copy(update={"source": demo.source.model_copy(update={"run_dir": str(run_dir)})})
    result = run_sweep(cfg, progress=quiet)  # (its speed is the sweep benchmark's business, not a test's)
    assert result.identity["mismatching_conversations"] == 0
    assert len(list((result.out_dir / "report").glob("*.png"))) >= 3


def test_identity_check_fails_when_the_base_rules_are_not_the_recording_rules(shared_ref, tmp_path, capsys):
    import yaml

    cfg = reference_config(shared_ref, tmp_path / "out", base={"preset": "reference", "overrides": {"capacity_ratio": 0.45}},
                           report={"plots": False})  # fmt: skip
    path = tmp_path / "ref.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["sweep", str(path), "--no-ray", "--check-identity"]) == 1
    assert "0/2 conversations reproduced" in capsys.readouterr().out
    mismatches = pd.read_csv(tmp_path / "out" / "identity.csv")
    assert {"tau", "co"} <= set(mismatches["column"])


def test_a_sweep_refuses_workers_on_other_code_before_any_piece(run_dir, tmp_path, monkeypatch):
    """The pieces run our code on every worker: a node on another copy of ray_knowsim stops the
    sweep (the same check as `run`) before any piece is committed."""
    from ray_knowsim.cluster import codecheck

    monkeypatch.setattr(codecheck, "cluster_mismatches",
                        lambda expected=None: (["node 10.0.0.9 (abc): imports /srv/old/ray_knowsim"], []))
    with pytest.raises(codecheck.CodeMismatch, match="other code than this driver"):
        sweep(run_dir_config(run_dir, tmp_path / "out", space=SPACE))
    out = tmp_path / "out"
    assert not list(out.glob("committed/*")) and not list(out.glob("rows/*"))
