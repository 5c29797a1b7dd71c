"""Stop a run whose sessions fail the same way over and over (``engine.fail_fast``).

Why: a broken endpoint, a refused key or a context too small fails every session with one error
code; without a stop the run pays for every session's first requests and ends only when all
have failed (measured: 48 of 48 sessions with one HTTP 404, every learner-simulator call paid).
The rule looks at the sessions finished in this invocation (committed earlier ones do not count)
and stops when, after at least ``min_finished`` of them, one error code accounts for at least
``share`` of them, or when one error code reached ``count`` sessions (either rule may be off).
Spread failures (many codes, or a few failures among many successes) never stop a run: they are
results. The default, 90% of at least 20 sessions, stops an always-failing run after about 20
sessions (plus what is in flight), and leaves a run with an ordinary failure rate alone.

:class:`FailureGuard` is the decision only (no Ray, no I/O); the batch layer feeds it the
progress board's counts and, on a stop, submits nothing more and cancels what is in flight
(committed sessions stay committed; the same command resumes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ray_knowsim.config.sections import FailFastConfig


@dataclass(frozen=True)
class Stop:
    """Why a run stopped early."""

    error: str  # the error code
    failed: int  # sessions that failed with it
    finished: int  # sessions finished in this invocation
    rule: str  # the rule that fired, in config words

    def line(self) -> str:
        return f"{self.failed} of {self.finished} finished sessions failed with {self.error} ({self.rule})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FailureGuard:
    """Decides from counts whether to stop. Counts are per-batch snapshots (sessions finished and
    failures per error code); :meth:`absorb` adds a finished batch (a condition group) to the base
    that later checks build on."""

    rule: FailFastConfig | None
    finished: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def check(self, finished: int, errors: Mapping[str, int]) -> Stop | None:
        if self.rule is None:
            return None
        total = self.finished + finished
        merged = dict(self.errors)
        for code, n in errors.items():
            merged[code] = merged.get(code, 0) + n
        if not merged or total <= 0:
            return None
        code, n = max(sorted(merged.items()), key=lambda kv: kv[1])
        r = self.rule
        if r.count is not None and n >= r.count:
            return Stop(code, n, total, r.describe())
        if r.share is not None and total >= r.min_finished and n >= r.share * total:
            return Stop(code, n, total, r.describe())
        return None

    def absorb(self, finished: int, errors: Mapping[str, int]) -> None:
        self.finished += finished
        for code, n in errors.items():
            self.errors[code] = self.errors.get(code, 0) + n


__all__ = ["FailFastConfig", "FailureGuard", "Stop"]
