"""Scoring as a stage: a finished offline run is re-judged into a second score set without touching
its simulation files, resumably, and a judge failure never discards a finished conversation."""

from __future__ import annotations

import json

import pytest
import yaml

from ray_knowsim.cli.main import main as cli
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.score.run_stage import score_run
from ray_knowsim.score.store import RunScores, ScoreDir
from tests.doubles.finished_runs import digests, finished_run

pytestmark = pytest.mark.usefixtures("ray_local")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A small run through the real simulation loop with the offline models and a baseline."""
    return finished_run(tmp_path_factory.mktemp("scored"),
                        conditions=[{"strategy": "adaptive"}, {"simulator": "zero-shot-cot"}])


def test_run_writes_the_judges_as_their_own_score_set(finished):
    cfg, out, outcome = finished
    assert outcome.n_failed == 0 and outcome.scores["name"] == "sim"
    raw = RunReader.open(out).sessions.read()
    assert raw.column("iq").null_count == raw.num_rows  # the simulation leaves the judge columns empty
    scores = ScoreDir(out, "sim").read()
    assert scores.num_rows == outcome.n_ok and scores.column("judge_error").null_count == scores.num_rows
    joined = RunScores.load(out).attach(raw).to_pylist()
    assert all(1 <= r["iq"] <= 10 for r in joined)
    lm = outcome.tables["level_means"]
    assert (lm["iq_n"] > 0).all()  # the tables see the joined scores


def test_score_rejudges_into_a_second_set_with_the_simulation_byte_identical(finished, tmp_path, capsys):
    cfg, out, _ = finished
    before = digests(out)
    judge = tmp_path / "judge2.yaml"
    judge.write_text(yaml.safe_dump({"backend": "offline", "name": "judge-two"}), encoding="utf-8")
    assert cli(["score", str(out), "--judge", str(judge)]) == 0
    assert digests(out) == before
    second = ScoreDir(out, "judge2")
    assert second.info()["judge_model"] == "judge2" and second.read().num_rows > 0
    rs = RunScores.load(out)
    assert rs.primary == "sim" and set(rs.sets) == {"sim", "judge2"}
    table = rs.attach(RunReader.open(out).sessions.read())
    assert "iq@judge2" in table.column_names and table.column("iq@judge2").null_count == 0
    assert table.column("iq").null_count == 0
    # resumable: a second invocation skips every committed shard
    again = score_run(cfg, out, judge=str(judge))
    assert again.scored_shards == 0 and again.skipped_shards == len(RunReader.open(out).index.live())
    assert digests(out) == before


class FailingJudge:
    name = "failing"

    async def generate(self, request):
        from ray_knowsim.schema.chat import ChatResponse

        return ChatResponse(text="", error="judge_http_500: down")


def test_a_failing_judge_keeps_the_simulation_and_names_its_error(finished):
    cfg, out, _ = finished
    from ray_knowsim.backends.model_set import ModelSet

    before = digests(out)
    models = ModelSet({"sim": FailingJudge()}, {}, [])
    result = score_run(cfg, out, name="broken", models=models)
    assert result.n_errors == result.n_sessions > 0
    rows = ScoreDir(out, "broken").read().to_pylist()
    assert all(r["iq"] is None and r["judge_error"].startswith("interaction_quality: judge_http_500") for r in rows)
    assert digests(out) == before
    sessions = RunReader.open(out).sessions.read().to_pylist()
    assert all(s["status"] == "ok" and s["kg"] is not None for s in sessions if s["simulator"] == "structured")


def _values(rows: list[dict]) -> dict[str, tuple]:
    return {r["session_id"]: (r["iq"], r["judge_information_calibration"], r["tokens_judge"], r["judge_error"])
            for r in rows}


def test_an_interrupted_score_pass_redoes_only_the_shards_it_had_not_committed(finished):
    cfg, out, _ = finished
    before = digests(out)
    one = score_run(cfg, out, name="serial", shard_concurrency=1)
    assert one.scored_shards == len(RunReader.open(out).index.live()) >= 3
    serial = ScoreDir(out, "serial")
    # an interruption after some shards: drop two shards' commits (marker and file), as if never written
    lost = sorted(serial.markers().values(), key=lambda m: m.shard_id)[:2]
    for m in lost:
        (serial.root / m.file).unlink()
        (serial.root / f"{m.commit}.json").unlink()
    kept = {m.shard_id: m.token for m in serial.markers().values()}
    again = score_run(cfg, out, name="serial", shard_concurrency=4)
    assert sorted(m.shard_id for m in again.committed) == sorted(m.shard_id for m in lost)
    assert again.skipped_shards == len(kept)
    assert {m.shard_id: m.token for m in serial.markers().values() if m.shard_id in kept} == kept  # untouched
    # shards judged at once give the values judged one by one
    wide = score_run(cfg, out, name="wide", shard_concurrency=8)
    assert wide.scored_shards == one.scored_shards
    assert _values(ScoreDir(out, "wide").read().to_pylist()) == _values(serial.read().to_pylist())
    assert digests(out) == before


def test_the_report_of_a_rejudged_run_compares_its_judges(finished, tmp_path):
    from ray_knowsim.report.build import ReportOptions, build_report

    cfg, out, _ = finished
    score_run(cfg, out, name="second")  # a second set (skipped shards where it exists already)
    before = digests(out)
    result = build_report(out, tmp_path / "report", ReportOptions(sample=1))
    md = result.markdown_path.read_text(encoding="utf-8")
    assert "## Judges" in md and "IQ (sim)" in md and "IQ (second)" in md
    assert "second vs sim: rho" in md
    assert 'id="judges"' in result.html_path.read_text(encoding="utf-8")
    assert digests(out) == before


def test_a_score_set_keeps_one_judge(finished, tmp_path, capsys):
    cfg, out, _ = finished
    assert score_run(cfg, out, name="only-iq", judges=["interaction_quality"]).scored_shards > 0
    before = {p.name: p.read_bytes() for p in (out / "scores" / "only-iq").iterdir()}
    # the same set with another judge list, or from another judge model: refused, nothing written
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"backend": "offline", "name": "another"}), encoding="utf-8")
    for args in (["--judges", "interaction_quality,termination"], ["--judge", str(other)]):
        assert cli(["score", str(out), "--name", "only-iq", *args]) == 2
        assert "score set 'only-iq' holds scores of 'sim'" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in (out / "scores" / "only-iq").iterdir()} == before
    # a judge file named like a model key of the run, with another entry
    clash = tmp_path / "sim.yaml"
    clash.write_text(yaml.safe_dump({"backend": "offline", "name": "not-the-run's"}), encoding="utf-8")
    assert cli(["score", str(out), "--judge", str(clash), "--name", "clash"]) == 2
    assert "'sim' is a model key of the run with another entry" in capsys.readouterr().err
    assert not (out / "scores" / "clash").exists()


def test_unknown_judges_and_plugin_judges(finished, tmp_path, capsys, monkeypatch):
    cfg, out, _ = finished
    assert cli(["score", str(out), "--judges", "interaction_quality,brevity_xyz", "--name", "b"]) == 2
    assert "unknown judge(s) ['brevity_xyz']" in capsys.readouterr().err
    assert cli(["score", str(out), "--plugin", "no_such_plugin_xyz", "--name", "b"]) == 2
    assert "plugin 'no_such_plugin_xyz' cannot be imported" in capsys.readouterr().err
    (tmp_path / "turn_count_judge.py").write_text(
        "from ray_knowsim.llm.parse import ParseResult\n"
        "from ray_knowsim.schema.chat import ChatRequest\n"
        "from ray_knowsim.score.judges import JUDGES, Judge\n\n\n"
        "class TurnCount(Judge):\n"
        "    slot = 9\n\n"
        "    def applies(self, t):\n"
        "        return bool(t.messages)\n\n"
        "    def request(self, t, *, seed, request_id):\n"
        "        return ChatRequest(messages=({'role': 'user', 'content': 'Say OK.'},), role='judge', seed=seed,\n"
        "                           request_id=request_id)\n\n"
        "    def parse(self, text, t):\n"
        "        return ParseResult(value=len(t.messages))\n\n"
        "    def values(self, value, t):\n"
        "        return {'n_messages': value}\n\n\n"
        "if 'turn_count_xyz' not in JUDGES:\n"
        "    JUDGES.register('turn_count_xyz', TurnCount())\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    before = digests(out)
    assert cli(["score", str(out), "--plugin", "turn_count_judge", "--judges", "turn_count_xyz", "--name", "counted"]) == 0
    rows = ScoreDir(out, "counted").read().to_pylist()
    assert rows and all(r["judge_error"] is None and '"n_messages"' in (r["extra_json"] or "") for r in rows)
    assert digests(out) == before


def test_an_operational_change_to_the_judge_keeps_its_score_set(finished):
    """Timeouts, limits and price change how a judge is reached or what it costs, not what it answers:
    the set resumes (as a run's config hash ignores them)."""
    cfg, out, _ = finished
    first = score_run(cfg, out, name="priced", judges=["interaction_quality"])
    assert first.scored_shards > 0
    from ray_knowsim.schema.price import Price

    entry = cfg.models["sim"].model_copy(update={"price": Price(input=1.0, output=2.0)})
    repriced = cfg.model_copy(update={"models": {**cfg.models, "sim": entry}})
    again = score_run(repriced, out, name="priced", judges=["interaction_quality"])
    assert again.scored_shards == 0 and again.skipped_shards == first.scored_shards


@pytest.mark.slow  # re-reduces the tables twice: ~18 s CPU
def test_primary_switches_the_set_the_tables_show(finished, tmp_path, capsys):
    cfg, out, _ = finished
    before = digests(out)
    other = tmp_path / "strict.yaml"
    other.write_text(yaml.safe_dump({"backend": "offline", "name": "strict-judge"}), encoding="utf-8")
    level_means = out / "tables" / "level_means.parquet"
    level_means.unlink()  # rewritten by --primary
    assert cli(["score", str(out), "--judge", str(other), "--primary", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["primary"] is True
    rs = RunScores.load(out)
    assert rs.primary == "strict" and level_means.is_file()
    table = rs.attach(RunReader.open(out).sessions.read())
    assert "iq@sim" in table.column_names and "iq@strict" not in table.column_names  # sim is now the extra set
    assert digests(out) == before
    # and back: the run's own judge set, already complete, becomes primary again without judging anything
    assert cli(["score", str(out), "--name", "sim", "--primary"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("score set 'sim' (judge ") and ", now the primary set" in printed.splitlines()[0]
    assert "0 conversations judged in 0 shard(s)" in printed and RunScores.load(out).primary == "sim"


class DriftingJudge:
    """A judge that writes the shapes models drift into: the rater first answers a 0–1 field on a
    0–10 scale (refused, then repaired as "7/10"), the termination judge names a turn past the end."""

    name = "drifting"
    RATING = '{{"information_calibration": {ic}, "perceived_overload": "20%", "quality_score": "8/10", "perceived_learning": 6}}'

    async def generate(self, request):
        from ray_knowsim.schema.chat import ChatResponse

        if request.prompt_version.startswith("rater@"):
            repaired = "+repair@" in request.prompt_version
            return ChatResponse(text=self.RATING.format(ic='"7/10"' if repaired else 7), finish_reason="stop")
        return ChatResponse(text='{"ending_turn": 99, "termination_reason": "max_turns"}', finish_reason="stop")


def test_judge_repairs_refusals_and_warnings_are_stored_counted_and_reported(finished):
    import json

    import pandas as pd

    from ray_knowsim.backends.model_set import ModelSet
    from ray_knowsim.tables.reduce import ITEM_KEYS, level_means, normalise_sums, partial_moments
    from ray_knowsim.report.build import build_report

    cfg, out, _ = finished
    result = score_run(cfg, out, name="drifting", models=ModelSet({"sim": DriftingJudge()}, {}, []))
    assert result.n_errors == 0
    rows = ScoreDir(out, "drifting").read().to_pylist()
    baseline = [r for r in rows if "termination" in json.loads(r["judge_drift_json"])]
    assert rows and all(r["judge_information_calibration"] == pytest.approx(0.7) for r in rows)  # "7/10" is 0.7
    for r in rows:
        drift = json.loads(r["judge_drift_json"])
        rater = drift["interaction_quality"]
        assert rater["refusals"] == ["judge_invalid_output: information_calibration is 7, outside its 0–1 scale: "
                                     "answer with a number from 0 to 1"]
        assert rater["repairs"] == ["fraction:information_calibration=7/10", "percent:perceived_overload=20%",
                                    "out_of_top:quality_score=8/10"]
        assert r["judge_refusals"] == 1 and r["judge_repairs"] == 3
    assert baseline and all(r["judge_warnings"] == 1 for r in baseline)
    assert all("read as" in json.loads(r["judge_drift_json"])["termination"]["warnings"][0] for r in baseline)
    # counted per condition, like the extractor's drift
    ScoreDir(out, "drifting").make_primary()
    try:
        scores = RunScores.load(out)
        sessions = RunReader.open(out).sessions.read()
        sums = partial_moments(scores.attach(sessions)).to_pandas()
        lm = level_means(normalise_sums(sums.groupby(list(ITEM_KEYS), as_index=False).sum()))
        per_condition = lm.groupby("condition")[["judge_refusals", "judge_warnings"]].sum()
        n_per_condition = pd.Series([r["condition"] for r in sessions.to_pylist()]).value_counts()
        assert (per_condition["judge_refusals"] == n_per_condition.reindex(per_condition.index)).all()
        assert per_condition.loc["baseline:zero-shot-cot", "judge_warnings"] == len(baseline)
        facts = dict(build_report(out, out / "report-drift").content.facts())
        assert facts["judge drift"] == f"{3 * len(rows):,} repaired, {len(rows):,} refused, {len(baseline):,} warned"
    finally:
        ScoreDir(out, "sim").make_primary()


def test_score_refuses_workers_on_other_code_before_judging(finished, capsys, monkeypatch):
    """`score` puts our code on workers (the judges' reduction), so it runs the same code check as
    `run`: a node on another copy of ray_knowsim stops it before any score set is written."""
    from ray_knowsim.cluster import codecheck

    _, out, _ = finished
    monkeypatch.setattr(codecheck, "cluster_mismatches",
                        lambda expected=None: (["node 10.0.0.9 (abc): imports /srv/old/ray_knowsim"], []))
    assert cli(["score", str(out), "--name", "mixed"]) == 2
    err = capsys.readouterr().err
    assert "the workers would run other code than this driver" in err and "/srv/old/ray_knowsim" in err
    assert not (out / "scores" / "mixed").exists()


def test_score_prints_a_short_summary_and_json_the_record(finished, tmp_path, capsys):
    """Issue 51: the judges, the counts, the mean IQ per condition (the score set's own numbers)
    and the folder, each line at most 100 columns; --json prints the record with the same numbers."""
    cfg, out, _ = finished
    judge = tmp_path / "third.yaml"
    judge.write_text(yaml.safe_dump({"backend": "offline", "name": "judge-three"}), encoding="utf-8")
    assert cli(["score", str(out), "--judge", str(judge)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 100 and len(lines) <= 8
    assert lines[0] == "score set 'third' (judge third; interaction_quality, termination)"
    sessions = RunScores.load(out).attach(RunReader.open(out).sessions.read()).to_pandas()
    ok = sessions[sessions["status"] == "ok"]
    assert f"{len(ok):,} conversations judged in " in lines[1] and "0 judge error(s)" in lines[1]
    means = ok.groupby("condition")["iq@third"].agg(["mean", "count"])
    text = " ".join(" ".join(lines).split())
    for cond, r in means.iterrows():
        assert f"{cond} {r['mean']:.2f} (n {int(r['count'])})" in text
    assert lines[-1] == f"written to {out / 'scores' / 'third'}"
    # resumed with --json: the record, the same means, nothing judged again
    assert cli(["score", str(out), "--judge", str(judge), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["scored_shards"] == 0 and record["judges"] == ["interaction_quality", "termination"]
    got = {m["condition"]: (m["iq"], m["n"]) for m in record["iq_by_condition"]}
    assert got == {c: (pytest.approx(r["mean"]), int(r["count"])) for c, r in means.iterrows()}
