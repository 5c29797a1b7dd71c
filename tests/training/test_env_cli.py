"""`ray-knowsim env serve` refuses what it cannot serve with exit 2 and a reason, before binding."""

from __future__ import annotations

import pytest

from ray_knowsim.cli.main import main



@pytest.fixture(autouse=True)
def _needs_openenv():
    # A fixture, not a module-level skip: under `-m llm_cpu` (the real-model venv, which lacks the
    # extra) these tests are deselected instead of reported as skipped.
    pytest.importorskip("openenv.core", reason="needs the training extra (openenv-core): scripts/_venv.sh installs it")


def test_a_missing_config_is_refused(tmp_path, capsys):
    assert main(["env", "serve", str(tmp_path / "missing.yaml"), "--port", "0"]) == 2
    assert "cannot read the file" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--max-sessions", "0"], ["--port", "70000"], ["--min-turns", "0"]])
def test_bad_options_are_refused(args, capsys):
    assert main(["env", "serve", *args]) == 2
    assert "env serve:" in capsys.readouterr().err
