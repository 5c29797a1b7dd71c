"""Run-config validation: unknown keys with their path, rules checked before any work, paths."""

from __future__ import annotations

import warnings

import pytest

from ray_knowsim.cli.main import main as cli
from ray_knowsim.config import ConfigError, load_run_config, parse_run_config
from tests.doubles.run_config import small_config, write_config


def errors_of(data, **kw) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        parse_run_config(data, **kw)
    return exc.value.errors


def test_unknown_keys_are_errors_with_their_path():
    data = small_config()
    data["tasks"][0]["itemz"] = "x"
    data["models"]["gpt"] = {"backend": "http", "base_url": "http://127.0.0.1:1/v1", "model": "m", "timeout": 3}
    data["engine"]["shard_sise"] = 3
    data["roles"]["extractor"] = {"model": "sim", "temp": 0}
    data["extra"] = 1
    errs = errors_of(data, check_files=False)
    for expected in ("tasks.0.itemz: unknown key", "models.gpt.timeout: unknown key",
                     "engine.shard_sise: unknown key", "roles.extractor.temp: unknown key", "extra: unknown key"):
        assert any(e.startswith(expected) for e in errs), errs


def test_bad_rule_override_is_named():
    errs = errors_of(small_config(rules={"preset": "reference", "overrides": {"hinge_ratio": -1, "hinge_ratoi": 1}}),
                     check_files=False)
    assert any(e.startswith("rules.overrides.hinge_ratio:") for e in errs), errs
    assert "rules.overrides.hinge_ratoi: unknown key" in errs
    assert any("unknown rule preset" in e for e in errors_of(small_config(rules={"preset": "nope"}), check_files=False))


def test_cross_references_and_names():
    data = small_config(conditions=[{"assistant": "gpt"}, {"strategy": "adaptive"}, {"strategy": "adaptive"}])
    errs = errors_of(data, check_files=False)
    assert any(e.startswith("conditions.0.assistant: unknown model 'gpt'") for e in errs), errs
    assert any(e.startswith("conditions.2: name 'sim:adaptive' repeats condition 1") for e in errs), errs
    cfg = parse_run_config(small_config(conditions=[{"strategy": "adaptive"}, {"simulator": "zero-shot-cot"}]), check_files=False)
    assert cfg.condition_names() == ["sim:adaptive", "baseline:zero-shot-cot"]


def test_paths_relative_to_the_config_file_and_env(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "items.jsonl").write_text("{}\n")
    data = small_config(tasks=[{"name": "math", "items": "data/items.jsonl", "graphs": "${RK_TEST_DIR}/g.json"}])
    monkeypatch.delenv("RK_TEST_DIR", raising=False)
    path = write_config(tmp_path / "cfgs", data)
    with pytest.raises(ConfigError) as exc:
        load_run_config(path)
    text = "\n".join(exc.value.errors)
    assert f"tasks.0.items: file not found: {tmp_path / 'cfgs' / 'data' / 'items.jsonl'}" in text
    assert "environment variable RK_TEST_DIR" in text
    monkeypatch.setenv("RK_TEST_DIR", str(tmp_path / "data"))
    data["tasks"][0]["items"] = "../data/items.jsonl"
    (tmp_path / "data" / "g.json").write_text("{}")
    cfg = load_run_config(write_config(tmp_path / "cfgs", data))
    assert cfg.resolve(cfg.tasks[0].graphs) == tmp_path / "data" / "g.json"
    assert cfg.output_path() == tmp_path / "cfgs" / "runs" / "t"


def test_config_hash_ignores_operational_settings(tmp_path):
    base = parse_run_config(small_config(), check_files=True)
    faster = parse_run_config(small_config(engine={"shard_cpus": 0.5, "max_concurrent_shards": 3}, output_dir="elsewhere"))
    other = parse_run_config(small_config(max_turns=4))
    assert base.config_hash() == faster.config_hash() != other.config_hash()


def test_role_settings_resolve_over_one_set_of_defaults_and_the_repair_temperature_is_a_setting():
    from ray_knowsim.schema.roles import ROLE_DEFAULTS

    cfg = parse_run_config(small_config())
    for role, d in ROLE_DEFAULTS.items():
        s = cfg.roles.settings(role)
        assert (s.temperature, s.max_tokens, s.attempts) == (d.temperature, d.max_tokens, d.attempts), role
    assert cfg.roles.settings("extractor").repair_temperature == 0.4  # spec §12.5: a little warmer
    assert cfg.roles.settings("user_sim").repair_temperature == 0.7  # the others: their own temperature
    warmer = parse_run_config(small_config(roles={"user_sim": "sim", "judge": "sim",
                                                  "extractor": {"model": "sim", "repair_temperature": 0.9}}))
    assert warmer.roles.settings("extractor").repair_temperature == 0.9
    assert warmer.config_hash() != cfg.config_hash()  # it changes answers
    # left unset, the new settings keep the hashes runs were made with (attempts used to default to 3)
    explicit = parse_run_config(small_config(roles={"user_sim": {"model": "sim", "attempts": 3}, "extractor": "sim", "judge": "sim"}))
    assert explicit.config_hash() == cfg.config_hash()


def test_a_first_try_that_already_asks_for_the_cap_is_flagged_when_the_config_is_read():
    from ray_knowsim.plan.sessions import largest_graph, load_inputs
    from ray_knowsim.schema.roles import RoleBudgetWarning, extractor_budget

    cfg = parse_run_config(small_config())
    with warnings.catch_warnings():
        warnings.simplefilter("error", RoleBudgetWarning)
        n = largest_graph(load_inputs(cfg).graphs)  # the defaults leave every role its truncation retry
    cap = extractor_budget(n)  # 512 + 256 per IU of the largest demo graph
    tight = parse_run_config(small_config(roles={"user_sim": {"model": "sim", "max_tokens": 200}, "judge": "sim",
                                                 "extractor": {"model": "sim", "max_tokens": cap}}))
    with pytest.warns(RoleBudgetWarning) as caught:
        load_inputs(tight)
    text = sorted(str(w.message) for w in caught)
    assert text[0].startswith(f"roles.extractor.max_tokens {cap:,}: the first try for a {n}-IU graph asks for {cap:,} tokens")
    assert f"at least {2 * cap:,}" in text[0]
    assert text[1].startswith("roles.user_sim.max_tokens 200: the first try asks for 200 tokens, which is the cap")
    assert sorted(tight.budget_warnings(n)) == text
    roomy = parse_run_config(small_config(roles={"user_sim": "sim", "judge": "sim", "extractor": {"model": "sim", "max_tokens": cap + 1}}))
    assert roomy.budget_warnings(n) == []
    no_retry = parse_run_config(small_config(roles={"user_sim": "sim", "judge": "sim",
                                                    "extractor": {"model": "sim", "max_tokens": cap, "attempts": 1}}))
    assert no_retry.budget_warnings(n) == []  # one attempt: no retry to lose


def test_cli_rejects_bad_rules_before_any_work(tmp_path, capsys):
    path = write_config(tmp_path, small_config(rules={"overrides": {"dropoff_softening": 0}}, output_dir=str(tmp_path / "out")))
    assert cli(["run", str(path), "--quiet"]) == 2
    assert "rules.overrides.dropoff_softening" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing started, nothing written
    assert cli(["validate-config", str(path)]) == 2


def test_validate_config_prints_the_resolved_config(tmp_path, capsys):
    path = write_config(tmp_path, small_config())
    assert cli(["validate-config", str(path), "--set", "trials=2"]) == 0
    out = capsys.readouterr().out
    assert "trials: 2" in out and "n_sessions: 48" in out and "config_hash:" in out
    assert cli(["validate-config", str(path), "--set", "tasks.3.limit=1"]) == 2


RUN_CONFIGS = ("demo.yaml", "adaptive_demo.yaml", "paper_benchmark.yaml", "strategy_arm_math.yaml",
               "strategy_arm_expertqa.yaml", "model_arm_math.yaml", "model_arm_expertqa.yaml", "paper_benchmark_vllm.yaml")


def test_shipped_run_configs_validate(monkeypatch):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "configs"
    monkeypatch.setenv("KNOWSIM_REF", str(root))  # the paper configs read their data from $KNOWSIM_REF
    for name in RUN_CONFIGS:
        load_run_config(root / name, check_files=False)  # schema, references and rules
    load_run_config(root / "demo.yaml")  # the demo's data ships with the package
    assert load_run_config(root / "adaptive_demo.yaml").adaptive is not None  # so does the practice set


def test_a_path_given_with_set_is_the_shells_and_one_in_the_file_the_files(tmp_path, monkeypatch):
    """`--set tasks.0.items=mine.jsonl` names the file beside the user, not beside the config."""
    from ray_knowsim.config import load_run_config

    folder, shell = tmp_path / "configs", tmp_path / "work"
    folder.mkdir()
    shell.mkdir()
    (folder / "run.yaml").write_text(
        "name: t\ntasks: [{name: math, items: items.jsonl, graphs: pkg:demo/iu_math.json}]\n"
        "models: {m: {backend: offline}}\nroles: {user_sim: m, extractor: m, assistant: {model: m}}\n"
        "conditions: [{strategy: minimal}]\n")
    monkeypatch.chdir(shell)
    cfg = load_run_config(folder / "run.yaml", check_files=False)
    assert cfg.resolve(cfg.tasks[0].items) == folder / "items.jsonl"  # the file's own: beside it
    cfg = load_run_config(folder / "run.yaml", check_files=False,
                          overrides=["tasks.0.items=mine.jsonl", "tasks.0.graphs=pkg:demo/iu_math.json"])
    assert cfg.resolve(cfg.tasks[0].items) == shell / "mine.jsonl"  # the shell's: beside the user
    assert cfg.tasks[0].graphs == "pkg:demo/iu_math.json"
