"""Below the fan-out of a run — execute: what one shard task does inside a Ray worker. Imported by
:mod:`ray_knowsim.run.fan_out` (the top); it imports neither that module nor the build part beside
it (:mod:`ray_knowsim.plan.build`): a worker gets its shard context and models handed in.

1. Skip the shard's sessions already committed at (at least) the attempt this task is to run:
   a task Ray retries after its worker died mid-shard runs only what the dead one had not
   committed (session-level resume; the driver's plan may also be older than those commits).
   Refuse to go on unless this node reads the driver's manifest of this run
   (:func:`ray_knowsim.cluster.bounded_fan_out.require_visible`).
2. Complete the sessions' initial states.
3. Run the shard function (:func:`ray_knowsim.sim.shard.run_shard`, imported; ``engine.shard_fn``
   names another one by string), which yields each session as it finishes, and
   stamp each row with its attempt, the errors of its earlier attempts and its failure class
   (:func:`ray_knowsim.schema.failures.failure_class`).
4. Commit finished sessions in small steps (:class:`CommitPolicy`: every N sessions or T
   seconds, whichever first; the writes run off the event loop), so a crash loses only the
   sessions in flight; fold the steps into one commit when the shard ends
   (:func:`ray_knowsim.io.commits.fold_commits`). Steps the fold rewrites are Arrow IPC files
   (a fraction of Parquet's CPU, io/datafiles.py); the fold, and a shard's only commit, are zstd
   Parquet. Steps an earlier run of this shard left unfolded (it was cut off) are folded too,
   one Parquet commit per spend journal they name (:func:`fold_leftover_steps`), so a resumed
   run ends as Parquet files only.
5. Check the contract: every planned session exactly once, of this run, failed ones naming why.

Every request the shard's models are sent, and every answer, is appended to the task's spend
journal as it happens (:mod:`ray_knowsim.io.spend`); each commit names that journal, so the cost
of sessions cut off before their commit (Ctrl-C, a killed driver or worker) is never lost, and
each answer moves the progress board (the display counts requests, not only finished turns).

The shards that share a CPU run in one process (:func:`execute_shards`, one Ray task): each as
it would run alone, on one event loop, with its own copy of the models.

Only a small summary travels back to the driver. No Ray import here: the batch layer wraps
:func:`execute_shards` in ``ray.remote``; the progress board is an opaque actor handle.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ray_knowsim.backends.model_set import ModelSet
from ray_knowsim.config.sections import DEFAULT_SHARD_FN
from ray_knowsim.run.progress import Reporter
from ray_knowsim.run.resume import Attempt
from ray_knowsim.run.collector import fewer_collections
from ray_knowsim.run.shard_writer import ShardWriter, close_quietly, commit_as_they_finish
from ray_knowsim.cluster.bounded_fan_out import require_visible
from ray_knowsim.io.commits import Commit, CommitIndex, RunDir, fold_commits, read_commit_tables, remove_commit, shard_markers
from ray_knowsim.io.spend import JOURNAL_KEY, SpendJournal
from ray_knowsim.llm.accounting import Accounting
from ray_knowsim.schema.failures import failure_class
from ray_knowsim.schema.graph import build_index
from ray_knowsim.registry import load_object
from ray_knowsim.rules.init_state import session_initial_states, states_to_ks
from ray_knowsim.sim.types import SessionResult, ShardContext, ShardSpec


class ShardContractError(RuntimeError):
    """The shard function broke its contract (a session missing, repeated or foreign)."""


@dataclasses.dataclass(frozen=True)
class CommitPolicy:
    """When finished sessions are committed: after ``every`` sessions, or ``every_s`` seconds after
    the first one still uncommitted, whichever comes first; ``fold``: one commit per shard at its end."""

    every: int = 8
    every_s: float = 30.0
    fold: bool = True


def load_shard_fn(path: str = DEFAULT_SHARD_FN, options: dict[str, Any] | None = None) -> Callable:
    """The product's simulation loop is imported (it is part of the import graph, and a renamed
    ``run_shard`` fails at import, not at a run's first shard); the config's string is only the
    override (a test stand-in, a user's own loop), loaded by name. The default keeps its string
    in the config, which is hashed: runs that leave it keep their hash. The import sits in the
    function so a driver that imports this module does not load the kernel (numba) it never runs."""
    if path == DEFAULT_SHARD_FN:
        from ray_knowsim.sim.shard import run_shard

        fn: Callable = run_shard
    else:
        try:
            fn = load_object(path)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ImportError(f"cannot load the shard function {path!r}: {exc}") from exc
    return functools.partial(fn, **options) if options else fn


def with_initial_states(shard: ShardSpec, ctx: ShardContext) -> ShardSpec:
    """Sessions without a cached initial state get the one their init seed gives
    (:func:`ray_knowsim.rules.init_state.session_initial_states`, the same the loop would sample:
    the same for every condition of an item x level x trial, so conditions stay paired)."""
    if all(s.initial_ks is not None for s in shard.sessions):
        return shard
    indexes: dict[str, Any] = {}
    sessions = []
    for s in shard.sessions:
        if s.initial_ks is None:
            index = indexes.get(s.item_key)
            if index is None:
                index = indexes[s.item_key] = build_index(shard.graph_of(s), s.item_id)
            states = session_initial_states(index, s.knowledge_level, ctx.rules, s.init_seed)
            s = dataclasses.replace(s, initial_ks=states_to_ks(index, states))
        sessions.append(s)
    return dataclasses.replace(shard, sessions=tuple(sessions))


def committed_attempts(run_dir: Path, shard_id: str, config_hash: str) -> dict[str, int]:
    """Session id -> highest committed attempt, over this shard id's commits of this config."""
    out: dict[str, int] = {}
    for c in shard_markers(run_dir, shard_id):
        if c.config_hash != config_hash:
            continue
        for sid, e in c.sessions.items():
            out[sid] = max(out.get(sid, 0), e.attempt)
    return out


def fold_leftover_steps(run_dir: Path, shard_id: str, config_hash: str, order: list[str], plan: str = "",
                        skip: frozenset[str] = frozenset()) -> tuple[int, int]:
    """Fold the step commits (Arrow IPC) an earlier run of this shard left when it was cut off
    before its fold -- all but the commits named in ``skip`` -- into Parquet: one commit per spend
    journal they name (a commit names the journal its sessions were spent in, io/spend.py), holding
    the sessions they still count (rows another commit outranks are left out, and go with the
    step); a step whose every row is outranked is removed, as garbage collection would. Returns
    (steps folded, steps removed)."""
    mine = [c for c in shard_markers(run_dir, shard_id) if c.config_hash == config_hash]
    index = CommitIndex(mine)
    by_journal: dict[Any, list[Commit]] = {}
    for c in index.live():
        if c.file_format == "arrow" and c.name not in skip:
            by_journal.setdefault(c.summary.get(JOURNAL_KEY), []).append(c)
    removed = 0
    for c in index.dead():
        if c.file_format == "arrow" and c.name not in skip:
            remove_commit(run_dir, c)
            removed += 1
    folded = 0
    for journal, steps in by_journal.items():
        tables = [read_commit_tables(run_dir, c, drop=index.superseded[c.name]) for c in steps]
        summary = {"sessions": sum(t[0].num_rows for t in tables), "late_fold": True, JOURNAL_KEY: journal}
        fold_commits(run_dir, steps, order, plan=plan, summary=summary, tables=tables)
        folded += len(steps)
    return folded, removed


def stamp(result: SessionResult, attempt: Attempt) -> SessionResult:
    """The row with its attempt, earlier errors and failure class (the loop leaves the defaults)."""
    row = result.session
    update = {"attempt": attempt.attempt, "previous_errors": json.dumps(list(attempt.previous_errors)),
              "failure_class": failure_class(row.error) if row.status != "ok" else None}
    return SessionResult(session=row.model_copy(update=update), turns=result.turns)


class _Contract:
    """Checks each result as it arrives (before it is committed), and completeness at the end."""

    def __init__(self, shard: ShardSpec, ctx: ShardContext) -> None:
        self.shard_id = shard.shard_id
        self.planned = {s.session_id for s in shard.sessions}
        self.ctx = ctx
        self.seen: set[str] = set()

    def check(self, r: SessionResult) -> None:
        sid = r.session.session_id
        problem = None
        if sid not in self.planned:
            problem = f"unplanned session {sid}"
        elif sid in self.seen:
            problem = f"session {sid} returned twice"
        elif r.session.config_hash != self.ctx.config_hash or r.session.run_id != self.ctx.run_id:
            problem = f"session {sid} carries run {r.session.run_id}/{r.session.config_hash}"
        elif any(t.session_id != sid for t in r.turns):
            problem = f"session {sid} has turn rows of another session"
        elif r.session.status not in ("ok", "failed"):
            problem = f"session {sid} has status {r.session.status!r} (expected ok/failed)"
        elif r.session.status == "failed" and not r.session.error:
            problem = f"session {sid} failed without naming an error"
        if problem:
            raise ShardContractError(f"{self.shard_id}: {problem}")
        self.seen.add(sid)

    def finish(self) -> None:
        missing = sorted(self.planned - self.seen)
        if missing:
            raise ShardContractError(f"{self.shard_id}: missing sessions {missing[:5]}{' ...' if len(missing) > 5 else ''}")


class _Spent:
    """The shard's spend sink: each request and answer goes to its journal at once, and the
    progress board hears of each answer (throttled), so the display moves with requests, not
    only with finished turns."""

    def __init__(self, journal: SpendJournal, reporter: Reporter, accounting: Accounting) -> None:
        self.journal, self.reporter, self.accounting = journal, reporter, accounting

    def sent(self, request: Any, model_key: str) -> None:
        self.journal.sent(request, model_key)

    def answered(self, request: Any, response: Any, model_key: str) -> None:
        self.journal.answered(request, response, model_key)
        self.reporter.update(self.accounting)


def execute_shard(
    shard: ShardSpec,
    models: ModelSet,
    ctx: ShardContext,
    run_dir: str,
    shard_fn: str,
    shard_fn_options: dict[str, Any],
    attempts: Mapping[str, Attempt] | None = None,
    board: Any = None,
    policy: CommitPolicy = CommitPolicy(),
    plan: str = "",
) -> dict[str, Any]:
    """Run and commit one shard's sessions (see the module docstring). ``attempts``: the runs
    the driver plans for reruns (absent: a first run)."""
    with fewer_collections():  # the loop's garbage is nearly all acyclic: run/collector.py
        return asyncio.run(run_one_shard(shard, models, ctx, run_dir, shard_fn, shard_fn_options, attempts, board, policy, plan))


@dataclasses.dataclass(frozen=True)
class ShardFailed:
    """A shard of a worker's group that did not finish (its exception, as its task's would read):
    the other shards of the group went on."""

    error_type: str
    message: str

    @classmethod
    def of(cls, exc: BaseException) -> "ShardFailed":
        return cls(type(exc).__name__, str(exc))

    def line(self) -> str:
        return f"{self.error_type}: {self.message}".splitlines()[0][:500]


def execute_shards(
    jobs: Sequence[tuple[ShardSpec, Mapping[str, Attempt] | None]],
    ctx: ShardContext,
    run_dir: str,
    shard_fn: str,
    shard_fn_options: dict[str, Any],
    board: Any,
    policy: CommitPolicy,
    plan: str,
    *models: ModelSet,
) -> list[dict[str, Any] | ShardFailed]:
    """The shards that share one CPU, run together in this process, each as :func:`execute_shard`
    would run it alone: one event loop, one interpreter and one loaded kernel for all of them, so
    each answer finds warm code and a loop wake-up serves several shards' answers (measured:
    docs/performance.md, "The ninth round"). Shard ``k`` of ``jobs`` uses ``models[k]``, its own
    copy (its own in-flight cap, connection pool and rate-limiter share, as in a process of its
    own). Each shard's summary, or :class:`ShardFailed` for a shard that raised: one shard's
    failure does not end the others (a dead process ends them all, and the task is retried)."""
    if len(models) != len(jobs):
        raise ValueError(f"execute_shards: {len(jobs)} shards but {len(models)} model sets")

    async def run_all() -> list[Any]:
        return await asyncio.gather(*(
            run_one_shard(shard, shard_models, ctx, run_dir, shard_fn, shard_fn_options, attempts, board, policy, plan)
            for (shard, attempts), shard_models in zip(jobs, models)
        ), return_exceptions=True)  # fmt: skip

    with fewer_collections():
        outcomes = asyncio.run(run_all())
    return [ShardFailed.of(o) if isinstance(o, BaseException) else o for o in outcomes]


def _count(result: SessionResult, summary: dict[str, Any], reporter: Reporter, accounting: Accounting) -> None:
    """A finished session in the shard's summary and on the progress board (a failure at once:
    fail-fast reads it there)."""
    failed = result.session.status != "ok"
    summary["sessions"] += 1
    summary["new_failed"] += failed
    summary["turns"] += len(result.turns)
    reporter.counts.sessions += 1
    reporter.counts.ended_turns += len(result.turns)
    if failed:
        reporter.counts.fail(result.session.error)
    reporter.update(accounting, force=failed)


async def run_one_shard(
    shard: ShardSpec,
    models: ModelSet,
    ctx: ShardContext,
    run_dir: str,
    shard_fn: str,
    shard_fn_options: dict[str, Any],
    attempts: Mapping[str, Attempt] | None = None,
    board: Any = None,
    policy: CommitPolicy = CommitPolicy(),
    plan: str = "",
) -> dict[str, Any]:
    """:func:`execute_shard` on the running event loop (the steps of the module docstring); the
    writes that take a while (commits, the fold) run off the loop, so shards sharing it go on."""
    t0 = time.perf_counter()
    root = Path(run_dir)
    attempts = dict(attempts or {})
    order = [s.session_id for s in shard.sessions]
    done = committed_attempts(root, shard.shard_id, ctx.config_hash)
    todo = tuple(s for s in shard.sessions if done.get(s.session_id, 0) < attempts.get(s.session_id, Attempt()).attempt)
    summary: dict[str, Any] = {"shard_id": shard.shard_id, "sessions": 0, "new_failed": 0, "turns": 0,
                               "already_committed": len(shard.sessions) - len(todo), "accounting": {},
                               "commits": 0, "commit_seconds": 0.0, "fold_seconds": 0.0, "commit_cpu_seconds": 0.0,
                               "fold_cpu_seconds": 0.0}
    if not todo:
        summary["leftover_steps_folded"], summary["leftover_steps_removed"] = await asyncio.to_thread(
            fold_leftover_steps, root, shard.shard_id, ctx.config_hash, order, plan)
        summary["seconds"] = round(time.perf_counter() - t0, 3)
        return summary
    # before anything is written or asked: a node that does not mount the run directory (one that
    # joined after the driver's probe) would commit into a private copy and its sessions be lost
    require_visible(RunDir(root).manifest, "config_hash", ctx.config_hash, what="the run directory", doc="docs/cluster.md")
    shard = with_initial_states(dataclasses.replace(shard, sessions=todo), ctx)
    fn = load_shard_fn(shard_fn, shard_fn_options)
    accounting = Accounting()
    reporter = Reporter(board, shard.shard_id)
    # every request is journaled as it leaves and as it is answered (io/spend.py): what this task
    # spends is on disk even when it is killed before any commit
    journal = SpendJournal(root, unit=shard.shard_id, config_hash=ctx.config_hash, invocation=ctx.invocation,
                           prices=ctx.prices)
    role_models = models.role_models(accounting, unit=shard.shard_id, sink=_Spent(journal, reporter, accounting))
    contract = _Contract(shard, ctx)
    writer = ShardWriter(root, shard.shard_id, ctx.config_hash, plan, order, policy.fold, journal, summary)

    def on_turn(info: dict[str, Any]) -> None:
        reporter.live = int(info.get("live", 0))
        reporter.counts.turns += int(info.get("turns", 0))
        writer.kernel.update(info.get("kernel") or {})
        reporter.update(accounting)

    def on_result(result: SessionResult) -> SessionResult:
        contract.check(result)
        _count(result, summary, reporter, accounting)
        return stamp(result, attempts.get(result.session.session_id, Attempt()))

    stream = None
    try:
        stream = fn(shard, role_models, dataclasses.replace(ctx, on_turn=on_turn)).__aiter__()
        await commit_as_they_finish(stream, writer, policy.every, policy.every_s, on_result,
                                    keep_on_error=lambda exc: not isinstance(exc, ShardContractError))
    finally:
        try:
            await close_quietly(stream, [role_models.user_sim, role_models.extractor, *role_models.assistants.values()])
        finally:
            journal.close()
    contract.finish()
    commits = writer.commits
    summary["commits"] = len(commits)
    if writer.needs_fold():
        await asyncio.to_thread(writer.fold)
    summary["leftover_steps_folded"], summary["leftover_steps_removed"] = await asyncio.to_thread(
        fold_leftover_steps, root, shard.shard_id, ctx.config_hash, order, plan, frozenset(c.name for c in commits))
    summary["commit_seconds"] = round(summary["commit_seconds"], 4)
    summary["commit_cpu_seconds"] = round(summary["commit_cpu_seconds"], 4)
    summary["accounting"] = accounting.to_dict()
    summary["errors"] = dict(reporter.counts.errors)
    if writer.kernel:
        summary["kernel"] = writer.kernel  # kernel calls, sessions stepped, most in one call
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    return summary


__all__ = ["Attempt", "CommitPolicy", "ShardContractError", "ShardFailed", "committed_attempts", "execute_shard", "execute_shards",
           "load_shard_fn", "run_one_shard", "stamp", "with_initial_states"]
