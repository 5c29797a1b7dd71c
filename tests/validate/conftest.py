"""Synthetic KnowChat data for the validation tests, written once per session by the script."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_synthetic_knowchat.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("make_synthetic_knowchat", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def synth():
    """The writer script as a module (make_plan, write_human, write_sim, main, ...)."""
    return _load_script()


@pytest.fixture(scope="session")
def synthetic(synth, tmp_path_factory):
    """(human dir, run dir, planted answer): structured 75 %, a zero-shot-cot baseline 50 %."""
    root = tmp_path_factory.mktemp("knowchat")
    human, run = root / "human", root / "run"
    assert synth.main(["--out", str(human), "--sim-out", str(run), "--agreement", "0.75",
                       "--baseline-agreement", "0.5", "--seed", "3"]) == 0
    return human, run, json.loads((human / "planted.json").read_text())


@pytest.fixture(scope="session")
def synthetic_legacy(synth, tmp_path_factory):
    """The same planting written in the older layout (human dir, planted answer)."""
    human = tmp_path_factory.mktemp("knowchat_legacy") / "human"
    assert synth.main(["--out", str(human), "--agreement", "0.75", "--baseline-agreement", "0.5", "--seed", "3",
                       "--format", "legacy"]) == 0
    return human, json.loads((human / "planted.json").read_text())


@pytest.fixture
def human_copy(synthetic, tmp_path):
    """A private copy of the synthetic human folder (card layout), for tests that break it."""
    dst = tmp_path / "human"
    shutil.copytree(synthetic[0], dst)
    return dst


@pytest.fixture
def legacy_copy(synthetic_legacy, tmp_path):
    """A private copy of the synthetic human folder in the older layout."""
    dst = tmp_path / "legacy"
    shutil.copytree(synthetic_legacy[0], dst)
    return dst
