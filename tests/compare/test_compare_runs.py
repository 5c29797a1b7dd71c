"""``compare`` on real offline runs: a planted difference and an A/A pair, merging two runs and
refusing an incompatible one. One local Ray for the module (tests/conftest.py's ray_local fixture)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from ray_knowsim.cli.main import main as cli_main
from ray_knowsim.compare.pipeline import compare_runs
from ray_knowsim.config import parse_run_config
from ray_knowsim.run.fan_out import run

pytestmark = pytest.mark.usefixtures("ray_local")


def planted_config(**over):
    """The same adaptive tutor under two names (A/A) and a minimal tutor (planted: clearly worse)."""
    cfg = {
        "name": "planted",
        "tasks": [{"name": "math", "items": "pkg:demo/math.jsonl", "graphs": "pkg:demo/iu_math.json"}],
        "models": {"sim": {"backend": "offline"}},
        "roles": {"user_sim": "sim", "extractor": "sim", "judge": "sim", "assistant": {"model": "sim"}},
        "levels": ["novice", "intermediate"],
        "conditions": [{"name": "tutor-a", "strategy": "adaptive"}, {"name": "tutor-b", "strategy": "adaptive"},
                       {"name": "weak", "strategy": "minimal"}],
        "max_turns": 3,
        "trials": 4,
        "engine": {"shard_size": 48},
    }
    cfg.update(over)
    return cfg


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "planted"
    cfg = parse_run_config(planted_config())
    outcome = run(cfg, output=out, quiet=True)
    assert outcome.status == "ok"
    return out


@pytest.fixture(scope="module")
def second(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "second"
    cfg = parse_run_config(planted_config(name="second", conditions=[{"name": "comp", "strategy": "comprehensive"}]))
    assert run(cfg, output=out, quiet=True).status == "ok"
    return out


def test_too_few_items_say_so_and_the_aa_pair_is_never_flagged(planted, tmp_path):
    # 4 demo items x 2 levels x 4 trials: the 32 matched cells per pair are 4 items, and a family of
    # 72 comparisons needs 12 items before anything can be significant
    res = compare_runs([planted], tmp_path / "cmp")
    p = res.tables["paired"]
    assert set(p["family_size"]) == {len(p)} == {72}  # one family: the whole comparison
    assert (p["n_items"] <= 4).all() and (p["min_items"] == 12).all() and not p["testable"].any()
    assert not p["significant"].any() and p["better"].isna().all()
    assert len(res.too_few) == 1 and "needs at least 12" in res.too_few[0]
    aa = p[(p.condition_a == "tutor-a") & (p.condition_b == "tutor-b")]
    assert len(aa) == 8 * 3
    for name in ("paired", "best", "mde", "leaderboard"):
        assert (tmp_path / "cmp" / f"{name}.parquet").is_file() and (tmp_path / "cmp" / f"{name}.csv").is_file()
    written = pd.read_parquet(tmp_path / "cmp" / "paired.parquet")
    for col in ("task", "knowledge_level", "metric", "condition_a", "condition_b", "n_pairs", "n_items", "mean_diff",
                "ci_low", "ci_high", "win_low_adj", "win_high_adj", "p_value", "p_adj", "min_items", "significant"):
        assert col in written.columns
    html = (tmp_path / "cmp" / "leaderboard.html").read_text()
    assert "<table" in html and "weak" in html and "Too few items for any verdict" in html
    assert "http" not in html.replace("http-equiv", "")
    info = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert info["too_few_items"] == res.too_few
    best = res.tables["best"]
    iq = best[(best.metric == "iq") & (best.knowledge_level == "all")].set_index("condition")
    assert iq.loc["weak", "rank"] == 3
    co = best[(best.metric == "co") & (best.knowledge_level == "all")].set_index("condition")
    assert co.loc["weak", "rank"] == 1  # lower CO is better: the minimal tutor overloads least


def test_one_number_per_thing_on_every_surface(planted, tmp_path):
    """Mean, CI and mean rank of a condition: the run's tables, the report and the leaderboard agree."""
    from ray_knowsim.report.build import build_report

    tables = {n: pd.read_parquet(planted / "tables" / f"{n}.parquet") for n in ("marginal", "level_means", "ranks")}
    long = compare_runs([planted], tmp_path / "cmp").tables["leaderboard"]
    board = long.drop_duplicates("condition").set_index("condition")
    by_metric = long.set_index(["condition", "metric"])
    marg = tables["marginal"].set_index("condition")
    ranks = tables["ranks"].query("scope == 'marginal'").set_index("condition")
    report = build_report(planted, tmp_path / "report").content
    rows = {r.condition: r for r in report.marginal}
    for cond in marg.index:
        assert board.loc[cond, "mean_rank"] == pytest.approx(ranks.loc[cond, "mean_rank"])
        assert board.loc[cond, "mean_rank_in_run"] == pytest.approx(ranks.loc[cond, "mean_rank"])  # one run: its own
        assert rows[cond].mean_rank == pytest.approx(ranks.loc[cond, "mean_rank"])
        for m in ("kg", "co", "dc", "iq"):
            assert by_metric.loc[(cond, m), "mean"] == pytest.approx(marg.loc[cond, m])
            assert by_metric.loc[(cond, m), "ci_low"] == pytest.approx(marg.loc[cond, f"{m}_ci_low"])
            assert rows[cond].values[m] == pytest.approx(marg.loc[cond, m])
            assert rows[cond].intervals[m].ci_high == pytest.approx(marg.loc[cond, f"{m}_ci_high"])
    lm = tables["level_means"].set_index(["condition", "knowledge_level"])
    for block in report.per_level:
        for r in block.rows:
            assert r.cells["kg"].ci.ci_low == pytest.approx(lm.loc[(r.condition, block.level), "kg_ci_low"])


def test_two_runs_merge_and_pair_across_runs(planted, second, tmp_path):
    res = compare_runs([planted, second], tmp_path / "cmp")
    assert res.conditions == ["planted/tutor-a", "planted/tutor-b", "planted/weak", "second/comp"]
    p = res.tables["paired"]
    cross = p[(p.condition_a == "planted/tutor-a") & (p.condition_b == "second/comp") & (p.knowledge_level == "novice")]
    assert (cross["n_pairs"] == 16).all()  # same seed -> same initial states -> every cell pairs
    board = res.tables["leaderboard"]
    assert set(board["condition"]) == set(res.conditions) and set(board["run"]) == {"planted", "second"}
    assert board["position"].min() == 1
    # the paper's mean rank of 4 conditions of 2 runs is not a run's own: the leaderboard says so and gives both
    assert set(board["ranked_set"]) == {"ranks 4 conditions of 2 runs together: its mean rank is not comparable with "
                                        "each run's own mean rank (see mean_rank_in_run)"}
    own = pd.read_parquet(planted / "tables" / "ranks.parquet").query("scope == 'marginal'").set_index("condition")
    mine = board.drop_duplicates("condition").set_index("condition")
    for cond in own.index:
        assert mine.loc[f"planted/{cond}", "mean_rank_in_run"] == pytest.approx(own.loc[cond, "mean_rank"])
    assert "ranks 4 conditions of 2 runs together" in (tmp_path / "cmp" / "leaderboard.html").read_text()


def test_the_terminal_line_names_the_correction_the_verdicts_used(planted, tmp_path, capsys):
    """compare's one-line result said "Bonferroni over N" whatever the rule (Holm's without --effect)."""
    from ray_knowsim.stats.multiplicity import correction_short

    for extra, name in (([], correction_short(False)), (["--effect", "0.1"], correction_short(True))):
        assert cli_main(["compare", str(planted), "--out", str(tmp_path / f"cmp{len(extra)}"), *extra]) == 0
        line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("compared "))
        assert f"sign test over items, {name} over " in line, line
    assert correction_short(False) == "Holm's procedure" and correction_short(True) == "Bonferroni"


def test_incompatible_run_is_refused_naming_the_difference(planted, tmp_path, capsys):
    other = tmp_path / "softer"
    shutil.copytree(planted, other, ignore=shutil.ignore_patterns("cache"))  # its markers name its turns: copied too
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["config"]["rules"]["overrides"] = {"dropoff_softening": 1.0}
    (other / "manifest.json").write_text(json.dumps(manifest))
    code = cli_main(["compare", str(planted), str(other), "--out", str(tmp_path / "cmp")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{other}: rules.dropoff_softening 1.0 != 1.3 in {planted}" in err


def test_report_shows_who_beats_whom_and_cost(planted, tmp_path):
    from ray_knowsim.report.build import build_report

    res = build_report(planted, tmp_path / "report")
    md = res.markdown_path.read_text()
    assert "## Who beats whom" in md and "### math, level all" in md and "## Cost" in md
    block = md.split("### math, level all")[1].split("## Cost")[0]
    assert "Too few items for any verdict" in block
    assert not any(line.startswith("| tutor-a |") for line in block.splitlines())  # no empty matrix that looks like a result
    html = res.html_path.read_text()
    assert 'id="who-beats-whom"' in html and 'id="cost"' in html


# ----------------------------------------------------------------------------- dry-run estimate

ROLES = ("user_sim", "assistant", "extractor", "judge")


def actual_tokens(run_dir) -> dict[str, tuple[int, int]]:
    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.score.store import RunScores

    df = RunScores.load(run_dir).attach(RunReader.open(run_dir).sessions.read()).to_pandas()
    return {r: (int(df[f"prompt_tokens_{r}"].sum()), int(df[f"completion_tokens_{r}"].sum())) for r in ROLES}


def assert_within_factor(est, actual, factor=2.0):
    for role in ROLES:
        e = est.per_role[role]
        p, c = actual[role]
        assert p / factor <= e.prompt_tokens <= p * factor, (role, "prompt", e.prompt_tokens, p)
        assert c / factor <= e.completion_tokens <= c * factor, (role, "completion", e.completion_tokens, c)
    tp, tc = sum(v[0] for v in actual.values()), sum(v[1] for v in actual.values())
    assert tp / factor <= est.totals.prompt_tokens <= tp * factor
    assert tc / factor <= est.totals.completion_tokens <= tc * factor


def test_dry_run_estimate_matches_the_real_run_within_a_factor_of_two(planted, tmp_path, capsys):
    from ray_knowsim.preflight.estimate import Estimate

    cfg_file = tmp_path / "planted.yaml"
    import yaml

    cfg_file.write_text(yaml.safe_dump(planted_config()))
    out = tmp_path / "dry"
    assert cli_main(["run", str(cfg_file), "--dry-run", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["estimate.json"]  # no session, no manifest, no cache
    raw = json.loads((out / "estimate.json").read_text())
    assert set(raw["totals"]) >= {"requests", "prompt_tokens", "completion_tokens", "cost_usd", "minutes"}
    est = Estimate.model_validate(raw)
    assert est.n_sessions == 96 and est.first_turn["user_sim"].rendered == 96
    # requests: 3 per turn x 3 turns + 1 judge per session, as the real run made (no retries there)
    from ray_knowsim.tables.cost import read_cost_columns
    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.score.store import RunScores

    calls = int(read_cost_columns(RunReader.open(planted).sessions, RunScores.load(planted).attach)["llm_calls"].sum())  # the judges' calls included
    assert est.totals.requests == 96 * 10 == calls
    assert est.totals.cost_usd == 0.0  # the offline model is free
    assert_within_factor(est, actual_tokens(planted))
    assert "dry run planted" in capsys.readouterr().out


def test_dry_run_from_a_previous_run(planted, second, tmp_path):
    from ray_knowsim.preflight.estimate import dry_run

    cfg = parse_run_config(planted_config(name="second", conditions=[{"name": "comp", "strategy": "comprehensive"}],
                                          models={"sim": {"backend": "offline", "price": {"input": 1.0, "output": 4.0}}}))
    est, path = dry_run(cfg, tmp_path / "dry", from_run=planted)
    assert path.is_file() and est.assumptions["completion_source"].startswith("previous run")
    # the previous run had no comprehensive tutor: the assistant falls back to its mean over strategies
    got = actual_tokens(second)
    for role in ("user_sim", "extractor", "judge"):
        p, c = got[role]
        assert p / 2 <= est.per_role[role].prompt_tokens <= p * 2 and c / 2 <= est.per_role[role].completion_tokens <= c * 2
    want_cost = sum(e.prompt_tokens * 1.0 + e.completion_tokens * 4.0 for e in est.per_role.values()) / 1e6
    assert est.totals.cost_usd == pytest.approx(want_cost)


def test_an_adaptive_run_is_flagged_its_own_verdicts_are_the_valid_ones(planted, tmp_path):
    run = tmp_path / "adaptive-like"
    shutil.copytree(planted, run, ignore=shutil.ignore_patterns("cache"))
    (run / "decisions.json").write_text("{}")  # compare only looks whether the run is adaptive
    compare_runs([run], tmp_path / "cmp")
    info = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert len(info["adaptive_runs"]) == 1 and "its own verdicts are in decisions.json" in info["adaptive_runs"][0]
    assert info["quantity"] == "item win rate" and all("sentence" in v for v in info["verdicts"])
