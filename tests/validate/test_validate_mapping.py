"""Sim sessions -> human (arm, condition): the documented convention and the map file."""

from __future__ import annotations

import json

import pytest

from ray_knowsim.validate.mapping import MappingError, load_sim_map, resolve

STRAT = [(f"gpt-5.4:{s}", "gpt-5.4", s) for s in ("socratic", "adaptive", "comprehensive")]
MODEL = [(f"{m}:minimal", m, "minimal") for m in ("gpt-5.4", "gemini-3-pro-preview", "claude-opus-4-7")]


def test_convention_picks_the_one_model_and_the_one_strategy():
    mapping, notes = resolve(STRAT + MODEL)
    assert mapping[STRAT[0]] == [("strategy", "Socratic")]
    assert mapping[STRAT[2]] == [("strategy", "Comprehensive")]
    assert mapping[MODEL[0]] == [("model", "GPT-5.4")]
    assert mapping[MODEL[1]] == [("model", "Gemini 3 Pro")]  # unique prefix match
    assert mapping[MODEL[2]] == [("model", "Claude Opus 4.7")]
    assert len(mapping) == 6 and len(notes) == 2


def test_convention_other_models_overlaps_and_absent_arms():
    claude = ("claude-opus-4-7:adaptive", "claude-opus-4-7", "adaptive")
    mapping, _ = resolve(STRAT + [claude])
    # strategy arm: gpt-5.4 ran all three strategies, claude one; model arm: the strategy both models share
    assert mapping[claude] == [("model", "Claude Opus 4.7")]
    assert mapping[STRAT[1]] == [("strategy", "Adaptive"), ("model", "GPT-5.4")]
    mapping, notes = resolve(STRAT)
    assert all(arms[0][0] == "strategy" and len(arms) == 1 for arms in mapping.values())
    assert any(n.startswith("model arm: no simulated sessions found") for n in notes)
    mapping, _ = resolve([(f"{m}:x", f"anthropic/{m}", "x") for m in ("claude-opus-4-7", "gpt-5.4")])
    assert sorted(v[0][1] for v in mapping.values()) == ["Claude Opus 4.7", "GPT-5.4"]  # provider prefix dropped


def test_ambiguity_asks_for_a_map():
    two = STRAT + [(f"claude-opus-4-7:{s}", "claude-opus-4-7", s) for s in ("socratic", "adaptive", "comprehensive")]
    with pytest.raises(MappingError, match="ambiguous assistant model.*--sim-map"):
        resolve(two)
    with pytest.raises(MappingError, match="matches several assistant models"):
        resolve([("a", "gpt-5.4-mini", "x"), ("b", "gpt-5.4-nano", "x")])


def test_map_file_overrides_the_convention(tmp_path):
    path = tmp_path / "map.yaml"
    path.write_text("strategy:\n  0: gpt-5.4:adaptive\n  Adaptive: [gpt-5.4:socratic]\n")
    sim_map = load_sim_map(path)
    assert sim_map == {"strategy": {"Socratic": ["gpt-5.4:adaptive"], "Adaptive": ["gpt-5.4:socratic"]}}
    mapping, _ = resolve(STRAT + MODEL, sim_map)
    assert mapping[STRAT[1]] == [("strategy", "Socratic")]
    assert STRAT[2] not in mapping  # the map names no Comprehensive
    assert mapping[MODEL[1]] == [("model", "Gemini 3 Pro")]  # model arm still by convention
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"strategy": {"Socratic": "gpt-9:socratic"}}))
    with pytest.raises(MappingError, match="'gpt-9:socratic' is not a condition of this run"):
        resolve(STRAT, load_sim_map(bad))
    bad.write_text(json.dumps({"tutor": {}}))
    with pytest.raises(MappingError, match="unknown arm 'tutor'"):
        load_sim_map(bad)
    bad.write_text(json.dumps({"model": {"GPT-9": "x"}}))
    with pytest.raises(MappingError, match="unknown model-arm condition code 'GPT-9'"):
        load_sim_map(bad)
