"""Strategies and simulators come from registries: built-ins, aliases, and plugins from outside."""

from __future__ import annotations

import importlib
import json

import pytest

from ray_knowsim.demo import demo_items
from ray_knowsim.config import parse_run_config
from ray_knowsim.prompts.render import render_assistant
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS, PROMPT_SETS
from ray_knowsim.registry import RegistryError
from ray_knowsim.simulators import SIMULATORS
from ray_knowsim.strategies import STRATEGIES

from tests.doubles.sim_shard import context, offline_models, run, session, shard_of


def test_builtins_are_registered_with_their_templates():
    assert {"simple", "minimal", "socratic", "adaptive", "comprehensive"} <= set(STRATEGIES.names())
    assert STRATEGIES.get("minimal") is STRATEGIES.get("simple")
    assert STRATEGIES.get("minimal").template_for("v1").prompt_version == "assistant_minimal@v1"
    assert STRATEGIES.get("simple").template_for("v2").prompt_version == "assistant_simple@v2"
    assert {"structured", "zero-shot", "zero-shot-cot", "zero-shot-cot-user-profile"} <= set(SIMULATORS.names())
    assert SIMULATORS.get("structured").structured and not SIMULATORS.get("zero-shot").structured
    with pytest.raises(RegistryError, match="registered"):
        STRATEGIES.get("lecture")


def test_a_strategy_and_a_simulator_from_outside_the_package_run_offline():
    importlib.import_module("tests.plugins.checklist_strategy")
    importlib.import_module("tests.plugins.echo_simulator")
    item = demo_items("math")[0]
    req = render_assistant(item, STRATEGIES.get("checklist"), [["user", "Help?"]])
    assert "short checklists" in req.messages[0]["content"] and req.prompt_version == "assistant_checklist@v1"
    specs = [session(item, "novice", "checklist"), session(item, "novice", "checklist", "plain-cot")]
    ctx = context(max_turns=2)
    results = run(shard_of(specs), offline_models(), ctx)
    assert [r.session.status for r in results] == ["ok", "ok"], [r.session.error for r in results]
    structured = results[0]
    assert structured.turns[0].assistant_message.startswith("Check these next:")
    assert structured.session.kg is not None  # the structured learner kept a state
    assert results[1].session.kg is None and results[1].session.simulator == "plain-cot"


def test_configs_accept_only_registered_names_and_plugins_register_more(tmp_path):
    from tests.doubles.run_config import small_config

    raw = small_config()
    raw["conditions"] = [{"strategy": "lecture"}]
    with pytest.raises(Exception, match="unknown strategy 'lecture'"):
        parse_run_config(raw)
    raw["conditions"] = [{"strategy": "checklist"}, {"simulator": "plain-cot"}]
    raw["plugins"] = ["tests.plugins.checklist_strategy", "tests.plugins.echo_simulator"]
    cfg = parse_run_config(raw)
    assert cfg.condition_names()[1] == "baseline:plain-cot"
    assert cfg.prompts.version == DEFAULT_PROMPTS == "v3" and cfg.prompts.connectable == "reference"


def test_the_profile_baseline_records_its_profile():
    item = demo_items("math")[0]
    specs = [session(item, "advanced", "socratic", "zero-shot-cot-user-profile"), session(item, "advanced", "socratic")]
    results = run(shard_of(specs), offline_models(), context(max_turns=2))
    profile = results[0].session.user_profile
    assert profile.startswith("An advanced student who") and profile.endswith(".")
    assert results[1].session.user_profile == ""


def test_a_run_can_choose_the_prompt_set_and_the_connectable_definition():
    from dataclasses import replace

    item = demo_items("math")[0]
    specs = [session(item, "novice", "minimal"), session(item, "novice", "socratic", "zero-shot")]
    for prompts in PROMPT_SETS:
        ctx = replace(context(max_turns=2), prompts=prompts, connectable="paper")
        results = run(shard_of(specs), offline_models(), ctx)
        assert all(r.session.status == "ok" for r in results)
        versions = json.loads(results[0].session.prompt_versions)
        assert versions["user_turn"] == prompts and versions["extractor"] == prompts
        assert versions.get("assistant_minimal" if prompts == "v1" else "assistant_simple") == prompts
        assert json.loads(results[1].session.prompt_versions)["baseline_zero_shot"] == prompts


def test_every_builtin_module_registers_itself_with_no_list_to_keep_in_step():
    """Each public module of simulators/ and strategies/ (but the registry's own base module and
    the profile helper) holds exactly one registered thing, so the registry's names are the modules."""
    from ray_knowsim.registry import package_modules
    from ray_knowsim.simulators import Simulator
    from ray_knowsim.strategies import TutorStrategy

    for package, kind, registry in (("ray_knowsim.simulators", Simulator, SIMULATORS),
                                    ("ray_knowsim.strategies", TutorStrategy, STRATEGIES)):
        declared = {}
        for name in package_modules(package):
            things = [v for v in vars(importlib.import_module(name)).values() if isinstance(v, kind)]
            if name.rsplit(".", 1)[1] in ("base", "profiles"):
                assert not things, name
                continue
            assert len(things) == 1, f"{name}: {things}"
            declared[things[0].name] = things[0]
        for name, thing in declared.items():
            assert registry.get(name) is thing


def test_a_registry_loads_a_new_module_of_its_package(tmp_path, monkeypatch):
    """A module dropped into a registry's package is a built-in: no tuple names it."""
    from ray_knowsim.registry import Registry

    pkg = tmp_path / "extra_tutors"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from ray_knowsim.registry import Registry\nREG = Registry('thing', package='extra_tutors')\n")
    (pkg / "lecture.py").write_text("from extra_tutors import REG\nREG.register('lecture', 'a lecture')\n")
    (pkg / "_private.py").write_text("raise RuntimeError('private modules are not built-ins')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry = importlib.import_module("extra_tutors").REG
    assert reg.names() == ["lecture"] and reg.get("lecture") == "a lecture"
