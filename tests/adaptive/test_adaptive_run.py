"""A planted offline benchmark over the 30 reference math items, through the real runner.

Two tutors of planted different quality (the offline model's minimal and comprehensive
strategies: the comprehensive tutor teaches more and overloads more, at every level), decide
"best" on KG and CO at three levels. The adaptive run must make every decision the full fixed
run makes, with at most half of its sessions; resuming it gives the same rounds and decisions;
the report shows the trace; compare reads it. The fixed run is the adaptive run's directory
completed without the adaptive section (same config hash: only the missing sessions run).
"""

from __future__ import annotations

import shutil

import pytest

from ray_knowsim.adaptive.driver import run_adaptive
from ray_knowsim.adaptive.observe import pair_counts
from ray_knowsim.compare.pipeline import compare_runs
from ray_knowsim.compare.runs import load_runs
from ray_knowsim.config import parse_run_config
from ray_knowsim.run.fan_out import run
from ray_knowsim.io.decisions import read_decisions
from ray_knowsim.stats.adaptive import Procedure

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow, pytest.mark.timeout(1500)]


def planted_config(ref, **over) -> dict:
    cfg = {
        "name": "planted30",
        "tasks": [{"name": "math", "items": str(ref / "paper_subset" / "math.jsonl"), "graphs": str(ref / "iu_cache" / "math.json"),
                   "split": "benchmarking"}],
        "graph_mode": "reference",
        "levels": ["novice", "intermediate", "advanced"],
        "models": {"offline": {"backend": "offline"}},
        "roles": {"user_sim": "offline", "extractor": "offline", "assistant": {"model": "offline"}},
        "conditions": [{"name": "weak", "strategy": "minimal"}, {"name": "strong", "strategy": "comprehensive"}],
        "trials": 1,
        "seed": 42,
        "max_turns": 4,
        "engine": {"shard_size": 15},
        "adaptive": {"decide": "best", "metrics": ["kg", "co"], "alpha": 0.05, "round": {"items": 5, "trials": 1},
                     "budget": {"sessions": 2000}},
    }
    cfg.update(over)
    return cfg


@pytest.fixture(scope="module")
def planted(tmp_path_factory, shared_ref):
    root = tmp_path_factory.mktemp("adaptive")
    cfg = parse_run_config(planted_config(shared_ref))
    adaptive = root / "adaptive"
    out = run_adaptive(cfg, output=adaptive, quiet=True)
    fixed = root / "fixed"
    shutil.copytree(adaptive, fixed)
    plain = parse_run_config(planted_config(shared_ref, adaptive=None))
    assert plain.config_hash() == cfg.config_hash()
    assert run(plain, output=fixed, quiet=True).status == "ok"
    return cfg, adaptive, fixed, out


def test_adaptive_run_makes_the_fixed_runs_decisions_with_at_most_half_of_its_sessions(planted):
    cfg, adaptive, fixed, out = planted
    rec = read_decisions(adaptive)
    assert rec == out.record and rec.status == "decided" and rec.family_size == 6
    assert rec.sessions_fixed == 30 * 3 * 2
    assert rec.sessions_run <= rec.sessions_fixed / 2
    assert rec.spend_run.sessions == rec.sessions_run and rec.spend_fixed.sessions == rec.sessions_fixed
    assert 0 < rec.spend_run.prompt_tokens < rec.spend_fixed.prompt_tokens
    # the full fixed run's decisions, with the same rule and family (compare's verdict at alpha / m)
    rows = load_runs([fixed], ["kg", "co"])[0].sessions
    assert len(rows) == rec.sessions_fixed
    proc = Procedure.build(["math"], cfg.levels, ["kg", "co"], ["weak", "strong"], "best", 0.05)
    full = proc.fixed(pair_counts(rows, proc))
    by_key = {(d.knowledge_level, d.metric): d for d in rec.decisions}
    made = [d for d in full.decisions if d.decided]
    assert len(made) == 6  # the planted differences are decided by the fixed run
    for d in made:
        mine = by_key[(d.level, d.metric)]
        assert mine.decided and mine.winner == d.winner, (d.level, d.metric, mine.winner, d.winner)
        assert d.winner == ("strong" if d.metric == "kg" else "weak")
    # the decision trace: rounds in order, each with its items; the sessions add up
    assert [r.round for r in rec.rounds] == list(range(1, len(rec.rounds) + 1))
    assert sum(r.sessions for r in rec.rounds) == rec.sessions_run
    assert all(len(r.items["math"]) == 5 for r in rec.rounds)
    assert {d.after_round for d in rec.decisions} <= {r.round for r in rec.rounds}
    print(f"planted: {rec.sessions_run} of {rec.sessions_fixed} sessions ({rec.sessions_run / rec.sessions_fixed:.0%}), "
          f"decided after rounds {sorted({d.after_round for d in rec.decisions})}")


def test_resume_and_rerun_give_the_same_rounds_and_decisions(planted, tmp_path, shared_ref):
    cfg, adaptive, fixed, out = planted
    # interrupted after the first round, then resumed: the same record as the uninterrupted run
    first = run_adaptive(cfg, output=tmp_path / "b", quiet=True, max_rounds=1)
    assert first.record.status == "running" and len(first.record.rounds) == 1
    assert first.record.rounds[0] == out.record.rounds[0]
    resumed = run_adaptive(cfg, output=tmp_path / "b", quiet=True)
    assert resumed.record == out.record
    # rerun of the finished run: nothing new runs, the same record
    before = sorted(p.name for p in (adaptive / "sessions").iterdir())
    again = run_adaptive(cfg, output=adaptive, quiet=True)
    assert again.record == out.record and sorted(p.name for p in (adaptive / "sessions").iterdir()) == before
    # rows no round asked for (here: the rest of the full design) are never looked at: replaying the
    # rounds over the completed fixed run gives the same record
    shutil.copytree(fixed, tmp_path / "f", ignore=shutil.ignore_patterns("decisions.json"))
    assert run_adaptive(cfg, output=tmp_path / "f", quiet=True).record == out.record


def test_report_shows_the_trace_and_compare_reads_the_runs(planted, tmp_path):
    from ray_knowsim.report.build import build_report

    _, adaptive, fixed, out = planted
    md = build_report(adaptive, tmp_path / "report").markdown_path.read_text()
    assert "## Adaptive decisions" in md and "### Rounds" in md
    assert f"{out.record.sessions_run:,} of the fixed design's {out.record.sessions_fixed:,} sessions" in md
    # the run's own sequential verdicts, never a fixed-sample re-test of the data it stopped collecting
    assert "## Verdicts of the adaptive run (its own sequential tests)" in md and "## Who beats whom" not in md
    # the results tables' positions and ★ are the run's own decisions, per level (the marginal has none and says so)
    from ray_knowsim.report.tables import OTHER_TABLE_LEAD

    assert OTHER_TABLE_LEAD in md
    winners = {(d.knowledge_level, d.metric): d.winner for d in out.record.decisions if d.decided and d.winner}
    assert winners
    column = {"kg": 0, "dc": 1, "co": 2, "iq": 3}  # the report's metric order
    level, checked = None, 0
    for line in md[md.index("## Results per knowledge level"): md.index("## The paper's mean rank")].splitlines():
        if not line.startswith("| ") or line.startswith(("| Level", "| ---")):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        level, cond = cells[0] or level, cells[1]
        for (lv, metric), winner in winners.items():
            if lv == level:
                cell = cells[3 + column[metric]]
                assert ("★" in cell) == (cond == winner) and cell.endswith("(#1)" if cond == winner else "(#2)"), (lv, metric, line)
                checked += 1
    assert checked == 2 * len(winners)
    res = compare_runs([adaptive], tmp_path / "cmp-adaptive")
    assert "is an adaptive run" in (tmp_path / "cmp-adaptive" / "leaderboard.html").read_text()
    assert len(res.tables["paired"]) and (res.tables["paired"]["n_items"] <= out.record.sessions_run // 6).all()
    # the full fixed run: the planted differences are significant, items as the unit
    p = compare_runs([fixed], tmp_path / "cmp-fixed").tables["paired"]
    for level in ("novice", "intermediate", "advanced", "all"):
        kg = p[(p.metric == "kg") & (p.knowledge_level == level)].iloc[0]
        co = p[(p.metric == "co") & (p.knowledge_level == level)].iloc[0]
        assert kg["significant"] and kg["better"] == "strong" and kg["n_items"] == 30
        assert co["significant"] and co["better"] == "weak"
        assert kg["p_adj"] < 0.05  # the test agrees with the interval (compare's alpha is 0.05)


def test_the_planning_replay_over_the_completed_run_decides_what_the_run_did(planted, tmp_path):
    """ray-knowsim adaptive-replay over the full fixed run, with the run's spec: the same rounds,
    decisions, counts and sessions as the real adaptive run (the rounds are the runner's own)."""
    import json

    from ray_knowsim.cli.main import main

    _, adaptive, fixed, out = planted
    assert main(["adaptive-replay", str(fixed), "--json", str(tmp_path / "r.json")]) == 0
    got = json.loads((tmp_path / "r.json").read_text())
    want = out.record.model_dump(mode="json")
    for key in ("quantity", "spec", "status", "sessions_run", "sessions_fixed", "decisions", "rounds", "family_size"):
        assert got[key] == want[key], key
    assert got["fixed_design"]["decided"] == 6
    # another spec is planned without spending: a larger round size uses at least as many sessions
    assert main(["adaptive-replay", str(fixed), "--set", "round.items=10", "--json", str(tmp_path / "r10.json")]) == 0
    assert json.loads((tmp_path / "r10.json").read_text())["sessions_run"] >= got["sessions_run"]


def test_a_resume_with_another_spec_is_refused_naming_the_fields(planted, shared_ref):
    from ray_knowsim.plan.build import RunError

    cfg, adaptive, _, out = planted
    other = parse_run_config(planted_config(shared_ref, adaptive={**planted_config(shared_ref)["adaptive"], "alpha": 0.1,
                                                                  "metrics": ["kg"]}))
    with pytest.raises(RunError, match=r"alpha \(0\.05 -> 0\.1\).*metrics"):
        run_adaptive(other, output=adaptive, quiet=True)
    assert read_decisions(adaptive) == out.record  # nothing was changed
