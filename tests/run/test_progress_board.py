"""The progress board a driver's runs reuse (run/progress.progress_board): a board is a worker
process of its own, so a later run of the same driver takes the idle one, cleared, instead of
starting another; two runs at once never share one; a dead parked board is replaced."""

from __future__ import annotations

import time

import pytest

from ray_knowsim.run import progress


def _actor_id(board) -> str:
    return board._actor_id.hex()


def _forget_parked(ray) -> None:
    for board in progress._IDLE_BOARDS.values():
        try:
            ray.kill(board)
        except Exception:  # noqa: BLE001 - a handle of an earlier Ray session (another module's)
            pass
    progress._IDLE_BOARDS.clear()


@pytest.fixture
def no_parked(ray_local):
    _forget_parked(ray_local)
    yield ray_local
    _forget_parked(ray_local)


def test_a_board_of_an_earlier_ray_session_is_not_used(no_parked):
    """After ray.shutdown() and a new ray.init() (a new module's cluster) a parked handle is stale:
    it is dropped, and the run gets a board of this session."""
    ray = no_parked
    progress._IDLE_BOARDS[("01000000", "a node of an earlier session")] = object()
    with progress.progress_board() as board:
        ray.get(board.report.remote("shard-000000", {"sessions": 1}))
    assert list(progress._IDLE_BOARDS.values()) == [board]


def test_a_later_run_reuses_the_idle_board_cleared(no_parked):
    ray = no_parked
    with progress.progress_board() as first:
        ray.get(first.report.remote("shard-000000", {"sessions": 3}))
        assert ray.get(first.snapshot.remote()) == {"shard-000000": {"sessions": 3}}
    with progress.progress_board() as second:
        assert _actor_id(second) == _actor_id(first)
        assert ray.get(second.snapshot.remote()) == {}  # the earlier run's snapshots are gone


def test_two_runs_at_once_get_two_boards_and_one_is_parked(no_parked):
    ray = no_parked
    with progress.progress_board() as outer:
        with progress.progress_board() as inner:
            assert _actor_id(inner) != _actor_id(outer)
            ray.get(inner.report.remote("shard-000001", {"sessions": 1}))
            assert ray.get(outer.snapshot.remote()) == {}
        # the inner run parked its board; the outer one, ending later, finds one parked and is killed
    assert [_actor_id(b) for b in progress._IDLE_BOARDS.values()] == [_actor_id(inner)]
    deadline = time.monotonic() + 60  # ray.kill is asynchronous: a call right after it may still be served
    with pytest.raises(ray.exceptions.RayActorError):
        while time.monotonic() < deadline:
            ray.get(outer.snapshot.remote(), timeout=30)
            time.sleep(0.2)


def test_a_dead_parked_board_is_replaced(no_parked):
    ray = no_parked
    with progress.progress_board() as first:
        pass
    ray.kill(first)
    with progress.progress_board() as second:
        assert _actor_id(second) != _actor_id(first)
        ray.get(second.report.remote("shard-000002", {"sessions": 2}))
        assert ray.get(second.snapshot.remote()) == {"shard-000002": {"sessions": 2}}
