"""Planted simulator errors through the real run path: a faulty learner or extractor
(tests/plugins/faulty_simulator.py) in front of the offline model. The audit must flag at least
90 % of the sessions that carry a planted error and at most 5 % of a clean offline run's; the
run writes the audit tables, and the report shows them with the verdicts recomputed without the
flagged sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ray_knowsim.config import parse_run_config
from ray_knowsim.run.fan_out import run
from ray_knowsim.audit.run import audit_run
from ray_knowsim.io.rundir import RunReader
from tests.doubles.run_config import small_config
from tests.doubles.planted import PLANTS, PLUGIN, planted_sessions

TASKS = [{"name": "math", "items": "pkg:demo/math.jsonl", "graphs": "pkg:demo/iu_math.json"},
         {"name": "expertqa", "items": "pkg:demo/expertqa.jsonl", "graphs": "pkg:demo/iu_expertqa.json"}]
pytestmark = pytest.mark.slow  # two runs of 42 sessions through local Ray (about a minute each on 2 shared cores)


def config(planted: bool, log: Path) -> dict:
    models = {"sim": {"backend": "offline"}}
    roles = {"user_sim": "sim", "extractor": "sim", "judge": "sim", "assistant": {"model": "sim"}}
    if planted:  # one faulty learner and one faulty extractor, each planting in half of its answers
        for role in ("user_sim", "extractor"):
            kinds = [k for k, (r, _) in PLANTS.items() if r == role]
            models[f"bad_{role}"] = {"backend": "faulty", "plant": kinds, "share": 0.5, "log": str(log)}
            roles[role] = f"bad_{role}"
    return small_config(plugins=[PLUGIN], models=models, roles=roles, tasks=TASKS, max_turns=4,
                        conditions=[{"strategy": "adaptive"}, {"strategy": "comprehensive"}],
                        engine={"shard_size": 8, "shard_fn": "ray_knowsim.sim.shard:run_shard"})


@pytest.fixture(scope="module")
def runs(ray_local, tmp_path_factory):
    root = tmp_path_factory.mktemp("planted")
    out = {}
    for name in ("clean", "planted"):
        outcome = run(parse_run_config(config(name == "planted", root / f"{name}-log")), output=root / name, quiet=True,
                      tables=name == "planted")  # (the clean run's tables: test_checks' and the engine's tests)
        assert outcome.n_failed == 0
        out[name] = (root / name, planted_sessions(root / f"{name}-log"))
    return out


def test_a_clean_offline_run_is_flagged_at_most_5_percent(runs):
    path, _ = runs["clean"]
    audit = audit_run(RunReader.open(path))
    assert len(audit.sessions) == 42 and audit.answers_checked
    assert len(audit.flagged_ids()) <= 0.05 * len(audit.sessions), [f.why for f in audit.flags]


@pytest.mark.parametrize("plant", list(PLANTS))
def test_planted_errors_are_flagged_at_90_percent(runs, plant):
    path, planted_by = runs["planted"]
    planted = planted_by[plant]
    audit = audit_run(RunReader.open(path))
    kinds = PLANTS[plant][1]
    flagged = {f.session_id for f in audit.flags if f.kind in kinds}
    assert len(planted) >= 10  # enough planted sessions for the share to mean something
    assert len(planted & flagged) >= 0.9 * len(planted), sorted(planted - flagged)
    assert all(f.evidence and f.why for f in audit.flags)
    # a kind is (nearly) never flagged in sessions where nothing of its kind was planted
    others = set(audit.sessions["session_id"]) - planted
    assert len(others & flagged) <= 0.05 * max(1, len(others)) + 1, sorted(others & flagged)


def summary_sessions(path: Path) -> list[str]:
    return RunReader.open(path).sessions.read(["session_id"]).column("session_id").to_pylist()


def test_the_run_writes_the_audit_tables_and_the_report_shows_them(runs, tmp_path):
    from ray_knowsim.report.build import build_report

    path, planted_by = runs["planted"]
    planted = set().union(*planted_by.values())
    summary = pd.read_parquet(path / "tables" / "audit.parquet")
    flags = pd.read_parquet(path / "tables" / "audit_flags.parquet")
    assert set(summary["condition"]) == {"sim:adaptive", "sim:comprehensive"} and set(summary["knowledge_level"]) == {"novice", "intermediate", "advanced"}
    assert int(summary["n_sessions"].sum()) == 42 and int(summary["n_flagged"].sum()) == flags["session_id"].nunique()
    assert set(flags["session_id"]) <= set(summary_sessions(path)) and (flags["evidence"].str.len() > 0).all()
    assert len(planted & set(flags["session_id"])) >= 0.9 * len(planted)
    md = build_report(path, tmp_path / "report").markdown_path.read_text()
    section = md[md.index("## Simulator audit"):]
    assert f"{flags['session_id'].nunique()} of 42 ok sessions flagged" in section
    assert "Verdicts without the flagged sessions" in section and "verdicts change" in section
    assert flags["session_id"].iloc[0].replace("_", "\\_") in section


def test_agreement_across_two_simulators(runs, tmp_path):
    """The clean and the planted run are one design under two simulator stand-ins: the command
    compares them; the faulty extractor's added and dropped well_explained labels show as TNR and
    TPR < 1 against the clean reference on the exchanges both read."""
    import shutil

    from ray_knowsim.compare.agreement import agreement
    from ray_knowsim.compare.runs import IncompatibleRuns

    clean, planted = runs["clean"][0], runs["planted"][0]
    result = agreement([clean, planted], tmp_path / "agree")
    rank, item = result.tables["rank_agreement"], result.tables["item_agreement"]
    assert set(rank["knowledge_level"]) == {"novice", "intermediate", "advanced", "all"} and rank["tau"].dropna().between(-1, 1).all()
    assert item["alpha"].dropna().between(-1, 1).all() and (item["n_runs"] == 2).all()
    pooled = result.tables["extractor_agreement"].query("iu == 'all'")
    # the faulty extractor adds well_explained labels (TNR < 1) and drops some (TPR < 1) where the reference read the same exchange
    assert pooled["n_labels"].sum() > 0 and pooled["tnr"].mean() < 1.0 and pooled["tpr"].mean() < 1.0
    assert pooled["kappa"].mean() < 1.0
    audit = result.tables["audit"].set_index("run")["n_flagged"]
    assert audit.iloc[0] <= 2 and audit.iloc[1] >= 10
    assert {"verdict@clean", "verdict@planted", "holds_everywhere"} <= set(result.tables["verdicts"].columns)
    assert (tmp_path / "agree" / "agreement.json").is_file()
    # anything but the simulator models differing is refused, naming it
    other = tmp_path / "other"
    shutil.copytree(clean, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["config"]["seed"] = 12345
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IncompatibleRuns, match="seed"):
        agreement([clean, other], tmp_path / "refused")


def test_compare_says_which_verdicts_rest_on_flagged_sessions(runs, tmp_path):
    from ray_knowsim.compare.pipeline import compare_runs

    result = compare_runs([runs["planted"][0]], tmp_path / "cmp")
    table = result.tables["audit_sensitivity"]
    paired = result.tables["paired"]
    assert len(table) == len(paired) and {"verdict_all", "verdict_unflagged", "changed"} <= set(table.columns)
    info = json.loads((tmp_path / "cmp" / "compare.json").read_text())["simulator_dependence"]
    assert info["flagged_sessions"] >= 10 and "Simulator audit:" in info["note"]
    assert (tmp_path / "cmp" / "audit_sensitivity.csv").is_file()
