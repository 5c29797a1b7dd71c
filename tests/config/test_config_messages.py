"""The messages a person trips on when writing a run config: a misspelt key or model-entry name
gets the nearest known one (never pydantic's "Unable to extract tag using discriminator"), YAML
errors name the file (or the ``--set`` key) instead of ``<unicode string>``, an empty API-key
variable is told from an unset one, the dry run warns of what the real run will refuse, and a
``ray job submit`` driver says the check ran on the cluster."""

from __future__ import annotations

import pytest

from ray_knowsim.cli.main import main as cli
from ray_knowsim.backends.model_set import check_secrets, where_secrets_were_checked
from ray_knowsim.config import ConfigError, load_run_config, parse_run_config
from tests.doubles.run_config import small_config, write_config

HTTP = {"backend": "http", "base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": "H29B_TEST_KEY"}


def errors_of(data) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        parse_run_config(data, check_files=False)
    return exc.value.errors


def test_unknown_keys_get_the_nearest_known_key_at_every_depth():
    data = small_config()
    data["max_turn"] = 3
    data["tasks"][0]["limt"] = 2
    data["engine"]["shard_siz"] = 3
    data["roles"]["extractor"] = {"model": "sim", "temperatur": 0}
    data["models"]["gpt"] = {**HTTP, "base_ur": "x"}
    data["conditions"][0]["strategi"] = "minimal"
    data["zzzz"] = 1
    errs = errors_of(data)
    for expected in ("max_turn: unknown key (did you mean 'max_turns'?)", "tasks.0.limt: unknown key (did you mean 'limit'?)",
                     "engine.shard_siz: unknown key (did you mean 'shard_size'?)",
                     "roles.extractor.temperatur: unknown key (did you mean 'temperature'?)",
                     "models.gpt.base_ur: unknown key (did you mean 'base_url'?)",
                     "conditions.0.strategi: unknown key (did you mean 'strategy'?)", "zzzz: unknown key"):
        assert expected in errs, errs


def test_set_on_a_misspelt_model_entry_names_the_entry_it_meant(tmp_path, capsys):
    path = write_config(tmp_path, small_config(models={"tutor": {**HTTP}, "sim": {"backend": "offline"}},
                                               roles={"user_sim": "sim", "extractor": "sim", "judge": "sim",
                                                      "assistant": {"model": "tutor"}}))
    with pytest.raises(ConfigError) as exc:
        load_run_config(path, check_files=False, overrides=["models.tutr.base_url=http://h:8000/v1"])
    text = str(exc.value)
    assert "models.tutr: there is no model entry 'tutr' (did you mean models.tutor?)" in text, text
    assert "discriminator" not in text
    assert cli(["validate-config", str(path), "--set", "models.tutr.base_url=http://h:8000/v1"]) == 2
    assert "did you mean models.tutor?" in capsys.readouterr().err


def test_an_unknown_backend_gets_the_nearest_one():
    data = small_config()
    data["models"]["gpt"] = {**HTTP, "backend": "htp"}
    errs = errors_of(data)
    assert any(e.startswith("models.gpt: backend 'htp' is not a registered backend (did you mean 'http'?)") for e in errs), errs


def test_yaml_errors_name_the_file_and_the_set_key(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: x\n  levels: [\n")
    with pytest.raises(ConfigError) as exc:
        load_run_config(bad)
    assert f'in "{bad}", line 2' in str(exc.value) and "<unicode string>" not in str(exc.value)
    good = write_config(tmp_path, small_config())
    with pytest.raises(ConfigError) as exc:
        load_run_config(good, overrides=["levels=[novice"])
    assert 'in "--set levels"' in str(exc.value) and "<unicode string>" not in str(exc.value)


def _http_config():
    return parse_run_config(small_config(models={"sim": {**HTTP}}), check_files=False)


def test_an_empty_key_variable_is_reported_as_empty_not_unset(monkeypatch):
    cfg = _http_config()
    monkeypatch.delenv("H29B_TEST_KEY", raising=False)
    assert check_secrets(cfg) == ["models.sim: environment variable H29B_TEST_KEY is not set"]
    monkeypatch.setenv("H29B_TEST_KEY", "  ")
    assert check_secrets(cfg) == ["models.sim: environment variable H29B_TEST_KEY is set but empty"]
    monkeypatch.setenv("H29B_TEST_KEY", "sk-x")
    assert check_secrets(cfg) == []


def test_the_check_says_it_ran_on_the_cluster_for_a_job_driver(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    assert where_secrets_were_checked().startswith("checked in this shell's environment")
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}")  # what Ray's job manager sets for a job's driver
    said = where_secrets_were_checked()
    assert said.startswith("checked on the cluster") and "not in the shell that submitted it" in said


def test_the_dry_run_warns_that_the_run_will_refuse_a_missing_key(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("H29B_TEST_KEY", raising=False)
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    path = write_config(tmp_path, small_config(models={"sim": {**HTTP}}))
    assert cli(["run", str(path), "--dry-run", "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "the run itself will refuse to start" in err and "H29B_TEST_KEY is not set" in err, err
    monkeypatch.setenv("H29B_TEST_KEY", "sk-x")
    assert cli(["run", str(path), "--dry-run", "-o", str(tmp_path / "out")]) == 0
    assert "refuse" not in capsys.readouterr().err
