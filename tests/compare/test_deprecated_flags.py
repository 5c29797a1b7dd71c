"""Nothing is changed silently: ``compare --n-boot/--seed`` (and ``agreement --n-boot``) sized the
bootstrap of P(best), which went with issue 28. They are still accepted, so old scripts run, but
each one given says on stderr that it has no effect and why; the outputs are the same with and
without them; the Python API no longer takes them (a clear error, not a silent drop)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from pydantic import ValidationError

from ray_knowsim.cli.main import main
from ray_knowsim.compare.paired import CompareOptions
from ray_knowsim.compare.pipeline import compare_runs
from tests.doubles.rundirs import committed_run


def test_compare_flags_warn_on_stderr_and_change_nothing(tmp_path, capsys):
    run = committed_run(tmp_path / "runs", "flags", n_sessions=36, max_turns=2, seed=4)
    assert main(["compare", str(run), "--out", str(tmp_path / "plain")]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert main(["compare", str(run), "--out", str(tmp_path / "flagged"), "--n-boot", "50", "--seed", "3"]) == 0
    err = capsys.readouterr().err
    assert "ray-knowsim compare: warning: --n-boot is deprecated and has no effect" in err
    assert "ray-knowsim compare: warning: --seed is deprecated and has no effect" in err
    assert "P(best)" in err and "was removed" in err
    for name in ("paired", "leaderboard", "best", "mde"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "plain" / f"{name}.csv"), pd.read_csv(tmp_path / "flagged" / f"{name}.csv"))
    options = json.loads((tmp_path / "flagged" / "compare.json").read_text())["options"]
    assert "n_boot" not in options and "seed" not in options


def test_the_python_api_refuses_them():
    with pytest.raises(ValidationError, match="n_boot"):
        CompareOptions(n_boot=200)
    with pytest.raises(TypeError, match="n_boot"):
        compare_runs(["nowhere"], "out", n_boot=200)  # type: ignore[call-arg]


def test_agreement_flag_warns_too(tmp_path, capsys):
    code = main(["agreement", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "o"), "--n-boot", "10"])
    assert code == 2  # the runs do not exist; the warning came first
    assert "ray-knowsim agreement: warning: --n-boot is deprecated and has no effect" in capsys.readouterr().err
