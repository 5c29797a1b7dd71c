"""Failed sessions counted by error kind per condition (with their reasons), truncated answers per
role, and the one rule for an incomplete run: checked against pandas on the same rows, and on
committed run directories read through the one reader."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from ray_knowsim.tables.outcomes import count_outcomes, kinds_text, outcome_tables, role_totals, truncations_by_role
from ray_knowsim.io.rundir import RunReader, RunStatus, manifest_facts
from ray_knowsim.schema.failures import error_kind, failure_class
from tests.doubles.broken import HTTP_400_DETAIL, failures, truncations
from tests.doubles.rundirs import HTTP_404, committed_run

ERRORS = [
    ("extractor_http_400", HTTP_400_DETAIL),
    ("assistant_http_404: The model `gpt-x` does not exist", None),  # a row from before error_detail: the reason in the error
    ("assistant_truncated", "the answer was cut at max_tokens=512"),
    (None, None),  # a failed row without an error (counted, never dropped)
]


@pytest.fixture(scope="module")
def rows() -> pa.Table:
    rng = random.Random(5)
    out = []
    for k in range(400):
        failed = rng.random() < 0.3
        error, detail = rng.choice(ERRORS) if failed else (None, None)
        out.append({"session_id": f"s{k}", "task": rng.choice(["math", "expertqa"]), "condition": f"c{k % 3}",
                    "knowledge_level": rng.choice(["novice", "advanced"]), "status": "failed" if failed else "ok",
                    "error": error, "error_detail": detail, "failure_class": None,
                    "llm_truncations": 0, "llm_truncations_assistant": rng.randint(0, 2), "llm_truncations_user_sim": 0,
                    "llm_truncations_extractor": rng.randint(0, 1)})
    for r in out:
        r["llm_truncations"] = r["llm_truncations_assistant"] + r["llm_truncations_extractor"]
    return pa.Table.from_pylist(out)


def test_failed_sessions_by_kind_per_condition_match_pandas(rows):
    df = rows.to_pandas()
    counter = count_outcomes(rows.to_batches(max_chunksize=37))  # batch boundaries change nothing
    per_level = counter.failures()
    failed = df[df.status != "ok"].copy()
    failed["kind"] = [error_kind(e) if isinstance(e, str) else "failed" for e in failed.error]
    want = failed.groupby(["task", "condition", "knowledge_level", "kind"]).size()
    got = per_level.set_index(["task", "condition", "knowledge_level", "error_kind"])["n_failed"]
    assert got.sort_index().to_dict() == want.to_dict()
    cells = df.groupby(["task", "condition", "knowledge_level"]).size()
    assert all(r.n_sessions == cells[(r.task, r.condition, r.knowledge_level)] for r in per_level.itertuples())
    per_cond = counter.failures(("condition",))  # levels and tasks summed; share of the condition's sessions
    sizes = df.groupby("condition").size()
    for r in per_cond.itertuples():
        assert r.n_failed == ((failed.condition == r.condition) & (failed.kind == r.error_kind)).sum()
        assert r.share == pytest.approx(r.n_failed / sizes[r.condition])
        assert r.failure_class == (failure_class(r.error_kind) or "model")
    reasons = dict(zip(per_cond.error_kind, per_cond.example))
    assert reasons["extractor_http_400"] == HTTP_400_DETAIL  # the server's words, from error_detail
    assert reasons["assistant_http_404"] == "The model `gpt-x` does not exist"  # from the error text itself
    assert reasons["failed"] == ""
    # the final line: kinds, most frequent first, each with its conditions
    text = kinds_text(per_level)
    top = failed.kind.value_counts()
    assert text.startswith(f"{top.index[0]} {top.iloc[0]} (") and "c0 " in text and "+1 more kinds" in text


def test_truncations_are_counted_per_role(rows):
    df = rows.to_pandas()
    table = count_outcomes([rows]).truncations()
    per = truncations_by_role(table)
    want = df.groupby(["task", "condition"])[["llm_truncations_assistant", "llm_truncations_extractor"]].sum()
    got = per.set_index(["task", "condition"])[["llm_truncations_assistant", "llm_truncations_extractor"]]
    assert got.sort_index().equals(want.sort_index()) and (per["unattributed"] == 0).all()
    totals = role_totals(table)
    assert totals == {"user_sim": 0, "assistant": int(df.llm_truncations_assistant.sum()), "extractor": int(df.llm_truncations_extractor.sum())}
    # rows written before the per-role columns: their truncations are "unattributed", never given to a role
    legacy = rows.drop_columns(["llm_truncations_assistant", "llm_truncations_user_sim", "llm_truncations_extractor"])
    old = count_outcomes([legacy]).truncations()
    assert int(old["unattributed"].sum()) == int(df.llm_truncations.sum()) and role_totals(old)["assistant"] == 0


def _status(manifest, planned, committed, failed=0, adaptive=False) -> RunStatus:
    return RunStatus(root=Path("."), layout="committed", config_hash=None, n_committed=committed, n_ok=committed - failed,
                     n_failed=failed, adaptive=adaptive, **{**manifest_facts(manifest), "n_planned": planned})


@pytest.mark.parametrize("manifest, planned, committed, adaptive, reason", [
    ({"status": "ok", "invocations": [{"finished_at": "t", "status": "ok"}]}, 10, 10, False, None),
    ({"status": "interrupted", "invocations": [{"finished_at": "t", "status": "interrupted"}]}, 1008, 64, False, "interrupted"),
    ({"invocations": [{"finished_at": "t", "status": "stopped_on_failures",
                       "totals": {"stopped": {"error": "assistant_http_404", "failed": 20, "finished": 20}}}]}, 96, 20, False,
     "stopped_on_failures"),
    ({"invocations": [{"finished_at": "t", "status": "ok"}, {"finished_at": None, "status": "running"}]}, 10, 4, False, "running"),
    ({"invocations": [{"finished_at": "t", "status": "incomplete"}]}, 96, 90, False, "incomplete"),
    ({"invocations": [{"finished_at": "t", "status": "ok"}]}, 96, 90, False, "incomplete"),  # fewer rows than planned: never complete
    ({"invocations": [{"finished_at": "t", "status": "ok"}]}, 96, 40, True, None),  # an adaptive run's procedure decided
    (None, None, 10, False, None),  # no plan recorded: cannot be judged
])
def test_the_one_rule_for_an_incomplete_run(manifest, planned, committed, adaptive, reason):
    comp = _status(manifest, planned, committed, adaptive=adaptive).completeness()
    assert comp.reason == reason and comp.incomplete == (reason is not None)
    if planned is not None:
        assert f"{committed:,} of {planned:,} planned" in comp.text
    if reason == "stopped_on_failures":
        assert "assistant_http_404" in comp.text


def test_committed_runs_read_through_the_reader(tmp_path):
    interrupted = committed_run(tmp_path, "interrupted", n_sessions=24, planned=96, status="interrupted", seed=1)
    comp = RunReader.open(interrupted).status().completeness()
    assert (comp.reason, comp.n_committed, comp.n_planned) == ("interrupted", 24, 96)

    all_failed = committed_run(tmp_path, "all_failed", n_sessions=16, all_failed=True, seed=2)
    tables = outcome_tables(RunReader.open(all_failed).sessions)
    f = tables["failures"]
    assert int(f["n_failed"].sum()) == 16 and set(f["error_kind"]) == {"assistant_http_404"} and (f["share"] == 1.0).all()
    assert set(f["failure_class"]) == {"infra"} and set(f["example"]) == {HTTP_404.split(": ", 1)[1]}

    plan = {"model-a:adaptive": (3, "extractor_http_400", HTTP_400_DETAIL)}
    chosen = committed_run(tmp_path, "chosen", n_sessions=24, seed=3,
                           edit=lambda s, t: truncations(*failures(s, t, plan), {"model-b:socratic": {"assistant": 2}}))
    tables = outcome_tables(RunReader.open(chosen).sessions)
    per = tables["failures"].groupby(["condition", "error_kind"])["n_failed"].sum().to_dict()
    assert per == {("model-a:adaptive", "extractor_http_400"): 3}
    trunc = truncations_by_role(tables["truncations"]).set_index("condition")
    sessions = RunReader.open(chosen).sessions.read(["condition"]).to_pandas().condition.value_counts()
    assert trunc.loc["model-b:socratic", "llm_truncations_assistant"] == 2 * sessions["model-b:socratic"]
    assert trunc.loc["model-a:adaptive", "llm_truncations_assistant"] == 0 and int(trunc["llm_truncations_extractor"].sum()) == 0
    assert isinstance(tables["truncations"], pd.DataFrame)
