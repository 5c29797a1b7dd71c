"""Layer 1 of a run — execute: what one shard task does inside a Ray worker. Complete the
sessions' initial states, run the shard's simulation loop, check that every planned session came
back exactly once, and commit the rows atomically. Only a small summary travels back to the
driver. (The layers above: :mod:`ray_knowsim.engine.build`, :mod:`ray_knowsim.engine.batch`.)

No Ray import here: the runner wraps :func:`execute_shard` in ``ray.remote``; the progress board
is an opaque actor handle.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import time
from typing import Any, Callable

from ray_knowsim.engine.models import ModelSet
from ray_knowsim.engine.progress import Reporter
from ray_knowsim.engine.results import SESSION_SCHEMA, TURN_SCHEMA, Marker, RunDir, merge_rerun, rows_table, sort_tables
from ray_knowsim.llm.accounting import Accounting
from ray_knowsim.model.graph import build_index
from ray_knowsim.registry import load_object
from ray_knowsim.rules.init_state import sample_initial_states, states_to_ks
from ray_knowsim.sim.types import SessionResult, ShardContext, ShardSpec


class ShardContractError(RuntimeError):
    """The shard function broke its contract (a session missing, repeated or foreign)."""


def load_shard_fn(path: str, options: dict[str, Any] | None = None) -> Callable:
    try:
        fn = load_object(path)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ImportError(f"cannot load the shard function {path!r}: {exc}") from exc
    return functools.partial(fn, **options) if options else fn


def with_initial_states(shard: ShardSpec, ctx: ShardContext) -> ShardSpec:
    """Sessions without a cached initial state get one sampled from ``random.Random(init_seed)``
    (the same for every condition of an item x level x trial: conditions stay paired)."""
    if all(s.initial_ks is not None for s in shard.sessions):
        return shard
    indexes: dict[str, Any] = {}
    sessions = []
    for s in shard.sessions:
        if s.initial_ks is None:
            index = indexes.get(s.item_key)
            if index is None:
                index = indexes[s.item_key] = build_index(shard.graph_of(s), s.item_id)
            states = sample_initial_states(index, s.knowledge_level, ctx.rules, random.Random(s.init_seed))
            s = dataclasses.replace(s, initial_ks=states_to_ks(index, states))
        sessions.append(s)
    return dataclasses.replace(shard, sessions=tuple(sessions))


def execute_shard(
    shard: ShardSpec,
    models: ModelSet,
    ctx: ShardContext,
    run_dir: str,
    shard_fn: str,
    shard_fn_options: dict[str, Any],
    previous: dict[str, Any] | None,
    board: Any = None,
) -> dict[str, Any]:
    """Run and commit one shard (or, with ``previous``, rerun some of its sessions)."""
    t0 = time.perf_counter()
    fn = load_shard_fn(shard_fn, shard_fn_options)
    shard = with_initial_states(shard, ctx)
    accounting = Accounting()
    role_models = models.role_models(accounting)
    reporter = Reporter(board, shard.shard_id)

    def on_turn(info: dict[str, Any]) -> None:
        reporter.live = int(info.get("live", 0))
        reporter.counts.turns += reporter.live
        reporter.update(accounting)

    run_ctx = dataclasses.replace(ctx, on_turn=on_turn)

    async def drive() -> list[SessionResult]:
        out = []
        async for result in fn(shard, role_models, run_ctx):
            out.append(result)
            reporter.counts.sessions += 1
            reporter.counts.failed += result.session.status != "ok"
            reporter.update(accounting)
        for model in {id(m): m for m in (role_models.user_sim, role_models.extractor,
                                         *role_models.assistants.values()) if m is not None}.values():
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
        return out

    results = asyncio.run(drive())
    _check_contract(shard, ctx, results)

    sessions = rows_table([r.session for r in results], SESSION_SCHEMA)
    turns = rows_table([t for r in results for t in r.turns], TURN_SCHEMA)
    rd = RunDir(run_dir)
    prev = Marker.from_dict(previous) if previous else None
    order = prev.session_ids if prev else [s.session_id for s in shard.sessions]
    if prev is not None:
        old_sessions, old_turns = rd.read_shard_tables(prev)
        sessions, turns = merge_rerun(old_sessions, old_turns, sessions, turns, order)
    else:
        sessions, turns = sort_tables(sessions, turns, order)
    new_turns = sum(len(r.turns) for r in results)
    summary = {
        "shard_id": shard.shard_id,
        "sessions": len(results),
        "new_failed": sum(r.session.status != "ok" for r in results),
        "turns": new_turns,
        "accounting": accounting.to_dict(),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    marker = rd.commit_shard(shard.shard_id, ctx.config_hash, order, sessions, turns, summary, previous=prev)
    summary["failed"] = len(marker.failed)
    return summary


def _check_contract(shard: ShardSpec, ctx: ShardContext, results: list[SessionResult]) -> None:
    planned = [s.session_id for s in shard.sessions]
    got = [r.session.session_id for r in results]
    problems = []
    missing = sorted(set(planned) - set(got))
    extra = sorted(set(got) - set(planned))
    repeated = sorted({sid for sid in got if got.count(sid) > 1})
    for ids, what in ((missing, "missing sessions"), (extra, "unplanned sessions"), (repeated, "sessions returned twice")):
        if ids:
            problems.append(f"{what} {ids[:5]}{' ...' if len(ids) > 5 else ''}")
    for r in results:
        if r.session.config_hash != ctx.config_hash or r.session.run_id != ctx.run_id:
            problems.append(f"session {r.session.session_id} carries run {r.session.run_id}/{r.session.config_hash}")
            break
        if any(t.session_id != r.session.session_id for t in r.turns):
            problems.append(f"session {r.session.session_id} has turn rows of another session")
            break
        if r.session.status not in ("ok", "failed"):
            problems.append(f"session {r.session.session_id} has status {r.session.status!r} (expected ok/failed)")
            break
        if r.session.status == "failed" and not r.session.error:
            problems.append(f"session {r.session.session_id} failed without naming an error")
            break
    if problems:
        raise ShardContractError(f"{shard.shard_id}: " + "; ".join(problems))


__all__ = ["ShardContractError", "execute_shard", "load_shard_fn", "with_initial_states"]
