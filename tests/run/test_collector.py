"""A shard runs with what the worker held frozen out of collections and a higher young threshold;
both are put back after it, cyclic garbage made meanwhile is still collected, and a freeze the
caller made is left to the caller."""

from __future__ import annotations

import gc
import weakref

from ray_knowsim.run.collector import YOUNG_THRESHOLD, fewer_collections


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_inside_the_block_old_objects_are_frozen_and_the_threshold_is_higher_then_both_come_back():
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with fewer_collections():
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() > 1000  # everything this process had imported
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_settings_come_back_when_the_block_raises():
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise KeyError("shard failed")
    except KeyError:
        pass
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_cyclic_garbage_made_inside_is_still_collected():
    with fewer_collections():
        refs = [_cycle() for _ in range(50)]
        gc.collect()
        assert all(r() is None for r in refs)
        # and without an explicit collect: enough allocations start a young collection by themselves
        ref = _cycle()
        keep = [[] for _ in range(3 * YOUNG_THRESHOLD)]
        assert ref() is None
        del keep


def test_a_freeze_made_by_the_caller_is_the_callers_to_undo(monkeypatch):
    """Neither frozen again nor unfrozen under the caller. (Counting the frozen objects raced with
    other threads freeing some of them, under pytest-xdist: the calls are what the test reads.)"""
    calls: list[str] = []
    gc.freeze()
    try:
        monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
        with fewer_collections():
            pass
        assert calls == []
    finally:
        monkeypatch.undo()
        gc.unfreeze()
