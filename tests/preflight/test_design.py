"""``run --dry-run`` says, per task, whether the design can ever decide, before anything is spent."""

from __future__ import annotations

from pathlib import Path

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
