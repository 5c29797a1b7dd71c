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


# Fixtures that start Ray: a test using one gets the ``ray`` marker automatically, so
# ``-m "not ray"`` runs exactly the tests that need no Ray.
RAY_FIXTURES = frozenset({"ray_local", "ray_head", "ray_workers", "local_ray", "llm_ray", "installed_cluster", "loopback_cluster",
                          "shared_head", "ray_8_gpus"})


# Per-test time limits (pytest-timeout; the default is ``timeout`` in pyproject): slow tests and
# real-model tests get more unless they set their own ``@pytest.mark.timeout(N)``.
SLOW_TIMEOUT_S = 900
LLM_CPU_TIMEOUT_S = 1800


_SESSION_START = 0


def pytest_sessionstart(session):
    global _SESSION_START
    from tests.doubles.leftovers import session_start_ticks

    _SESSION_START = session_start_ticks()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Nothing a test starts outlives the suite: what is still running (twice, 3 s apart: Ray's
    processes take a moment to go after a shutdown) is named here and ended."""
    import time

    from tests.doubles.leftovers import CLUSTER_TEMP_PREFIX, end, leftovers

    if hasattr(config, "workerinput"):
        return  # a pytest-xdist worker: its siblings (and their Rays) are still running; the controller looks at the end

    places = [str(Path(__file__).resolve().parents[1]) + "/", CLUSTER_TEMP_PREFIX, str(config._tmp_path_factory.getbasetemp())]
    first = leftovers(_SESSION_START, places)
    if not first:
        return
    time.sleep(3)
    still = [p for p in leftovers(_SESSION_START, places) if p in first]
    if still:
        terminalreporter.section("processes the tests left running (ended now)", sep="-")
        for pid, cmd in still:
            terminalreporter.write_line(f"{pid}: {cmd[:200]}")
        end(still)


def pytest_configure(config):
    import signal

    from tests.doubles.file_progress import register_if_distributed

    register_if_distributed(config)  # a line per finished file when the suite runs in several processes
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # started in the background of a non-interactive shell (`cmd &`, a CI step): Ctrl-C is
        # ignored here and, inherited, in every run a test starts, so a test that interrupts a run
        # as a user does (tests/run/test_stop_early.py) would see it go on. A handler is not
        # inherited across exec: this process still ignores Ctrl-C, the runs it starts do not.
        signal.signal(signal.SIGINT, lambda *_: None)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if RAY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ray)
        if item.get_closest_marker("timeout") is None:
            if item.get_closest_marker("llm_cpu") is not None:
                item.add_marker(pytest.mark.timeout(LLM_CPU_TIMEOUT_S))
            elif item.get_closest_marker("slow") is not None:
                item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


# A module's local Ray is kept for the next module that asks for one (a start and a shutdown cost
# 4-6 s, more on 2 busy cores, and 28 modules ask): it is shut down before the first test that does
# not ask for it (that test sees no Ray, as before) and at the end of the session.
_KEPT_RAY = {"ray": None}


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray (2 CPUs) for the whole module (kept for a next module that uses it too); the
    engine joins it and leaves it running."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kept, _KEPT_RAY["ray"] = _KEPT_RAY["ray"], None
    if not (kept is not None and ray.is_initialized()):
        if ray.is_initialized():
            ray.shutdown()
        ray.init(address="local", num_cpus=2, object_store_memory=256 * 2**20, include_dashboard=False,
                 logging_level="WARNING", log_to_driver=False)
    from ray.data import DataContext

    DataContext.get_current().enable_progress_bars = False
    yield ray
    _KEPT_RAY["ray"] = ray


def _shut_kept_ray() -> None:
    ray, _KEPT_RAY["ray"] = _KEPT_RAY["ray"], None
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="module", autouse=True)
def _no_kept_ray_for_others(request):
    """A module none of whose tests asks for ``ray_local`` runs without the Ray a module before
    kept (module-scoped and autouse, so it runs before the module's own fixtures, some of which
    start a Ray of their own when none is up)."""
    if _KEPT_RAY["ray"] is not None and not any(
            "ray_local" in item.fixturenames for item in request.session.items if item.module is request.module):
        _shut_kept_ray()
    yield


def pytest_sessionfinish(session, exitstatus):
    _shut_kept_ray()
