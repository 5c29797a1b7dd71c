"""One shard: all its sessions at once, each on its own clock (no Ray inside).

Every session of the shard runs its own turn loop (:func:`ray_knowsim.sim.loop.run_session`) as an
asyncio task; no session waits for another's request, so the only limits on concurrency are the
models' (an HTTP endpoint's in-flight cap and run-wide limiter, a vLLM pool's engines). The
knowledge-state updates are still batched: one kernel call steps every session whose extraction
arrived since the last call (:class:`ray_knowsim.sim.kernel_steps.KernelBatcher`). The judges are not
part of this loop: they are a stage of their own over the finished transcripts
(``ray_knowsim.score``).

:func:`run_shard` yields each session's result as soon as the session ends (the worker commits
them in small batches), so results come in the order sessions finish, which depends on the
models' timing; what each result holds does not (see :mod:`ray_knowsim.sim.types`).
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from ray_knowsim.registry import import_plugins
from ray_knowsim.sim.kernel_steps import KernelBatcher
from ray_knowsim.sim.loop import run_session
from ray_knowsim.sim.rows import session_rows
from ray_knowsim.sim.session import LiveSession, shared_indexes, start_session
from ray_knowsim.sim.types import RoleModels, SessionResult, ShardContext, ShardSpec


class _Progress:
    """Coalesces the loop's progress into at most one ``ctx.on_turn`` call per event-loop iteration."""

    def __init__(self, ctx: ShardContext, sessions: list[LiveSession], kernel: KernelBatcher | None) -> None:
        self.hook, self.sessions, self.kernel = ctx.on_turn, sessions, kernel
        self.turns = 0
        self.ended = 0  # sessions whose task has ended (counted, not scanned for: a report per iteration)
        self._scheduled = False

    def turn_done(self) -> None:
        self.turns += 1
        if self.hook is not None and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.report)

    def report(self) -> None:
        self._scheduled = False
        if self.hook is None:
            return
        info = {"turns": self.turns, "live": len(self.sessions) - self.ended}
        if self.kernel is not None:
            info["kernel"] = self.kernel.stats.to_dict()
        self.turns = 0
        self.hook(info)


async def run_shard(shard: ShardSpec, models: RoleModels, ctx: ShardContext) -> AsyncIterator[SessionResult]:
    """Run every session of ``shard`` at once; yield each one's result as it finishes."""
    import_plugins(list(ctx.plugins))
    index_of = shared_indexes()  # one index per item: see shared_indexes
    sessions = []
    for spec in shard.sessions:
        item, graph = shard.item_of(spec), shard.graph_of(spec)
        sessions.append(start_session(spec, item, graph, ctx.rules, index_of(item, graph)))
    structured = [s for s in sessions if s.structured]
    kernel = (KernelBatcher([s.index for s in structured], ctx.rules, [s.knowledge.initial for s in structured], max_turns=ctx.max_turns)
              if structured else None)  # fmt: skip
    slots = {id(s): k for k, s in enumerate(structured)}
    progress = _Progress(ctx, sessions, kernel)
    finished: asyncio.Queue[int] = asyncio.Queue()

    async def session_task(k: int) -> None:
        try:
            await run_session(sessions[k], models, ctx, kernel, slots.get(id(sessions[k])), progress.turn_done)
        finally:
            progress.ended += 1
            finished.put_nowait(k)

    tasks = [asyncio.ensure_future(session_task(k)) for k in range(len(sessions))]
    try:
        for _ in range(len(tasks)):
            k = await finished.get()
            tasks[k].result()  # a bug in the loop (not a model failure) ends the shard
            row, turns = session_rows(sessions[k], ctx)
            yield SessionResult(session=row, turns=turns)
        progress.report()
    finally:
        left = [t for t in tasks if not t.done()]
        for t in left:
            t.cancel()
        if left:
            await asyncio.gather(*left, return_exceptions=True)


__all__ = ["run_shard"]
