"""Placement of self-hosted models before anything starts: fractional GPUs, tensor parallelism,
errors with numbers, condition groups when the models do not all fit; the plan cut by group; the
paper's benchmark with nine open-weight assistants planned on a declared 8-GPU node (fake GPUs,
no engine started); secrets of a vLLM entry never in the run directory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ray_knowsim.config import parse_run_config
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.backends.vllm.config import VLLMModelConfig
from ray_knowsim.backends.vllm.placement import Node, PlacementError, fit, nodes_from_ray, plan_placement
from tests.doubles.run_config import small_config

REPO = Path(__file__).resolve().parents[2]


def M(g: float, **kw) -> VLLMModelConfig:
    return VLLMModelConfig(model="m", num_gpus=g, **kw)


def test_fractional_models_share_a_gpu_and_tp_takes_whole_gpus_on_one_node():
    node = [Node("n0", 2, 8)]
    slots = fit({"a": M(0.5), "b": M(0.5), "c": M(1)}, node)
    assert slots is not None
    where = {s.model: s.gpus for s in slots}
    assert where["a"] == where["b"] and where["c"] != where["a"]  # the two halves share one GPU
    assert fit({"a": M(0.5), "b": M(0.6), "c": M(1)}, node) is None  # 0.5 + 0.6 > 1
    assert fit({"t": M(2)}, [Node("n0", 1, 8), Node("n1", 1, 8)]) is None  # tp 2 needs one node...
    assert fit({"t": M(2, multi_node=True)}, [Node("n0", 1, 8), Node("n1", 1, 8)]) is not None  # ...unless multi_node
    assert fit({"x": M(0, num_cpus=3)}, [Node("n0", 0, 2)]) is None  # CPUs count too
    assert fit({"r": M(1, replicas=3)}, node) is None


def test_one_group_when_everything_fits_and_errors_name_the_model():
    models = {"sim": M(1), "a": M(0.5), "b": M(0.5)}
    p = plan_placement(models, ["sim"], [("ca", "a"), ("cb", "b"), ("cx", "http_model")], [Node("n0", 2, 8)])
    assert not p.grouped and p.condition_groups() == [["ca", "cb", "cx"]]
    with pytest.raises(PlacementError, match="model big .* does not fit"):
        plan_placement({"big": M(4)}, [], [("c", "big")], [Node("n0", 2, 8)])
    with pytest.raises(PlacementError, match="role models"):
        plan_placement({"s": M(1), "j": M(1)}, ["s", "j"], [("c", "x")], [Node("n0", 1, 8)])
    assert nodes_from_ray([{"Alive": True, "NodeID": "abc", "NodeManagerAddress": "10.0.0.1", "Resources": {"GPU": 8.0, "CPU": 32.0}},
                           {"Alive": False, "Resources": {"GPU": 8.0}}])[0].gpus == 8


def test_groups_when_the_assistants_do_not_fit_together():
    models = {"sim": M(1), "a": M(1), "b": M(1), "c": M(0.5), "d": M(0.5)}
    conds = [("ca", "a"), ("cc", "c"), ("cb", "b"), ("ca2", "a"), ("cd", "d")]
    p = plan_placement(models, ["sim"], conds, [Node("n0", 2, 8)])
    assert p.grouped
    # conditions of one assistant stay together; every group = the role models + its assistants
    assert p.condition_groups() == [["ca", "ca2"], ["cc", "cd"], ["cb"]]
    assert [g.models for g in p.groups] == [["sim", "a"], ["sim", "c", "d"], ["sim", "b"]]
    assert "3 groups" in p.render()


def test_plan_cuts_shards_by_condition_group():
    cfg = parse_run_config(small_config(conditions=[{"strategy": "adaptive"}, {"strategy": "socratic"}, {"strategy": "minimal"}],
                                        engine={"shard_size": 5}))
    inputs = load_inputs(cfg)
    flat = Plan(cfg, inputs)
    names = [c.name for c in flat.conditions]
    grouped = Plan(cfg, inputs, [[names[1]], [names[0], names[2]]])
    assert grouped.n_sessions == flat.n_sessions == 36
    assert sorted(s.session_id for s in grouped.iter_sessions()) == sorted(s.session_id for s in flat.iter_sessions())
    seen = []
    for k in range(grouped.n_shards):
        conds = {grouped.session(i).condition for i in grouped.shard_range(k)}
        g = grouped.shard_group(k)
        assert conds <= set(grouped.condition_groups[g])  # a shard never spans two groups
        seen += list(grouped.shard_range(k))
    assert seen == list(range(36))
    assert [grouped.shard_group(k) for k in range(grouped.n_shards)] == [0, 0, 0, 1, 1, 1, 1, 1]
    # the default plan is unchanged by the refactor
    assert flat.n_shards == 8 and flat.session_id(0).endswith("adaptive/0")
    with pytest.raises(ValueError):
        Plan(cfg, inputs, [[names[0]], [names[1]]])


@pytest.fixture(scope="module")
def ray_8_gpus():
    """A local Ray node that declares an 8-GPU, 32-CPU machine it is not: placement only, no engine."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=32, num_gpus=8, object_store_memory=256 * 2**20, include_dashboard=False,
             logging_level="WARNING", log_to_driver=False)
    yield ray
    ray.shutdown()


def test_paper_benchmark_vllm_is_planned_on_8_gpus_without_starting_engines(ray_8_gpus, shared_ref, monkeypatch, capsys):
    from ray_knowsim.cli.main import main as cli_main
    from ray_knowsim.config import load_run_config
    from ray_knowsim.plan.build import place_models as _placement
    from ray_knowsim.run.fan_out import plan_only

    monkeypatch.setenv("KNOWSIM_REF", str(shared_ref))
    monkeypatch.setenv("HF_TOKEN", "hf_plan_test_token")
    path = REPO / "configs" / "paper_benchmark_vllm.yaml"
    cfg = load_run_config(path)
    assistants = {c.assistant for c in cfg.conditions}
    assert len(assistants) == 9 and all(cfg.models[a].backend == "vllm" for a in assistants)
    vplan = _placement(cfg)
    assert vplan.grouped and sorted(c for g in vplan.condition_groups() for c in g) == sorted(cfg.condition_name(c) for c in cfg.conditions)
    role_slots = None
    for g in vplan.groups:  # each group fits on the 8 GPUs, with the simulator and the judge in it
        assert {"simulator", "judge"} <= set(g.models)
        mine = sorted((s.model, s.gpus) for s in g.slots if s.model in ("simulator", "judge"))
        assert role_slots in (None, mine)  # the role models keep their GPUs from group to group
        role_slots = mine
        used: dict[int, float] = {}
        for s in g.slots:
            for gpu in s.gpus:
                used[gpu] = used.get(gpu, 0) + s.share
        assert max(used.values()) <= 1 + 1e-9 and set(used) <= set(range(8))
    text = plan_only(cfg)
    assert "groups" in text and "gemma27b" in text and "shards" in text
    assert cli_main(["run", str(path), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "group 0" in out and "cluster:" in out and "hf_plan_test_token" not in out
    # nothing was started
    actors = [a for a in ray_8_gpus.util.list_named_actors(all_namespaces=True) if str(a).find("vllm-") >= 0]
    assert actors == []
    assert ray_8_gpus.available_resources().get("GPU") == 8


@pytest.fixture(scope="module")
def self_hosted_run(ray_8_gpus, tmp_path_factory):
    """A real run (fake engines) with a vLLM assistant whose entry holds secrets (env, engine args,
    secret_env), settings named like secrets (max_num_batched_tokens, tokenizer, HF_HOME) and a
    price with a cached-input rate: (config, run dir, what the engine actor received)."""
    import ray.cloudpickle

    from ray_knowsim.run import fan_out
    from ray_knowsim.backends.vllm import pool as pool_mod
    from tests.doubles.vllm_fakes import RECORD_ENV, THIS_MODULE, FakeEngineActor

    tmp = tmp_path_factory.mktemp("self_hosted")
    received = tmp / "received.json"  # outside the run directory: it holds the secrets the engine got
    mp = pytest.MonkeyPatch()
    mp.setenv("KNOWSIM_TEST_HUB_TOKEN", "hf_DRIVER_SECRET_9a8b")
    data = small_config(
        models={"sim": {"backend": "offline"},
                "tutor": {"backend": "vllm", "model": "/fake/tutor", "num_cpus": 0,
                          "env": {"HF_TOKEN": "hf_ENV_SECRET_1c2d", "VLLM_CPU_KVCACHE_SPACE": "1",
                                  "HF_HOME": str(tmp / "hf-home"), RECORD_ENV: str(received)},
                          "engine_kwargs": {"hf_token": "hf_KWARG_SECRET_3e4f", "max_num_batched_tokens": 8192,
                                            "tokenizer": str(tmp / "tokenizer")},
                          "secret_env": ["KNOWSIM_TEST_HUB_TOKEN"],
                          "price": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}},
        conditions=[{"strategy": "adaptive", "assistant": "tutor"}],
        engine={"shard_fn": "ray_knowsim.sim.shard:run_shard"}, max_turns=2,  # the real loop: the engine answers
    )
    cfg = parse_run_config(data)
    ray.cloudpickle.register_pickle_by_value(THIS_MODULE)
    mp.setattr(pool_mod.VLLMPool, "actor_class", FakeEngineActor)
    try:
        out = fan_out.run(cfg, output=tmp / "run", quiet=True, tables=False)
    finally:
        ray.cloudpickle.unregister_pickle_by_value(THIS_MODULE)
        mp.undo()
    assert out.n_sessions == 12
    yield cfg, tmp / "run", json.loads(received.read_text(encoding="utf-8")), tmp


def test_a_self_hosted_model_gets_exactly_its_settings_and_no_secret_reaches_the_run_directory(self_hosted_run):
    import ray

    _, run_dir, received, tmp = self_hosted_run
    args, env = received["engine_args"], received["env"]
    # what the engine is started with: every value as the entry states it, secrets included
    assert args["max_num_batched_tokens"] == 8192 and args["tokenizer"] == str(tmp / "tokenizer")
    assert args["hf_token"] == "hf_KWARG_SECRET_3e4f"
    assert env["HF_HOME"] == str(tmp / "hf-home") and env["HF_TOKEN"] == "hf_ENV_SECRET_1c2d"
    assert env["KNOWSIM_TEST_HUB_TOKEN"] == "hf_DRIVER_SECRET_9a8b"
    # what is written down: names, never a secret's value; settings as they are
    blobs = b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file())
    for secret in (b"hf_ENV_SECRET_1c2d", b"hf_KWARG_SECRET_3e4f", b"hf_DRIVER_SECRET_9a8b"):
        assert secret not in blobs
    manifest = (run_dir / "manifest.json").read_text()
    assert "HF_TOKEN" in manifest and "KNOWSIM_TEST_HUB_TOKEN" in manifest and "<redacted>" in manifest
    assert '"max_num_batched_tokens": 8192' in manifest and str(tmp / "tokenizer") in manifest
    # every pool was shut down at the end of the run
    assert [a for a in ray.util.list_named_actors(all_namespaces=True) if "vllm-" in str(a)] == []


def test_cached_prompt_tokens_of_a_self_hosted_model_reach_rows_costs_and_estimates(self_hosted_run, tmp_path):
    from ray_knowsim.preflight.estimate import dry_run
    from ray_knowsim.tables.cost import cost_tables
    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.schema.price import Price

    cfg, run_dir, _, _ = self_hosted_run
    sessions = RunReader.open(run_dir).sessions
    rows = sessions.read().to_pylist()
    cached = sum(r["cached_prompt_tokens_assistant"] for r in rows)
    prompt = sum(r["prompt_tokens_assistant"] for r in rows)
    assert 0 < cached < prompt  # the engine's prefix cache, as it reported it
    assert all(r["cached_prompt_tokens_user_sim"] == 0 for r in rows)  # the offline model has no cache
    price = Price(input=2.0, cached_input=0.5, output=8.0)
    for r in rows:  # the cached-input rate applies (the offline roles are free)
        want = price.cost(r["prompt_tokens_assistant"], r["completion_tokens_assistant"], r["cached_prompt_tokens_assistant"])
        assert r["cost_usd"] == pytest.approx(want)
    total = cost_tables(sessions)["cost"].set_index(["task", "condition"]).loc[("all", "all")]
    assert total["cached_prompt_tokens_assistant"] == cached and total["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows))
    # run --dry-run --from-run: the measured cached share prices the estimate
    est, _ = dry_run(cfg, tmp_path / "estimate", from_run=run_dir)
    a = est.per_role["assistant"]
    assert a.cached_prompt_tokens == pytest.approx(a.prompt_tokens * cached / prompt, abs=len(rows))
    assert a.cost_usd == pytest.approx(price.cost(a.prompt_tokens, a.completion_tokens, a.cached_prompt_tokens), rel=1e-6)
    assert a.cost_usd < price.cost(a.prompt_tokens, a.completion_tokens, 0)


def test_tensor_parallel_and_fractional_pools_reserve_and_release_gpus(ray_8_gpus):
    """Placement groups for tp 2 (one CPU bundle for the actor + one GPU bundle per worker) and
    half-GPU replicas, with the fake engine: GPUs are reserved while up and all back after shutdown."""
    import ray.cloudpickle

    from ray_knowsim.backends.vllm.pool import VLLMPool
    from tests.doubles.vllm_fakes import THIS_MODULE, FakeEngineActor

    ray = ray_8_gpus
    ray.cloudpickle.register_pickle_by_value(THIS_MODULE)
    pools = [VLLMPool(VLLMModelConfig(model="/fake/tp2", num_gpus=2, replicas=2, num_cpus=0)),
             VLLMPool(VLLMModelConfig(model="/fake/half", num_gpus=0.5, replicas=2, num_cpus=0))]
    try:
        for p in pools:
            p.actor_class = FakeEngineActor
            p.start()
        for p in pools:
            assert len(p.wait_ready(120)) == 2
        assert len(pools[0]._pgs) == 2 and pools[1]._pgs == []
        deadline = time.monotonic() + 30
        while ray.available_resources().get("GPU", 0) != 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ray.available_resources().get("GPU", 0) == 3  # 8 - 2 x 2 (tp) - 2 x 0.5
    finally:
        for p in pools:
            p.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(THIS_MODULE)
    deadline = time.monotonic() + 30
    while ray.available_resources().get("GPU", 0) != 8 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("GPU", 0) == 8
