"""Resume per session (run/resume.py): the rule for one session, a plan cut differently on
resume (another shard size, another condition grouping), and whole runs resumed after induced
infra and model failures at each setting of --rerun-model-failures."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ray_knowsim.config import parse_run_config
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.run.resume import Attempt, ResumePolicy, next_attempt, plan_work
from ray_knowsim.run.fan_out import run
from ray_knowsim.io.commits import SessionEntry
from ray_knowsim.io.rundir import RunReader
from tests.doubles.run_config import rows, small_config

INFRA_SID = "math/demo_math_02/novice/sim:adaptive/0"
MODEL_SID = "math/demo_math_03/advanced/sim:socratic/0"


def entry(status="failed", error=None, attempt=1, cls=None, previous=()):
    return SessionEntry(status=status, error=error, attempt=attempt, failure_class=cls, previous_errors=previous)


def test_the_rule_for_one_session():
    policy, flag = ResumePolicy(), ResumePolicy(rerun_model_failures=True)
    assert next_attempt(None, policy) == (Attempt(1), "new")
    assert next_attempt(entry("ok"), flag) == (None, "ok")
    assert next_attempt(entry(error="assistant_http_503", cls="infra"), policy) == \
        (Attempt(2, ("assistant_http_503",)), "rerun_infra")  # same seeds: it measures the same thing
    assert next_attempt(entry(error="extractor_invalid_json", cls="model"), policy) == (None, "kept_model")
    assert next_attempt(entry(error="extractor_invalid_json", cls="model", attempt=2, previous=("x_timeout",)), flag) == \
        (Attempt(3, ("x_timeout", "extractor_invalid_json"), reseed=True), "rerun_model")
    assert next_attempt(entry(error="assistant_http_503", attempt=3), flag) == (None, "exhausted")
    assert next_attempt(entry(error="user_sim_timeout"), policy)[1] == "rerun_infra"  # class from the error


def committed(plan: Plan, shards: list[int]) -> dict[str, SessionEntry]:
    return {sid: entry("ok") for k in shards for sid in plan.shard_session_ids(k)}


@pytest.mark.parametrize("other", [
    {"engine": {"shard_size": 3}},  # another shard size
    {"groups": [["sim:socratic"], ["sim:adaptive"]]},  # a placement grouping the conditions
])
def test_another_cut_on_resume_redoes_and_double_counts_nothing(other):
    cfg = parse_run_config(small_config())
    inputs = load_inputs(cfg)
    first = Plan(cfg, inputs)
    done = committed(first, [0, 2, 3])  # what the interrupted run committed
    if "groups" in other:
        second = Plan(cfg, inputs, other["groups"])
    else:
        second = Plan(parse_run_config(small_config(engine=other["engine"])), inputs)
    assert second.fingerprint != first.fingerprint
    work = plan_work(second, done, ResumePolicy())
    todo = [sid for shard in work.shards.values() for sid in shard]
    everything = [sid for k in range(second.n_shards) for sid in second.shard_session_ids(k)]
    assert len(todo) == len(set(todo)) == 24 - len(done) and not set(todo) & set(done)
    assert sorted(todo + list(done)) == sorted(everything) and work.ok == len(done)


# ----------------------------------------------------------------------------- whole runs


def config(tmp_path, heal, **engine):
    options = {"fail_sessions": {INFRA_SID: "assistant_http_503", MODEL_SID: "extractor_invalid_json"},
               "fail_once_file": str(heal)}
    return parse_run_config(small_config(engine={"shard_fn_options": options, **engine}))


def by_id(run_dir) -> pd.DataFrame:
    return rows(run_dir, "sessions", scores=False).set_index("session_id")


@pytest.mark.usefixtures("ray_local")
@pytest.mark.parametrize("flag", [False, True])
def test_resume_after_infra_and_model_failures(tmp_path, flag):
    heal = tmp_path / "healed"
    cfg = config(tmp_path, heal)
    first = run(cfg, output=tmp_path / "run", quiet=True, tables=False)
    assert first.n_failed == 2
    before = by_id(tmp_path / "run")
    assert before.loc[INFRA_SID, "failure_class"] == "infra" and before.loc[MODEL_SID, "failure_class"] == "model"
    heal.touch()  # the endpoint is back; the model would now answer readably too
    second = run(cfg, output=tmp_path / "run", quiet=True, rerun_model_failures=flag)
    after = by_id(tmp_path / "run")
    assert len(after) == 24 and second.resume["rerun"] == {"infra": 1, "model": int(flag)}
    infra = after.loc[INFRA_SID]
    assert infra["status"] == "ok" and infra["attempt"] == 2 and json.loads(infra["previous_errors"]) == ["assistant_http_503"]
    assert infra["seed"] == before.loc[INFRA_SID, "seed"]  # an infra rerun is the same draw
    model = after.loc[MODEL_SID]
    if flag:
        assert model["status"] == "ok" and model["attempt"] == 2 and model["seed"] != before.loc[MODEL_SID, "seed"]
        assert json.loads(model["previous_errors"]) == ["extractor_invalid_json"] and second.n_failed == 0
    else:
        assert model["status"] == "failed" and model["attempt"] == 1 and second.n_failed == 1
        assert second.resume["kept_failed"]["model"] == 1
    untouched = [s for s in after.index if s not in (INFRA_SID, MODEL_SID)]
    pd.testing.assert_frame_equal(after.loc[untouched], before.loc[untouched])
    # the tables say what failed, next to the metrics
    lm = second.tables["level_means"]
    assert lm["n_rerun"].sum() == 1 + int(flag) and lm["n_failed_model"].sum() == int(not flag)
    assert lm["n_failed_infra"].sum() == 0 and (lm["failure_rate"] == lm["n_failed"] / lm["n_sessions"]).all()
    inv = json.loads((tmp_path / "run" / "manifest.json").read_text())["invocations"][-1]
    assert inv["totals"]["resume"]["rerun_model_failures"] is flag and inv["totals"]["resume"]["rerun"]["infra"] == 1


@pytest.mark.usefixtures("ray_local")
def test_a_run_interrupted_under_one_cut_resumes_under_another(tmp_path):
    """An interrupted run (one shard's worker died, no retries) resumed with another shard size:
    only the missing sessions run, and the rows equal an undisturbed run's."""
    crash = tmp_path / "crash"

    def cut(**engine):
        return parse_run_config(small_config(engine={"shard_fn_options": {"crash_file": str(crash)}, **engine}))

    clean = run(cut(), output=tmp_path / "clean", quiet=True, tables=False)
    assert clean.n_ok == 24
    crash.write_text("shard-000002")
    cut4 = cut(shard_retries=0)
    first = run(cut4, output=tmp_path / "run", quiet=True, tables=False)
    assert list(first.incomplete) == ["shard-000002"] and first.n_ok == 20
    cut3 = cut(shard_size=3)
    assert cut3.config_hash() == cut4.config_hash()
    resumed = run(cut3, output=tmp_path / "run", quiet=True, tables=False)
    assert resumed.resume["new"] == 4 and resumed.resume["ok"] == 20 and resumed.n_ok == 24
    pd.testing.assert_frame_equal(by_id(tmp_path / "run"), by_id(tmp_path / "clean"))
    assert RunReader.open(tmp_path / "run").status().superseded_rows == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    plans = [i["plan"] for i in manifest["invocations"]]
    assert len(set(plans)) == 2 and manifest["plan"]["shard_size"] == 3
    assert {c.plan for c in RunReader.open(tmp_path / "run").index.live()} == set(plans)
