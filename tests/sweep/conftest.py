"""Fixtures of the sweep tests: small synthetic run directories (tests/doubles/sweep_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ray_knowsim.rules.config import paper_rules
from tests.doubles.sweep_runs import write_run


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """54 structured sessions (3 items x 3 levels x 3 conditions x 2 trials), reference rules,
    plus one baseline and one failed session."""
    path = tmp_path_factory.mktemp("sweep_run")
    write_run(path, n_items=3, trials=2, seed=11)
    return path


@pytest.fixture(scope="session")
def paper_run_dir(tmp_path_factory) -> Path:
    """The same shape recorded under the paper preset (two-of-three termination, strict flag...)."""
    path = tmp_path_factory.mktemp("sweep_run_paper")
    write_run(path, n_items=2, trials=1, seed=5, rules=paper_rules())
    return path
