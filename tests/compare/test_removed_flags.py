"""``compare --n-boot/--seed`` and ``agreement --n-boot`` sized the bootstrap of P(best), which went
with issue 28; nothing was released with them, so they are gone rather than kept as no-ops. A
script that still passes one is refused at once, naming the flag (argparse's exit 2), and the
Python API refuses them too (a clear error, not a silent drop)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ray_knowsim.cli.main import main
from ray_knowsim.compare.paired import CompareOptions
from ray_knowsim.compare.pipeline import compare_runs


@pytest.mark.parametrize("argv, flag", [
    (["compare", "run", "--out", "o", "--n-boot", "50"], "--n-boot"),
    (["compare", "run", "--out", "o", "--seed", "3"], "--seed"),
    (["agreement", "a", "b", "--out", "o", "--n-boot", "10"], "--n-boot"),
])
def test_the_removed_flags_are_refused_by_name(argv, flag, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert f"unrecognized arguments: {flag}" in capsys.readouterr().err


def test_the_python_api_refuses_them():
    with pytest.raises(ValidationError, match="n_boot"):
        CompareOptions(n_boot=200)
    with pytest.raises(TypeError, match="n_boot"):
        compare_runs(["nowhere"], "out", n_boot=200)  # type: ignore[call-arg]
