"""The run re-estimates its cost while it runs (run/cost_watch.py): the watch's cadence on a
hand-fed progress, and small real runs on the priced offline double whose manifest holds the
re-estimates, with the warning when the dry run's estimate was made too low."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from ray_knowsim.config import parse_run_config
from ray_knowsim.preflight.estimate import Estimate, RoleEstimate, Totals, dry_run
from ray_knowsim.preflight.projection import Progress, Tokens, UnitSpend
from ray_knowsim.run.cost_watch import MANIFEST_KEY, CostWatch, condition_of
from ray_knowsim.schema.price import Price
from tests.doubles.run_config import small_config


def test_a_session_ids_condition_is_found_when_the_item_id_holds_slashes():
    names = ["sim:adaptive", "adaptive", "tutor/b:socratic"]
    assert condition_of("math/7/novice/sim:adaptive/0", names) == "sim:adaptive"
    assert condition_of("math/a/b/novice/adaptive/1", names) == "adaptive"
    assert condition_of("math/x/advanced/tutor/b:socratic/0", names) == "tutor/b:socratic"
    assert condition_of("math/x/advanced/other/0", names) is None


def _watch(spent_per_session: list[float], lines: list[str], warnings: list[str], records: list[dict]) -> CostWatch:
    """A watch over 100 planned sessions first estimated at $1 (1e6 prompt tokens at $1 per
    million), fed ``spent_per_session[i]`` million prompt tokens per session at its i-th reading."""
    first = Estimate(name="t", config_hash="h", n_sessions=100, turns={}, per_condition={}, upper_bound=Totals(), first_turn={},
                     assumptions={}, totals=Totals(prompt_tokens=1_000_000, cost_usd=1.0),
                     per_role={"user_sim": RoleEstimate(prompt_tokens=1_000_000, cost_usd=1.0, models=["m"])})
    readings = iter(spent_per_session)

    def progress() -> Progress:
        per = next(readings)
        return Progress(committed=10, planned=100, spent=[UnitSpend(role="user_sim", model="m",
                                                                    tokens=Tokens(prompt_tokens=10 * per * 1e6))])

    return CostWatch(first=lambda: (first, "hand-made"), progress=progress, prices={"m": Price(input=1.0, output=1.0)}, after=5,
                     say=lines.append, warn=warnings.append, record=lambda e: records.append(json.loads(json.dumps(e))))


def test_the_watch_waits_for_its_sessions_says_what_moved_and_warns_once():
    lines: list[str] = []
    warnings: list[str] = []
    records: list[dict] = []
    watch = _watch([0.011, 0.0112, 0.014, 0.015], lines, warnings, records)
    assert watch.poll(4, True, 0.0) is None and not lines  # fewer than `after` sessions: no reading
    assert watch.poll(10, True, 1.0).projected_usd == pytest.approx(1.1)
    assert lines == ["cost so far $0.11; projected total $1.10 (first estimate $1.00); 10 of 100 sessions committed"]
    assert watch.poll(10, False, 1.5) is None  # no shard ended and too soon: not read
    assert watch.poll(10, True, 2.0).projected_usd == pytest.approx(1.12) and len(lines) == 1  # 2 %: not shown
    assert watch.poll(10, True, 3.0).exceeded and len(lines) == 2 and len(warnings) == 1
    assert "140% of the first estimate $1.00" in warnings[0]
    watch.poll(10, True, 4.0)  # still above: no second warning
    assert len(warnings) == 1
    entry = records[-1]
    assert entry["first_estimate"] == {"source": "hand-made", "usd": 1.0, "tokens": 1_000_000, "sessions": 100}
    assert [r["exceeded"] for r in entry["records"]] == [False, True]
    assert entry["records"][-1]["projected_usd"] == pytest.approx(1.4)


def _small(tmp_path: Path):
    """8 sessions (4 math items x novice x 2 conditions) of 3 turns in 4 shards, the offline model
    priced, the real simulation loop."""
    data = small_config(models={"sim": {"backend": "offline", "price": {"input": 1.0, "output": 2.0}}}, levels=["novice"],
                        engine={"shard_size": 2, "shard_fn": "ray_knowsim.sim.shard:run_shard"})
    return parse_run_config(data, base_dir=tmp_path)


def _run(cfg, out: Path) -> tuple[str, dict]:
    from ray_knowsim.run.fan_out import run

    buf = io.StringIO()
    run(cfg, output=out, console=Console(file=buf, width=300), tables=False)
    manifest = json.loads((out / "manifest.json").read_text())
    return buf.getvalue(), manifest["invocations"][-1][MANIFEST_KEY]


@pytest.mark.usefixtures("ray_local")
def test_a_run_whose_dry_run_said_half_warns_and_records_it(tmp_path):
    cfg = _small(tmp_path)
    est, path = dry_run(cfg, tmp_path / "run")
    low = est.model_copy(deep=True)
    low.totals.cost_usd = est.totals.cost_usd / 2
    path.write_text(low.model_dump_json())
    text, entry = _run(cfg, tmp_path / "run")
    assert entry["first_estimate"]["source"].startswith("the dry run")
    assert entry["first_estimate"]["usd"] == pytest.approx(est.totals.cost_usd / 2)
    first = entry["records"][0]
    assert first["planned"] == 8 and 1 <= first["committed"] <= 8 and first["unit"] == "usd"
    assert first["exceeded"] and first["ratio"] > 1.25
    assert "cost so far $" in text and "cost warning: the projected total" in text
    assert text.count("cost warning") == 1


@pytest.mark.usefixtures("ray_local")
def test_a_run_as_estimated_does_not_warn_and_ends_near_its_cost(tmp_path):
    cfg = _small(tmp_path)
    dry_run(cfg, tmp_path / "run")
    text, entry = _run(cfg, tmp_path / "run")
    assert entry["records"] and not any(r["exceeded"] for r in entry["records"])
    assert "cost warning" not in text
    last = entry["records"][-1]
    assert 0.75 < last["ratio"] < 1.25  # the offline model's priors are its own measured lengths
    assert last["so_far_usd"] <= last["projected_usd"]
