"""Shards that share a CPU run in one worker process (run/worker.execute_shards, engine.worker_shards):
each writes what it writes alone, one shard's failure leaves the others running, each keeps its
own in-flight cap, and a run's fan-out puts them in one task (one process) while its rows stay those
of a run with a process per shard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ray_knowsim.backends.model_set import ModelSet, build_models
from ray_knowsim.config import DEFAULT_SHARD_FN, parse_run_config
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.plan.build import make_context
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.run.manifest import write_manifest
from ray_knowsim.run.worker import CommitPolicy, ShardFailed, execute_shard, execute_shards
from ray_knowsim.io.commits import RunDir
from tests.doubles.counting import counting_endpoint
from tests.doubles.run_config import STANDIN, assert_same_rows, small_config

REAL = {"shard_fn": DEFAULT_SHARD_FN}


def _setup(engine: dict):
    cfg = parse_run_config(small_config(engine=engine))
    plan = Plan(cfg, load_inputs(cfg))
    ctx = make_context(cfg, "t-groups", cfg.config_hash())
    return cfg, plan, ctx


def _offline() -> ModelSet:
    return ModelSet({"sim": OfflineModel(name="sim")}, {"user_sim": "sim", "extractor": "sim"}, ["sim"])


def _ready(root: Path, ctx) -> str:
    write_manifest(RunDir(root), {"config_hash": ctx.config_hash})
    return str(root)


def test_shards_in_one_process_write_what_each_writes_alone(tmp_path):
    cfg, plan, ctx = _setup(REAL)
    eng = cfg.engine
    together = _ready(tmp_path / "together", ctx)
    jobs = [(plan.shard(k), None) for k in (0, 1, 2)]
    out = execute_shards(jobs, ctx, together, eng.shard_fn, eng.shard_fn_options, None, CommitPolicy(every=2), plan.fingerprint,
                         *(_offline() for _ in jobs))
    assert [o["shard_id"] for o in out] == [plan.shard(k).shard_id for k in (0, 1, 2)]
    assert all(o["sessions"] == 4 and o["new_failed"] == 0 for o in out)
    alone = _ready(tmp_path / "alone", ctx)
    for k in (0, 1, 2):
        execute_shard(plan.shard(k), _offline(), ctx, alone, eng.shard_fn, eng.shard_fn_options, None, None,
                      CommitPolicy(every=2), plan.fingerprint)
    assert_same_rows(Path(together), Path(alone), scores=False)


def test_a_failing_shard_does_not_end_its_neighbour(tmp_path):
    """One shard raises mid-run (its sessions reach a stand-in that crashes), the other finishes."""
    cfg, plan, ctx = _setup({"shard_fn": "tests.doubles.standin:run_shard"})
    root = _ready(tmp_path, ctx)
    out = execute_shards([(plan.shard(0), None), (plan.shard(1), None)], ctx, root, STANDIN,
                         {"raise_after": 2, "raise_in_shards": [plan.shard(1).shard_id]}, None, CommitPolicy(every=1),
                         plan.fingerprint, _offline(), _offline())
    assert out[0]["sessions"] == 4 and out[0]["new_failed"] == 0
    assert isinstance(out[1], ShardFailed) and out[1].error_type == "RuntimeError" and "crashed after 2" in out[1].line()


def test_each_shard_keeps_its_own_in_flight_cap(tmp_path):
    """max_in_flight is each shard's, as when every shard had a process of its own: two shards
    in one process, a cap of 2 each, hold 4 requests at the endpoint at once, never more."""
    with counting_endpoint(delay_s=0.3) as ep:
        data = small_config(engine=REAL)
        data["models"] = {"ep": {"backend": "http", "base_url": ep.base_url, "model": "counted", "offline_server": True,
                                 "structured_output": "json_object", "max_in_flight": 2}}
        data["roles"] = {"user_sim": "ep", "extractor": "ep", "judge": None, "assistant": {"model": "ep"}}
        cfg = parse_run_config(data)
        inputs = load_inputs(cfg)
        plan = Plan(cfg, inputs)
        ctx = make_context(cfg, "t-caps", cfg.config_hash())
        root = _ready(tmp_path, ctx)
        jobs = [(plan.shard(0), None), (plan.shard(1), None)]
        out = execute_shards(jobs, ctx, root, DEFAULT_SHARD_FN, {}, None, CommitPolicy(), plan.fingerprint,
                             *(build_models(cfg, inputs.graphs, None) for _ in jobs))
        assert [o["sessions"] for o in out] == [4, 4]
        assert ep.tally.peak_in_flight == 4


def test_model_sets_must_match_the_shards(tmp_path):
    cfg, plan, ctx = _setup({"shard_fn": STANDIN})
    with pytest.raises(ValueError, match="2 shards but 1 model sets"):
        execute_shards([(plan.shard(0), None), (plan.shard(1), None)], ctx, str(tmp_path), STANDIN, {}, None, CommitPolicy(),
                       plan.fingerprint, _offline())


@pytest.mark.parametrize("shard_cpus, given, most, expected", [
    (0.25, None, None, 4), (0.2, None, None, 5), (0.3, None, None, 3), (0.5, None, None, 2), (1.0, None, None, 1),
    (2.0, None, None, 1), (0.25, 1, None, 1), (1.0, 3, None, 3), (0.25, None, 3, 3), (0.2, 2, 8, 2),
])
def test_how_many_shards_a_worker_runs(shard_cpus, given, most, expected):
    """As many as share a CPU, or as set; never more than may run at once."""
    engine = {"shard_cpus": shard_cpus, "shards_per_worker": given, "max_concurrent_shards": most}
    assert parse_run_config(small_config(engine=engine)).engine.worker_shards() == expected


def _journal_pids(run_dir: Path) -> dict[str, int]:
    """The process each shard's spend journal was written by (its header line)."""
    out = {}
    for path in (run_dir / "spend").glob("shard-*.jsonl"):
        header = json.loads(path.read_text().splitlines()[0])
        out[header["unit"]] = header["pid"]
    return out


def test_a_run_puts_the_shards_sharing_a_cpu_in_one_process(tmp_path, ray_local):
    from ray_knowsim.run.fan_out import run

    grouped = parse_run_config(small_config(engine={**REAL, "shard_cpus": 0.5}))
    apart = parse_run_config(small_config(engine={**REAL, "shard_cpus": 0.5, "shards_per_worker": 1}))
    assert grouped.config_hash() == apart.config_hash()  # how shards share processes changes no result
    a = run(grouped, output=tmp_path / "grouped", quiet=True, tables=False)
    b = run(apart, output=tmp_path / "apart", quiet=True, tables=False)
    assert a.n_ok == b.n_ok == 24 and not a.incomplete and not b.incomplete
    assert_same_rows(tmp_path / "grouped", tmp_path / "apart", scores=False)
    pids = _journal_pids(tmp_path / "grouped")
    assert len(pids) == 6
    for k in range(0, 6, 2):  # shards 0+1, 2+3, 4+5: each pair in one task, one process
        assert pids[f"shard-{k:06d}"] == pids[f"shard-{k + 1:06d}"]
    assert len(_journal_pids(tmp_path / "apart")) == 6
