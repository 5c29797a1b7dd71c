"""``run --dry-run`` says, per task, whether the design can ever decide, before anything is spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from ray_knowsim.cli.main import main as cli_main
from ray_knowsim.preflight.design import design_checks
from ray_knowsim.config import load_run_config

ROOT = Path(__file__).resolve().parents[2]


def test_the_own_tutor_recipe_on_the_demo_items_says_it_cannot_decide(tmp_path, capsys):
    cfg = load_run_config(ROOT / "configs" / "own_tutor.yaml")
    checks = {c.task: c for c in design_checks(cfg, {"math": 4, "expertqa": 3})}
    math = checks["math"]
    # 2 tasks x (3 levels + marginal) x 8 metrics x 1 pair = 64 comparisons: 12 items needed, 4 there
    assert (math.family_size, math.min_items, math.can_decide) == (64, 12, False)
    assert "CANNOT decide: any verdict needs at least 12 items that do not tie, and the task has 4" in math.line()
    assert math.items_needed is not None and math.items_needed > 12
    code = cli_main(["run", str(ROOT / "configs" / "own_tutor.yaml"), "--dry-run", "-o", str(tmp_path / "dry")])
    assert code == 0
    out = capsys.readouterr().out
    assert "design math: compare (default family: every paired row)" in out and "CANNOT decide" in out
    assert "  cost per decision: no decision reachable: " in out  # so no decision's cost can be said either


def test_an_adaptive_design_with_enough_items_can_decide():
    cfg = load_run_config(ROOT / "configs" / "own_tutor.yaml",
                          overrides=["adaptive={decide: best, metrics: [kg], alpha: 0.05}", "levels=[novice]"])
    (c,) = [c for c in design_checks(cfg, {"math": 40, "expertqa": 40}) if c.task == "math"]
    assert c.family_size == 2 and c.min_items == 7 and c.can_decide  # 2 tasks x 1 level x 1 metric x 1 pair
    assert "can decide" in c.line() and 0 < c.power_at_n <= 1


def test_an_adaptive_design_counts_its_decisions_and_their_comparisons_apart():
    # demo: 4 conditions, 3 levels, one metric -> 3 `best` decisions per task, 6 pairs each
    cfg = load_run_config(ROOT / "configs" / "demo.yaml",
                          overrides=["adaptive={decide: best, metrics: [kg], alpha: 0.05}"])
    (c,) = [c for c in design_checks(cfg, {"math": 40, "expertqa": 40}) if c.task == "math"]
    assert (c.decisions, c.comparisons, c.family_size) == (3, 18, 36)
    assert "3 decision(s) over 18 comparisons, family of 36 comparisons" in c.line()


def test_the_dry_run_says_its_cost_per_decision_at_best_over_the_decisions_the_design_can_reach():
    from ray_knowsim.preflight.design import ADAPTIVE_LIMIT, as_records, per_decision_lines

    cfg = load_run_config(ROOT / "configs" / "own_tutor.yaml", overrides=["levels=[novice]"])
    records = as_records(design_checks(cfg, {"math": 400, "expertqa": 3}))
    (math,) = [r for r in records if r["task"] == "math"]
    assert math["can_decide"] and not [r for r in records if r["task"] == "expertqa"][0]["can_decide"]
    # only the task whose items can decide counts: math's comparisons
    assert per_decision_lines(12.0, 1e6, records) == [
        f"  cost per decision: at best ${12.0 / math['comparisons']:,.2f} per decision ($12.00 estimated over the at most "
        f"{math['comparisons']} decisions the design can reach)"]
    unpriced = per_decision_lines(None, 1e6, records)[0]
    assert "tokens per decision" in unpriced and unpriced.endswith("cost: no price given)")
    nothing = per_decision_lines(12.0, 1e6, as_records(design_checks(cfg, {"math": 3, "expertqa": 3})))
    assert nothing == ["  cost per decision: no decision reachable: $12.00 estimated, and no task of the design has the items "
                       "a verdict needs"]
    adaptive = load_run_config(ROOT / "configs" / "own_tutor.yaml", overrides=["adaptive={decide: best, metrics: [kg], alpha: 0.05}"])
    lines = per_decision_lines(12.0, 1e6, as_records(design_checks(adaptive, {"math": 40, "expertqa": 40})))
    assert lines[0].startswith("  cost per decision: at best $") and lines[1] == f"    {ADAPTIVE_LIMIT}"


def test_an_adaptive_dry_run_forecasts_what_it_decides_and_its_expected_cost_to_decide(tmp_path, capsys):
    import json
    import re

    from ray_knowsim.preflight.design import ADAPTIVE_LIMIT

    code = cli_main(["run", str(ROOT / "configs" / "adaptive_demo.yaml"), "--dry-run", "-o", str(tmp_path / "dry")])
    assert code == 0
    out = capsys.readouterr().out
    est = json.loads((tmp_path / "dry" / "estimate.json").read_text(encoding="utf-8"))
    record = est["adaptive_forecast"]
    assert record["benchmarks"] == 200 and 0 < record["session_share"] < 1 and 0 < record["decided"] <= 1
    # at the shipped demo's pool the design can decide but has little power for a 0.65 win rate: the
    # forecast says so beside the exact power of the design line
    (design,) = [d for d in est["design"] if d["task"] == "math"]
    assert abs(record["fixed_decided"] - design["power_at_n"]) < 0.1
    said = re.search(r"expected cost to decide about ([\d,]+) tokens of the ([\d,]+) tokens estimated", out)
    assert record["line"] in out and said and ADAPTIVE_LIMIT not in out
    whole = int(said.group(2).replace(",", ""))
    assert int(said.group(1).replace(",", "")) == pytest.approx(whole * record["session_share"], abs=1)
