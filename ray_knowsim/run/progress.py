"""Progress of a run on the terminal: sessions done/total, turns, LLM calls and tokens per role,
failures, ETA.

Workers report absolute per-shard snapshots to a small actor (fire and forget, at most every
``REPORT_EVERY_S``); the driver polls it and adds the snapshots of shards still running to the
totals of committed ones. A shard retried after its worker died simply overwrites its snapshot,
so nothing is counted twice. ``quiet`` prints nothing until the final summary (CI logs); a
non-terminal stdout gets a plain line every ``PLAIN_EVERY_S`` instead of a live display.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ray_knowsim.run.eta import EtaEstimator
from ray_knowsim.llm.accounting import Accounting

log = logging.getLogger(__name__)
#: a shard's snapshots at most this often, and the driver's reading of the board as often: every
#: one is an actor call (~1 ms of CPU on each side on a loaded 2-core machine), and a reused board
#: still used 0.6-0.7 CPU-s in a 40 s engine.py (b) run at 0.5 s
REPORT_EVERY_S = 1.0
PLAIN_EVERY_S = 10.0


@dataclass
class Counts:
    """Additive progress figures (of one shard, or of the whole run)."""

    sessions: int = 0
    failed: int = 0
    turns: int = 0  # session-turns done, by finished and live sessions
    accounting: dict[str, Any] = field(default_factory=dict)  # Accounting.to_dict()
    errors: dict[str, int] = field(default_factory=dict)  # failed sessions per error kind (model/failures.error_kind)
    ended_turns: int = 0  # the turns of the finished sessions (how long a session runs: the ETA)

    def add(self, other: "Counts") -> None:
        self.sessions += other.sessions
        self.failed += other.failed
        self.turns += other.turns
        self.ended_turns += other.ended_turns
        merged = Accounting.from_dict(self.accounting).merge(Accounting.from_dict(other.accounting))
        self.accounting = merged.to_dict()
        for code, n in other.errors.items():
            self.errors[code] = self.errors.get(code, 0) + n

    def fail(self, error: str | None) -> None:
        """Count one failed session under its error code."""
        from ray_knowsim.schema.failures import error_kind

        code = error_kind(error or "") or "error"
        self.failed += 1
        self.errors[code] = self.errors.get(code, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "failed": self.failed, "turns": self.turns, "accounting": self.accounting,
                "errors": dict(self.errors), "ended_turns": self.ended_turns}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Counts":
        return cls(d.get("sessions", 0), d.get("failed", 0), d.get("turns", 0), dict(d.get("accounting", {})),
                   dict(d.get("errors", {})), d.get("ended_turns", 0))


class ProgressBoard:
    """The actor's state: latest snapshot per running shard (a plain class; wrapped by Ray)."""

    def __init__(self) -> None:
        self._shards: dict[str, dict[str, Any]] = {}

    def report(self, shard_id: str, snapshot: dict[str, Any]) -> None:
        self._shards[shard_id] = snapshot

    def drop(self, shard_id: str) -> None:
        self._shards.pop(shard_id, None)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return dict(self._shards)

    def clear(self) -> bool:
        """Forget every snapshot (a reused board starts its next run empty)."""
        self._shards.clear()
        return True


def progress_actor() -> Any:
    """The run's own board (unnamed: several runs on one cluster never share one), on the driver's
    node, which a lost worker node cannot take with it."""
    import ray

    from ray_knowsim.cluster.node_loss import on_this_node

    return ray.remote(num_cpus=0)(ProgressBoard).options(**on_this_node()).remote()


#: this driver's idle board per (Ray job, driver node): a board is a worker process of its own
#: (~1 CPU-s to start on a small machine), so a driver's later runs reuse it
_IDLE_BOARDS: dict[tuple[str, str], Any] = {}
_IDLE_LOCK = threading.Lock()


@contextlib.contextmanager
def progress_board():
    """The board of one run, for the time of the ``with``: this driver's idle board from an
    earlier run (a sweep's runs, a benchmark's warm-up, a notebook's), cleared first, else a new
    one (:func:`progress_actor`). Never two runs at once: a run that finds none idle starts its
    own, and whichever board is not parked at the end is killed. A board that does not answer the
    clearing (its process died) is replaced. The parked board lives until the driver's job ends."""
    import ray

    rt = ray.get_runtime_context()
    key = (rt.get_job_id(), rt.get_node_id())
    with _IDLE_LOCK:
        board = _IDLE_BOARDS.pop(key, None)
        _IDLE_BOARDS.clear()  # boards of an earlier Ray session (before a ray.shutdown): not valid in this one
    if board is not None:
        try:
            ray.get(board.clear.remote(), timeout=10)
        except Exception:  # noqa: BLE001 - dead or unreachable: start a new one
            board = None
    if board is None:
        board = progress_actor()
    try:
        yield board
    finally:
        with _IDLE_LOCK:
            park = key not in _IDLE_BOARDS
            if park:
                _IDLE_BOARDS[key] = board
        if not park:
            ray.kill(board)


class Reporter:
    """Worker side: throttled snapshots of one shard to the board (fire and forget)."""

    def __init__(self, board: Any, shard_id: str) -> None:
        self.board = board
        self.shard_id = shard_id
        self.counts = Counts()
        self.live = 0
        self._last = 0.0

    def update(self, accounting: Accounting, force: bool = False) -> None:
        if self.board is None:
            return
        now = time.monotonic()
        if not force and now - self._last < REPORT_EVERY_S:
            return
        self._last = now
        self.counts.accounting = accounting.to_dict()
        snap = self.counts.to_dict() | {"live": self.live}
        try:
            self.board.report.remote(self.shard_id, snap)
        except Exception as exc:  # noqa: BLE001 - progress must never break a shard; say why it is missing
            log.warning("progress report of %s not sent (%s: %s); the display may lag", self.shard_id, type(exc).__name__, exc)


def compact(n: int) -> str:
    """A count in at most ~6 characters (15324698 -> 15.3M), so the plain progress line stays
    within 100 columns however long the run."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= 10 * size if unit == "k" else n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


class Display:
    """Driver side: renders totals (rich Live on a terminal, plain lines otherwise)."""

    def __init__(self, total: int, already: int, n_shards: int, quiet: bool = False, console: Console | None = None,
                 max_turns: int = 1) -> None:
        self.total = total
        self.already = already  # sessions committed before this invocation
        self.n_shards = n_shards
        self.max_turns = max_turns
        self._eta: EtaEstimator | None = None
        self.quiet = quiet
        self.console = console or Console(stderr=False)
        self.start = time.monotonic()
        self.shards_done = 0
        self._live: Live | None = None
        self._last_plain = 0.0
        self.interactive = self.console.is_terminal and not quiet
        self.cost_watch: Any = None  # the run's cost re-estimates (run/cost_watch.py), polled by the fan-out

    def __enter__(self) -> "Display":
        self.start = time.monotonic()  # rates and ETA from the first shard on, not from Ray's start
        if self.interactive:
            self._live = Live(self._render(Counts(), 0), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def log(self, message: str) -> None:
        if not self.quiet:
            self.console.print(message)

    def warn(self, message: str) -> None:
        (self.console if not self.quiet else Console(stderr=True)).print(f"[yellow]{message}[/yellow]")

    def update(self, counts: Counts, live_sessions: int) -> None:
        if self.quiet:
            return
        self.observe(counts, time.monotonic(), live_sessions)
        if self._live is not None:
            self._live.update(self._render(counts, live_sessions))
            return
        now = time.monotonic()
        if now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            print(self.line(counts), flush=True)

    def observe(self, counts: Counts, now: float, live_sessions: int = 0) -> None:
        """Feed the ETA (run/eta.py) this invocation's totals at ``now``."""
        if self._eta is None or self._eta.sessions != self.total - self.already:
            self._eta = EtaEstimator(max(0, self.total - self.already), self.max_turns)
        calls = Accounting.from_dict(counts.accounting).total().calls
        self._eta.observe(now, requests=calls, turns=counts.turns, finished=counts.sessions, finished_turns=counts.ended_turns,
                          live=live_sessions)

    def eta_s(self, counts: Counts) -> float | None:
        """Seconds left (run/eta.py: from the requests the sessions still need and the recent
        request rate), None until requests complete."""
        return self._eta.eta_s() if self._eta is not None else None

    def line(self, counts: Counts) -> str:
        acc = Accounting.from_dict(counts.accounting).total()
        eta = self.eta_s(counts)
        return (
            f"sessions {self.already + counts.sessions}/{self.total} (failed {counts.failed}) "
            f"shards {self.shards_done}/{self.n_shards} turns {counts.turns} "
            f"llm calls {acc.calls} tokens {compact(acc.total_tokens)} "
            f"elapsed {time.monotonic() - self.start:.0f}s eta {'?' if eta is None else f'{eta:.0f}s'}"
        )

    def _render(self, counts: Counts, live_sessions: int) -> Table:
        acc = Accounting.from_dict(counts.accounting)
        done = self.already + counts.sessions
        pct = 100.0 * done / self.total if self.total else 100.0
        eta = self.eta_s(counts)
        head = Table.grid(padding=(0, 2))
        head.add_row(
            f"[bold]sessions[/bold] {done}/{self.total} ({pct:.0f}%)",
            f"[bold]live[/bold] {live_sessions}",
            f"[bold]failed[/bold] {counts.failed}",
            f"[bold]shards[/bold] {self.shards_done}/{self.n_shards}",
            f"[bold]turns[/bold] {counts.turns}",
            f"[bold]elapsed[/bold] {time.monotonic() - self.start:.0f}s",
            f"[bold]ETA[/bold] {'?' if eta is None else f'{eta:.0f}s'}",
        )
        roles = Table("role", "calls", "errors", "cached", "prompt tok", "completion tok", box=None, pad_edge=False)
        for name, st in sorted(acc.by_role.items()):
            roles.add_row(name, str(st.calls), str(st.errors), str(st.cached), str(st.prompt_tokens), str(st.completion_tokens))
        outer = Table.grid()
        outer.add_row(head)
        if acc.by_role:
            outer.add_row(roles)
        return outer


__all__ = ["Counts", "Display", "ProgressBoard", "Reporter", "progress_actor", "progress_board"]
