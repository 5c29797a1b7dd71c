"""Re-scoring without Ray: the default setting reproduces the source, the kernel path equals the
plain-Python rules bit for bit, initial states are kept or re-sampled as configured."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ray_knowsim.rules.config import paper_rules
from ray_knowsim.sweep.config import BaseRules, SpaceConfig, SweepConfigError, parse_sweep_config
from ray_knowsim.sweep.identity import compare
from ray_knowsim.sweep.rescore import InitPlan, initial_for, kernel_available, prepare, rescore
from ray_knowsim.sweep.source import load_source
from ray_knowsim.sweep.space import expand
from tests.doubles.sweep_runs import reference_config, run_dir_config

needs_kernel = pytest.mark.skipif(not kernel_available(), reason="ray_knowsim.kernels.sessions is not importable here")

VARIED = {
    "grid": {"capacity_ratio": [0.35, 0.7], "hinge": [True, False]},
    "list": [
        {"dropoff_softening": 0.6, "hinge_ratio": 0.3, "hinge_tail": 0.2},
        {"overload_flag_strict": True, "carry_persists": True, "reset_carry_on_transition": True},
        {"temporal_decay": True, "include_attempt_load": False},
        {"termination": {"rule": "paper", "min_turn": 2, "window": 2, "min_overloaded": 1, "max_upward": 0, "mastery_fraction": 0.3}},
        {"w_state": [3, 2, 1, 0.5], "w_articulation": 1.0, "capacity_floor": 4},
    ],
}


def rows_by_conversation(table, setting: int = 0) -> dict[int, dict]:
    df = table.to_pandas()
    out = {}
    for r in df[df["setting"] == setting].to_dict("records"):
        out[int(r["conversation"])] = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
    return out


def assert_default_reproduces(source, table) -> int:
    rows = rows_by_conversation(table)
    checked = 0
    for c in source.conversations:
        assert c.recorded, "the source must carry recorded metrics"
        assert compare(c.recorded, rows[c.position]) == [], c.key
        checked += len(c.recorded)
    return checked


@pytest.mark.parametrize("backend", ["python", pytest.param("kernel", marks=needs_kernel)])
def test_default_setting_reproduces_our_run_exactly(run_dir, tmp_path, backend):
    cfg = parse_sweep_config(run_dir_config(run_dir, tmp_path))
    source = load_source(cfg)
    assert len(source.conversations) == 54
    assert dict(source.skipped) == {"no knowledge state (baseline)": 1, "failed": 1}
    table = rescore(prepare(source.conversations, backend), expand(cfg.space, cfg.base))
    # exact: every recorded float equal, not just close
    rows = rows_by_conversation(table)
    for c in source.conversations:
        for k, v in c.recorded.items():
            assert rows[c.position][k] == v, (c.key, k)
    assert assert_default_reproduces(source, table) >= 54 * 25


def test_default_setting_reproduces_a_paper_preset_run(paper_run_dir, tmp_path):
    cfg = parse_sweep_config(run_dir_config(paper_run_dir, tmp_path, base={"preset": "paper"}))
    source = load_source(cfg)
    settings = expand(cfg.space, cfg.base)
    assert settings[0].rules == paper_rules()
    assert_default_reproduces(source, rescore(prepare(source.conversations, "auto"), settings))


@pytest.mark.parametrize("backend", ["python", pytest.param("kernel", marks=needs_kernel)])
def test_default_setting_reproduces_the_reference_records(shared_ref, tmp_path, backend):
    cfg = parse_sweep_config(reference_config(shared_ref, tmp_path))
    source = load_source(cfg)
    assert [c.meta["item_id"] for c in source.conversations] == ["math_003", "math_004"]
    assert source.skipped["no knowledge state (baseline)"] == 2
    table = rescore(prepare(source.conversations, backend), expand(cfg.space, cfg.base))
    n = assert_default_reproduces(source, table)
    assert n == 2 * 22  # 12 final metrics + the legacy DC + 6 at the early stop + tau + stop turn + reason
    rows = rows_by_conversation(table)
    assert [rows[k]["early_stop_turn"] for k in (0, 1)] == [10, 12]  # spec §15: virtual stops at turns 10 and 12
    assert rows[0]["kg"] == 9.0 and rows[0]["early_stop_reason"] == "cognitive_overload"


@needs_kernel
@pytest.mark.parametrize("initial_states", ["keep", "resample"])
def test_kernel_rows_equal_python_rows_bit_for_bit(run_dir, shared_ref, tmp_path, initial_states):
    for cfg_dict in (run_dir_config(run_dir, tmp_path), reference_config(shared_ref, tmp_path)):
        cfg = parse_sweep_config(cfg_dict | {"space": VARIED})
        source = load_source(cfg)
        settings = expand(cfg.space, cfg.base)
        plan = InitPlan(initial_states, 3, settings[0].rules)
        py = rescore(prepare(source.conversations, "python"), settings, plan)
        kn = rescore(prepare(source.conversations, "kernel"), settings, plan)
        assert py.num_rows == len(settings) * len(source.conversations)
        assert py.schema == kn.schema
        for name in py.column_names:
            assert py.column(name).equals(kn.column(name)), name
        # the varied settings really change the outcome
        outcome = np.stack([py.column(c).to_numpy().reshape(len(settings), -1) for c in ("nkg", "co", "po", "dc")], axis=1)
        assert len({r.tobytes() for r in outcome}) > len(settings) // 2


def test_resampling_uses_common_random_numbers(run_dir, tmp_path):
    cfg = parse_sweep_config(run_dir_config(run_dir, tmp_path))
    convs = load_source(cfg).conversations[:6]
    settings = expand(SpaceConfig.model_validate({"list": [{"hinge": False}, {"init_ratios.*.known": 0.3}]}), BaseRules())
    prep = prepare(convs, "python")
    keep = rescore(prep, settings, InitPlan("keep")).to_pandas()
    changed = rescore(prep, settings, InitPlan("resample_if_changed", 1, settings[0].rules)).to_pandas()
    always = rescore(prep, settings, InitPlan("resample", 1, settings[0].rules)).to_pandas()
    again = rescore(prep, settings, InitPlan("resample", 1, settings[0].rules)).to_pandas()
    other_seed = rescore(prep, settings, InitPlan("resample", 2, settings[0].rules)).to_pandas()
    cols = ["nkg", "kg", "co", "dc"]
    # settings 0 and 1 keep the recorded states under resample_if_changed; setting 2 changes init rules
    assert keep[keep.setting < 2][cols].equals(changed[changed.setting < 2][cols])
    assert not keep[keep.setting == 2][cols].equals(changed[changed.setting == 2][cols])
    assert always[cols].equals(again[cols])  # seeded
    assert not always[cols].equals(other_seed[cols])
    # settings with equal init rules start every conversation from the same re-sampled state
    plan = InitPlan("resample", 1, settings[0].rules)
    starts = [[initial_for(c, s.rules, plan)[0] for c in convs] for s in settings]
    assert starts[0] == starts[1] and starts[0] != starts[2]
    assert starts[0] != [c.initial for c in convs]


def test_a_resampled_start_is_the_sessions_sampler_on_the_sweeps_own_seed(run_dir, tmp_path):
    """One sampler for runs and sweeps (rules.init_state.session_initial_states): a re-sampled
    start is what it draws from the string seed "<init seed>/<conversation key>" (the sweep's
    identity), the very stream the sweep drew from before it went through that function."""
    import random

    from ray_knowsim.rules.init_state import sample_initial_states, session_initial_states

    cfg = parse_sweep_config(run_dir_config(run_dir, tmp_path))
    convs = load_source(cfg).conversations[:8]
    rules = expand(SpaceConfig.model_validate({"list": [{"init_ratios.*.known": 0.3}]}), BaseRules())[1].rules
    plan = InitPlan("resample", 4, rules)
    for c in convs:
        level = c.meta.get("knowledge_level", "")
        start = initial_for(c, rules, plan)[0]
        assert start == session_initial_states(c.graph, level, rules, f"4/{c.key}")
        assert start == sample_initial_states(c.graph, level, rules, random.Random(f"4/{c.key}"))


def test_sources_fail_early_and_clearly(tmp_path, shared_ref):
    with pytest.raises(SweepConfigError, match="not a run directory"):
        load_source(parse_sweep_config(run_dir_config(tmp_path / "nope", tmp_path)))
    with pytest.raises(SweepConfigError, match="record files not found"):
        load_source(parse_sweep_config(reference_config(shared_ref, tmp_path) | {"source": {"records": ["missing/*.json"], "graph_cache": ["x.json"]}}))
    only_baselines = reference_config(shared_ref, tmp_path)
    only_baselines["source"]["records"] = [str(shared_ref / "examples" / "mathqa_baseline_zero-shot-cot_novice.json")]
    with pytest.raises(SweepConfigError, match="no conversation with a knowledge state"):
        load_source(parse_sweep_config(only_baselines))
