"""A crash at the n-th file-system step, for the tests of every committed dataset (io/committed.py).

A crash is :class:`Crash` raised at the n-th ``os.fsync``, ``os.replace`` or ``os.unlink`` the code
under test makes (what a killed process or a lost node leaves: every step before it done, none
after); :func:`each_crash` tries it at every step an operation takes, on a fresh copy each time.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest


class Crash(BaseException):
    """The process dies here (a BaseException: no ``except OSError`` on the way swallows it)."""


class Steps:
    """Counts (and records) the file-system steps; raises :class:`Crash` at step ``at``."""

    def __init__(self, at: int | None = None) -> None:
        self.at, self.n, self.trace = at, 0, []

    def step(self, op: str, path: str) -> None:
        self.n += 1
        self.trace.append((op, path))
        if self.at is not None and self.n == self.at:
            raise Crash(f"step {self.n}: {op} {path}")


@contextmanager
def steps(monkeypatch, at: int | None = None):
    s = Steps(at)
    real_fsync, real_replace, real_unlink = os.fsync, os.replace, os.unlink

    def fsync(fd):
        s.step("fsync", os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(src, dst, **kw):
        s.step("replace", f"{src} -> {dst}")
        real_replace(src, dst, **kw)

    def unlink(path, **kw):
        s.step("unlink", str(path))
        real_unlink(path, **kw)

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", fsync)
        m.setattr(os, "replace", replace)
        m.setattr(os, "unlink", unlink)
        yield s


def each_crash(monkeypatch, make, act, check):
    """For every step n of ``act(root)`` on a fresh ``make()``: crash there, then ``check(root)``;
    returns the number of steps (at least one crash is tried per step)."""
    with steps(monkeypatch) as count:
        act(make())
    assert count.n > 0
    for n in range(1, count.n + 1):
        root = make()
        with steps(monkeypatch, at=n), pytest.raises(Crash):
            act(root)
        check(root)
    return count.n


def copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


__all__ = ["Crash", "Steps", "copy", "each_crash", "steps"]
