"""The default shard function is imported (``ray_knowsim.sim.shard.run_shard`` itself, never
looked up by its string), the config's string is only an override loaded by name, and a config
that leaves the default keeps its hashed value (a resume of an existing run still matches)."""

from __future__ import annotations

import pytest

import ray_knowsim.run.worker as worker
from ray_knowsim.config import DEFAULT_SHARD_FN, parse_run_config
from ray_knowsim.registry import load_object
from ray_knowsim.sim.shard import run_shard
from tests.doubles.standin import run_shard as standin_run_shard
from tests.doubles.run_config import STANDIN, small_config


def _no_lookup_by_name(path):
    raise AssertionError(f"the default shard function was looked up by name: {path!r}")


def test_the_default_is_the_imported_run_shard_not_a_lookup(monkeypatch):
    monkeypatch.setattr(worker, "load_object", _no_lookup_by_name)
    assert worker.load_shard_fn() is run_shard
    assert worker.load_shard_fn(DEFAULT_SHARD_FN) is run_shard


def test_the_default_string_names_the_same_function():
    """A config written with the string spelled out (every existing run's config.yaml) means the
    imported function, not another copy."""
    assert load_object(DEFAULT_SHARD_FN) is run_shard


def test_an_override_is_loaded_by_name_with_its_options():
    assert worker.load_shard_fn(STANDIN) is standin_run_shard
    fn = worker.load_shard_fn(STANDIN, {"fail_sessions": ["x"]})
    assert fn.func is standin_run_shard and fn.keywords == {"fail_sessions": ["x"]}


@pytest.mark.parametrize("bad", ["tests.doubles.standin:no_such_fn", "no_such_package.mod:run_shard"])
def test_a_bad_override_names_what_it_could_not_load(bad):
    with pytest.raises(ImportError, match="cannot load the shard function") as err:
        worker.load_shard_fn(bad)
    assert bad in str(err.value)


def test_leaving_the_default_keeps_the_hashed_and_written_value():
    data = small_config()
    data["engine"] = {k: v for k, v in data["engine"].items() if k != "shard_fn"}
    left = parse_run_config(data)
    spelled = parse_run_config(small_config(engine={"shard_fn": "ray_knowsim.sim.shard:run_shard"}))
    assert left.engine.shard_fn == "ray_knowsim.sim.shard:run_shard"  # the literal every existing run hashed
    assert left.hash_payload()["engine"]["shard_fn"] == "ray_knowsim.sim.shard:run_shard"
    assert left.config_hash() == spelled.config_hash()
    assert left.config_hash() != parse_run_config(small_config()).config_hash()  # an override is hashed
