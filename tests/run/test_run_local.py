"""End to end on one local Ray (2 CPUs): tables against a plain pandas reduction of the same rows,
resume after a worker dies, and an LLM endpoint that fails some requests.

Runs use the stand-in shard function (``tests.doubles.standin``), so they test the engine
alone; the same checks apply unchanged once ``engine.shard_fn`` is the real simulation loop.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ray_knowsim.config import parse_run_config
from ray_knowsim.tables.reduce import FM_COLUMNS, METRICS, RANK_METRICS
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS
from ray_knowsim.run.fan_out import run
from ray_knowsim.schema.results import LOWER_IS_BETTER
from tests.doubles.run_config import assert_same_rows, rows, small_config

pytestmark = pytest.mark.usefixtures("ray_local")


def commits(run_dir) -> dict[str, object]:
    """Commit name -> commit, of every counted commit."""
    return {c.name: c for c in RunReader.open(run_dir).index.live()}


FAILS = ["math/demo_math_02/advanced/sim:adaptive/0"]


@pytest.fixture(scope="module")
def crash_file(tmp_path_factory):
    return tmp_path_factory.mktemp("crash") / "crash-shard"


def config(crash_file, **engine):
    return parse_run_config(small_config(engine={"shard_fn_options": {"fail_sessions": FAILS, "crash_file": str(crash_file)}, **engine}))


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory, crash_file):
    out = tmp_path_factory.mktemp("clean")
    cfg = config(crash_file)
    outcome = run(cfg, output=out, quiet=True)
    return cfg, out, outcome


def test_tables_match_a_pandas_reduction(clean_run):
    cfg, out, outcome = clean_run
    assert outcome.n_sessions == 24 and outcome.n_ok == 23 and outcome.n_failed == 1 and not outcome.incomplete
    df = rows(out, "sessions")
    assert df["session_id"].is_unique and len(df) == 24
    ok = df[df["status"] == "ok"]
    g = ok.groupby(["task", "condition", "knowledge_level"])
    lm = outcome.tables["level_means"].set_index(["task", "condition", "knowledge_level"])
    for m in METRICS:
        exp_mean, exp_sd, exp_n = g[m].mean(), g[m].std(ddof=1), g[m].count()
        for key in lm.index:
            assert lm.loc[key, f"{m}_n"] == exp_n.get(key, 0)
            if exp_n.get(key, 0):
                assert lm.loc[key, m] == pytest.approx(exp_mean[key], rel=1e-9, abs=1e-12)
            if exp_n.get(key, 0) >= 2:
                assert lm.loc[key, f"{m}_sd"] == pytest.approx(exp_sd[key], rel=1e-9)
    failed = df[df["status"] != "ok"].groupby(["task", "condition", "knowledge_level"]).size()
    assert lm["n_failed"].sum() == 1 and lm.loc[failed.index[0], "n_failed"] == 1
    # level-marginal = unweighted mean of the level means
    mg = outcome.tables["marginal"].set_index(["task", "condition"])
    level_means = g[list(METRICS)].mean().groupby(["task", "condition"]).mean()
    for key in mg.index:
        for m in ("kg", "dc", "co", "iq"):
            assert mg.loc[key, m] == pytest.approx(level_means.loc[key, m])
    # ranks: "min" ties, CO/PO ascending, mean rank over the paper's headline metrics (KG, DC, CO, IQ)
    rk = outcome.tables["ranks"]
    marg = rk[rk["scope"] == "marginal"].set_index("condition")
    exp_ranks = pd.DataFrame({m: level_means.loc["math"][m].rank(method="min", ascending=m in LOWER_IS_BETTER) for m in RANK_METRICS})
    for cond in marg.index:
        for m in RANK_METRICS:
            assert marg.loc[cond, f"rank_{m}"] == exp_ranks.loc[cond, m]
        assert marg.loc[cond, "mean_rank"] == pytest.approx(exp_ranks.loc[cond, list(MEAN_RANK_METRICS)].mean())
    # failure modes: counts and shares per (condition, level), ok sessions only
    fm = outcome.tables["failure_modes"].set_index(["task", "condition", "knowledge_level"])
    exp_fm = g[list(FM_COLUMNS)].sum()
    for key in exp_fm.index:
        total = exp_fm.loc[key].sum()
        for f in FM_COLUMNS:
            assert fm.loc[key, f] == exp_fm.loc[key, f]
            assert fm.loc[key, f"{f}_share"] == pytest.approx(exp_fm.loc[key, f] / total)
    for name in ("level_means", "marginal", "ranks", "failure_modes"):
        assert (out / "tables" / f"{name}.parquet").is_file() and (out / "tables" / f"{name}.csv").is_file()
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config_hash"] == cfg.config_hash() and manifest["seeds"]["run_seed"] == 42
    assert manifest["invocations"][-1]["status"] == "ok_with_failed_sessions"
    assert manifest["plan"]["n_sessions"] == 24 and "ray" in manifest["invocations"][-1]["versions"]
    assert manifest["replaced_shard_fn"] == "tests.doubles.standin:run_shard"  # the report's banner names it
    # every role's settings as resolved over its defaults, the repair round's temperature included
    roles = manifest["roles"]["settings"]
    assert roles["extractor"]["repair_temperature"] == cfg.roles.settings("extractor").repair_temperature == 0.4
    assert set(roles) == {"user_sim", "assistant", "extractor", "judge"} and manifest["roles"]["warnings"] == []


def test_a_model_failure_stays_a_result_unless_rerun_is_asked_for(clean_run, tmp_path):
    """The injected failure is a model failure (an unreadable answer): the same command leaves it;
    --rerun-model-failures reruns it as a new draw (attempt 2, its own seed, the first error kept);
    after engine.max_session_attempts runs it is not rerun again."""
    cfg, out, _ = clean_run
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    before = commits(copy)
    again = run(cfg, output=copy, quiet=True, tables=False)
    assert again.ran_shards == 0 and again.skipped_shards == 6 and again.resume["kept_failed"]["model"] == 1
    assert commits(copy).keys() == before.keys()
    assert_same_rows(out, copy)

    rerun = run(cfg, output=copy, quiet=True, tables=False, rerun_model_failures=True)
    assert rerun.ran_shards == 1 and rerun.resume["rerun"] == {"infra": 0, "model": 1} and rerun.n_failed == 1
    df, first = rows(copy, "sessions"), rows(out, "sessions")
    assert df["session_id"].is_unique and len(df) == 24
    row = df.set_index("session_id").loc[FAILS[0]]
    old = first.set_index("session_id").loc[FAILS[0]]
    assert row["attempt"] == 2 and json.loads(row["previous_errors"]) == ["assistant_invalid_output"]
    assert row["failure_class"] == "model" and row["seed"] != old["seed"]  # a new draw, recorded
    others = df[df["session_id"] != FAILS[0]].reset_index(drop=True)
    pd.testing.assert_frame_equal(others, first[first["session_id"] != FAILS[0]].reset_index(drop=True))
    run(cfg, output=copy, quiet=True, tables=False, rerun_model_failures=True)  # attempt 3 = max_session_attempts
    last = run(cfg, output=copy, quiet=True, tables=False, rerun_model_failures=True)
    assert last.ran_shards == 0 and last.resume["exhausted"] == 1
    assert rows(copy, "sessions").set_index("session_id").loc[FAILS[0], "attempt"] == 3
    manifest = json.loads((copy / "manifest.json").read_text())
    assert [i["totals"]["resume"]["rerun_model_failures"] for i in manifest["invocations"]] == [False, False, True, True, True]


def test_a_run_dir_of_another_config_is_refused(clean_run):
    from ray_knowsim.run.manifest import ManifestMismatch
    from ray_knowsim.tables.reduce import open_dataset

    cfg, out, _ = clean_run
    other = parse_run_config(small_config(max_turns=4))
    with pytest.raises(ManifestMismatch, match="another config"):
        run(other, output=out, quiet=True)
    ds = open_dataset(out, "sessions")  # committed rows as a Ray Dataset
    assert ds.count() == 24 and "kg" in ds.schema().names


@pytest.mark.parametrize("retries", [2, 0])
def test_worker_killed_mid_run_then_resumed_equals_clean(clean_run, crash_file, tmp_path, retries):
    cfg, out, _ = clean_run
    killed = config(crash_file, shard_retries=retries)
    assert killed.config_hash() == cfg.config_hash()  # retries are operational, not part of the results
    crash_file.write_text("shard-000003")
    first = run(killed, output=tmp_path / "run", quiet=True, tables=False)
    assert not crash_file.exists() and crash_file.with_name(crash_file.name + ".fired").exists()  # it did die
    if retries:
        assert not first.incomplete  # Ray re-ran the shard on a new worker
    else:
        assert list(first.incomplete) == ["shard-000003"] and first.n_ok == 19
        resumed = run(killed, output=tmp_path / "run", quiet=True, tables=False)
        assert resumed.ran_shards == 1 and not resumed.incomplete  # the lost shard (the model failure stays)
    assert_same_rows(out, tmp_path / "run")


class FlakyModel:
    """The offline model behind an HTTP server, except: every request about demo_math_01 fails
    the first time (transient; the HTTP backend's retry recovers), and the user simulator of
    demo_math_03 always fails while ``broken`` is set."""

    name = "flaky"

    def __init__(self) -> None:
        from ray_knowsim.llm.offline import OfflineModel

        self.inner = OfflineModel(name="flaky")
        self.broken = True
        self.seen: dict[str, int] = {}

    async def generate(self, r):
        from ray_knowsim.schema.chat import ChatResponse

        text = "\n".join(m["content"] for m in r.messages)
        item = (r.offline_facts or {}).get("item_id")  # prompts name no item: the facts do
        key = f"{item}|{r.role}|{r.seed}|{text}"
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.broken and item == "demo_math_03" and r.role == "user_sim":
            return ChatResponse(text="", error="overloaded: try later")
        if item == "demo_math_01" and self.seen[key] == 1:
            return ChatResponse(text="", error="transient: once")
        return await self.inner.generate(r)


def test_failing_endpoint_gives_retried_then_explicitly_failed_sessions(tmp_path):
    """The real simulation loop over HTTP: transient errors are retried away; persistent ones end
    the session as failed, naming role and error; the same command later redoes only those."""
    from ray_knowsim.llm.offline.server import serve_model_in_thread

    model = FlakyModel()
    with serve_model_in_thread(model) as server:
        ep = {"backend": "http", "base_url": server.base_url, "model": "flaky", "max_attempts": 3, "offline_server": True,
              "backoff": {"initial_s": 0.01, "max_s": 0.02}, "max_in_flight_global": 8}
        data = small_config(models={"ep": ep}, engine={"shard_fn": "ray_knowsim.sim.shard:run_shard"})
        data["roles"] = {"user_sim": {"model": "ep", "attempts": 2}, "extractor": "ep", "judge": "ep", "assistant": {"model": "ep"}}
        cfg = parse_run_config(data)
        first = run(cfg, output=tmp_path, quiet=True, tables=False)
        df = rows(tmp_path, "sessions")
        failed = df[df["status"] == "failed"]
        assert first.n_failed == 6 and set(failed["item_id"]) == {"demo_math_03"}
        assert failed["error"].str.startswith("user_sim_http_500").all(), set(failed["error"])  # named, never a default
        assert failed["kg"].isna().all() and failed["iq"].isna().all()
        ok = df[df["status"] == "ok"]
        assert ok["error"].isna().all() and (ok["tokens_user_sim"] > 0).all() and ok["iq"].notna().all()
        assert (ok["turns"] == 3).all()
        # transient failures were retried: every demo_math_01 request reached the model twice
        assert all(n == 2 for k, n in model.seen.items() if "demo_math_01" in k)
        # the response cache: one folder per shard (each written by its shard's task only), and one
        # for the scoring pass (a shard whose every session failed at once stored nothing)
        folders = {p.name for p in (tmp_path / "cache").iterdir()}
        shards = {c.shard_id for c in commits(tmp_path).values()}
        answered = {c.shard_id for c in commits(tmp_path).values() if any(e.status == "ok" for e in c.sessions.values())}
        assert answered <= folders <= shards | {"score-ep"} and "score-ep" in folders
        # the endpoint heals; the same command redoes only the failed sessions
        model.broken = False
        assert set(failed["failure_class"]) == {"infra"}  # the model was never heard: rerun by default
        before = commits(tmp_path)
        second = run(cfg, output=tmp_path, quiet=True, tables=False)
        after = commits(tmp_path)
    assert second.n_failed == 0 and second.n_ok == 24
    assert second.resume["rerun"] == {"infra": 6, "model": 0}
    assert second.ran_shards == len({c.shard_id for c in before.values() if any(e.status != "ok" for e in c.sessions.values())})
    new = [c for name, c in after.items() if name not in before]
    assert sorted(sid for c in new for sid in c.sessions) == sorted(failed["session_id"])
    assert all(e.attempt == 2 and e.previous_errors[0].startswith("user_sim_http_500") for c in new for e in c.sessions.values())
    again = rows(tmp_path, "sessions")
    assert again["session_id"].is_unique and len(again) == 24
    assert (again[again["item_id"] == "demo_math_03"]["attempt"] == 2).all()
    kept = again[again["item_id"] != "demo_math_03"].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, df[df["item_id"] != "demo_math_03"].reset_index(drop=True))
