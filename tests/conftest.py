"""Fixtures shared by the whole test suite.

``shared_ref`` locates the read-only reference data (``../shared/knowsim-ref`` beside the checkout,
or ``$RAY_KNOWSIM_SHARED/knowsim-ref``) and skips the test, saying why, when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# numba's on-disk cache lives in the checkout (ignored by git) so the kernel compiles once.
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".numba_cache"))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def shared_root() -> Path:
    """The ``shared`` folder: $RAY_KNOWSIM_SHARED, else the sibling of the repository."""
    env = os.environ.get("RAY_KNOWSIM_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def shared_ref() -> Path:
    """Path of ``shared/knowsim-ref`` (items, IU caches, init cache, example records)."""
    ref = shared_root() / "knowsim-ref"
    if not ref.is_dir():
        pytest.skip(f"reference data not found at {ref} (set RAY_KNOWSIM_SHARED to the 'shared' folder)")
    return ref
