"""A shard's commits, below :mod:`ray_knowsim.run.worker`: finished sessions are committed in small
steps (:class:`~ray_knowsim.run.worker.CommitPolicy`: every N sessions or T seconds, whichever first)
so a crash loses only the sessions in flight, and the steps are folded into one commit when the
shard ends. The writes run in a thread off the event loop (the loop keeps running sessions); what
each step wrote is kept while it is small, so the fold writes from memory instead of reading back.

A step the fold rewrites is Arrow IPC (:data:`ray_knowsim.io.commits.STEP_FILES`: a fraction of
Parquet's CPU); the fold, and a shard's only commit, are zstd Parquet. No Ray here."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from ray_knowsim.io.commits import STEP_FILES, TURN_SCHEMA, Commit, fold_commits, session_schema, sort_rows, write_commit
from ray_knowsim.io.parquet import rows_table
from ray_knowsim.io.spend import JOURNAL_KEY, SpendJournal
from ray_knowsim.sim.types import SessionResult

#: the fold writes from the step tables the worker still holds while they take at most this much
#: memory (a 252-session, 4-turn shard: a few MB), else it reads them back from their files
FOLD_FROM_MEMORY_BYTES = 256 * 2**20


class ShardWriter:
    """The commits of one shard: :meth:`commit` a step (in a thread), :meth:`fold` them at the end.
    ``summary`` is the shard's summary for the driver: the writer adds its seconds and CPU there."""

    def __init__(self, root: Path, shard_id: str, config_hash: str, plan: str, order: list[str],
                 fold: bool, journal: SpendJournal, summary: dict[str, Any]) -> None:
        self.root, self.shard_id, self.config_hash, self.plan, self.order = root, shard_id, config_hash, plan, order
        self.folds, self.journal, self.summary = fold, journal, summary
        self.commits: list[Commit] = []
        self.kernel: dict[str, Any] = {}  # the kernel's counters, as the shard function reports them
        self._written: list[tuple[Any, Any]] | None = []  # each step's tables, for the fold (while small)
        self._written_bytes = 0

    def commit(self, batch: list[SessionResult], last: bool = False) -> Commit:
        """One commit of ``batch``; ``last``: nothing follows it, so no fold will rewrite it."""
        started, cpu = time.perf_counter(), time.thread_time()  # this thread's CPU: the rest of a commit's wall is fsync
        session_rows, turn_rows = sort_rows([r.session for r in batch], [t for r in batch for t in r.turns], self.order)
        sessions = rows_table(session_rows, session_schema())  # with any outside metrics
        turns = rows_table(turn_rows, TURN_SCHEMA)
        made = write_commit(self.root, shard_id=self.shard_id, config_hash=self.config_hash, plan=self.plan,
                            sessions=sessions, turns=turns,
                            summary={"sessions": len(batch), "step": len(self.commits) + 1, "kernel": dict(self.kernel),
                                     JOURNAL_KEY: self.journal.token},
                            file_format=STEP_FILES if self.folds and not last else "parquet")
        self.journal.committed(made.sessions)
        self._written_bytes += sessions.nbytes + turns.nbytes
        if self._written is not None:
            self._written.append((sessions, turns))
            if self._written_bytes > FOLD_FROM_MEMORY_BYTES:
                self._written = None  # a big shard's fold reads its steps back instead
        self.summary["commit_seconds"] += time.perf_counter() - started
        self.summary["commit_cpu_seconds"] += time.thread_time() - cpu
        self.commits.append(made)
        return made

    async def flush(self, batch: list[SessionResult], final: bool = False) -> None:
        """Commit ``batch`` off the event loop; ``final``: the shard's end (its only commit needs no fold)."""
        if batch:
            await asyncio.to_thread(self.commit, batch, final and not self.commits)

    def needs_fold(self) -> bool:
        """Several steps, or one step that found nothing after it (the shard's last session filled it)."""
        return self.folds and (len(self.commits) > 1 or (bool(self.commits) and self.commits[0].file_format == "arrow"))

    def fold(self) -> None:
        """Fold the steps into one Parquet commit (run in a thread: the rest of its wall is fsync)."""
        started, cpu = time.perf_counter(), time.thread_time()
        written = self._written if self._written is not None and len(self._written) == len(self.commits) else None
        fold_commits(self.root, self.commits, self.order, plan=self.plan,
                     summary={"sessions": self.summary["sessions"], "kernel": dict(self.kernel), JOURNAL_KEY: self.journal.token},
                     tables=written)
        self.summary["fold_seconds"] = round(time.perf_counter() - started, 4)
        self.summary["fold_cpu_seconds"] = round(time.thread_time() - cpu, 4)


async def commit_as_they_finish(stream: AsyncIterator[SessionResult], writer: ShardWriter, every: int, every_s: float,
                                on_result: Callable[[SessionResult], SessionResult],
                                keep_on_error: Callable[[BaseException], bool]) -> None:
    """Read finished sessions from ``stream`` and commit them every ``every`` sessions or ``every_s``
    seconds after the first uncommitted one, whichever first (a timer, not the next session, ends
    a step: a slow session never holds the finished ones back). ``on_result`` checks and stamps
    each one; when the stream fails, what finished before is committed if ``keep_on_error`` says so."""
    buffer: list[SessionResult] = []
    first_at = 0.0
    upcoming: asyncio.Future | None = asyncio.ensure_future(stream.__anext__())

    async def flush(final: bool = False) -> None:
        nonlocal buffer
        batch, buffer = buffer, []
        await writer.flush(batch, final)

    try:
        while upcoming is not None:
            wait = None if not buffer else max(0.0, first_at + every_s - time.monotonic())
            ready, _ = await asyncio.wait({upcoming}, timeout=wait)
            if upcoming in ready:
                try:
                    result = upcoming.result()
                except StopAsyncIteration:
                    upcoming = None
                    break
                upcoming = asyncio.ensure_future(stream.__anext__())
                buffer.append(on_result(result))
                if len(buffer) == 1:
                    first_at = time.monotonic()
            if buffer and (len(buffer) >= every or time.monotonic() - first_at >= every_s):
                await flush()
        await flush(final=True)
    except Exception as exc:
        if keep_on_error(exc):  # what finished before the failure is kept
            await flush()
        raise
    finally:
        if upcoming is not None and not upcoming.done():
            upcoming.cancel()
            await asyncio.gather(upcoming, return_exceptions=True)  # let the cancelled step unwind first


async def close_quietly(stream: Any, models: list[Any]) -> None:
    """The shard function's own clean-up first, then each model once (their sessions, pools)."""
    aclose: Callable[[], Awaitable[Any]] | None = getattr(stream, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except RuntimeError:  # a generator that cannot be closed now (it is already closing)
            pass
    for model in {id(m): m for m in models if m is not None}.values():
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()


__all__ = ["FOLD_FROM_MEMORY_BYTES", "ShardWriter", "close_quietly", "commit_as_they_finish"]
