"""Adding a backend from outside the package, following docs/extending.md, and running with it."""

from __future__ import annotations

import json

import pytest

from ray_knowsim.config import ConfigError, parse_run_config
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.run.fan_out import run
from tests.doubles.run_config import small_config

PLUGIN = "tests.plugins.tagged_backend"


def tagged_config(**entry):
    return small_config(
        plugins=[PLUGIN],
        models={"sim": {"backend": "offline"}, "tag": {"backend": "tagged", "prefix": "[tagged] ", **entry}},
        roles={"user_sim": "sim", "extractor": "sim", "judge": "sim", "assistant": {"model": "tag"}},
        conditions=[{"strategy": "adaptive"}],
        levels=["novice"],
        max_turns=2,
        engine={"shard_size": 4, "shard_fn": "ray_knowsim.sim.shard:run_shard"},
    )


def test_the_plugin_entry_is_validated_like_a_builtin():
    with pytest.raises(ConfigError) as err:
        parse_run_config(tagged_config(prefx="x"))
    assert "models.tag.prefx: unknown key" in str(err.value)
    # an operational field stays out of the config hash, as the backend declared
    assert parse_run_config(tagged_config(delay_s=1.0)).config_hash() == parse_run_config(tagged_config()).config_hash()


@pytest.mark.usefixtures("ray_local")
def test_a_run_with_a_backend_registered_outside_the_package(tmp_path):
    cfg = parse_run_config(tagged_config())
    outcome = run(cfg, output=tmp_path, quiet=True, tables=False)
    assert outcome.n_failed == 0 and outcome.n_ok == 4
    turns = RunReader.open(tmp_path).turns.read().to_pylist()
    assert turns and all(t["assistant_message"].startswith("[tagged] ") for t in turns)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["backends"] == {"user_sim": "offline", "extractor": "offline", "judge": "offline", "assistant:tag": "tagged"}
    assert manifest["test_doubles"] == ["extractor", "judge", "user_sim"]
