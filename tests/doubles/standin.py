"""A TEST DOUBLE shard function with ``run_shard``'s signature: synthetic rows, optional LLM traffic.

Why it exists: the engine (planning, Ray scheduling, commits, resume, reductions, benchmarks) must
be testable without the real simulation loop, and its overhead measurable apart from it. Select
it with ``engine.shard_fn: tests.doubles.standin:run_shard``. Rows are a deterministic
function of each session's seed; the numbers mean nothing.

Options (``engine.shard_fn_options``):
* ``call_models``: per turn, send one lockstep batch per role (user simulator, assistant per
  model, extractor), retrying a failed request up to the role's
  ``attempts``; a session whose request still fails ends ``status="failed"`` naming role and error.
* ``turn_delay_s``: sleep per turn; ``start_delay_s``: sleep once per shard (slow enough to interrupt).
* ``delegate``: ``"module:function"`` of a real shard function: after the delay and crash hooks,
  its results are passed through unchanged (the hooks around the real simulation loop).
* ``stream_delay_s``: a pause before each result after the first, so results arrive one by one
  as a per-session loop yields them (the worker's streamed commits can be caught mid-shard);
  ``raise_after``: raise RuntimeError after yielding that many results (a loop crashing mid-shard);
  ``raise_in_shards``: only in these shards (default: every shard).
* ``fail_sessions``: session ids that end as failed: a list (error ``assistant_invalid_output``, a
  model failure) or a mapping session id -> error code (``assistant_http_503`` for an infra
  failure, ...: schema/failures.py classifies it; ``"<code>: <reason>"`` also fills the row's
  ``error_detail``). ``fail_once_file``: when set, a session fails only
  while this file does not exist (it fails, then the test creates the file: the next run heals).
* ``crash_file``: when this file exists and names the shard, the worker that runs the shard
  renames it to ``<file>.fired`` and kills itself (SIGKILL): a worker dying mid-run, once. The
  trigger lives outside the config, so a crashed run and a clean run share one config hash.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
from pathlib import Path
from typing import AsyncIterator, Mapping, Sequence

import numpy as np

from ray_knowsim.llm.protocol import generate_all
from ray_knowsim.schema.chat import ChatRequest, ChatResponse
from ray_knowsim.schema.graph import build_index, capacity
from ray_knowsim.schema.results import FAILURE_MODES, ROLES, SESSION_METRICS, SessionRow, TurnRow, token_columns
from ray_knowsim.schema.states import state_value
from ray_knowsim.sim.types import RoleModels, SessionResult, SessionSpec, ShardContext, ShardSpec
from ray_knowsim.simulators import SIMULATORS


#: the error of an injected failure given as a plain list: a model failure (an unreadable answer)
INJECTED = "assistant_invalid_output"


async def run_shard(
    shard: ShardSpec,
    models: RoleModels,
    ctx: ShardContext,
    *,
    call_models: bool = False,
    turn_delay_s: float = 0.0,
    fail_sessions: Sequence[str] | Mapping[str, str] = (),
    fail_once_file: str | None = None,
    crash_file: str | None = None,
    start_delay_s: float = 0.0,
    delegate: str | None = None,
    stream_delay_s: float = 0.0,
    raise_after: int | None = None,
    raise_in_shards: Sequence[str] | None = None,
) -> AsyncIterator[SessionResult]:
    if raise_in_shards is not None and shard.shard_id not in raise_in_shards:
        raise_after = None
    if crash_file and _claim_crash(crash_file, shard.shard_id):
        os.kill(os.getpid(), signal.SIGKILL)
    if start_delay_s:
        await asyncio.sleep(start_delay_s)
    if delegate:
        module, _, name = delegate.partition(":")
        first = True
        async for result in getattr(importlib.import_module(module), name)(shard, models, ctx):
            if stream_delay_s and not first:
                await asyncio.sleep(stream_delay_s)
            first = False
            yield result
        return
    live = {s.session_id: s for s in shard.sessions}
    errors: dict[str, str] = {}
    tokens: dict[str, dict[str, int]] = {s.session_id: {} for s in shard.sessions}
    calls: dict[str, int] = {s.session_id: 0 for s in shard.sessions}
    turns_done: dict[str, int] = {}
    for turn in range(1, ctx.max_turns + 1):
        if turn_delay_s:
            await asyncio.sleep(turn_delay_s)
        if call_models:
            roles = [("user_sim", models.user_sim, None)]
            roles += [("assistant", m, key) for key, m in sorted(models.assistants.items())]
            roles.append(("extractor", models.extractor, None))
            for role, model, key in roles:
                batch = [s for s in live.values() if key is None or s.assistant_model == key]
                await _ask(model, role, turn, batch, ctx, errors, tokens, calls)
                for sid in errors:
                    live.pop(sid, None)
        for sid in live:
            turns_done[sid] = turn
        if ctx.on_turn is not None:
            ctx.on_turn({"turns": len(live), "live": len(live)})
    injected = dict(fail_sessions) if isinstance(fail_sessions, Mapping) else {sid: INJECTED for sid in fail_sessions}
    if fail_once_file and Path(fail_once_file).exists():
        injected = {}
    for k, s in enumerate(shard.sessions):
        if raise_after is not None and k >= raise_after:
            raise RuntimeError(f"standin: the loop crashed after {k} sessions")
        if stream_delay_s and k:
            await asyncio.sleep(stream_delay_s)
        error = errors.get(s.session_id) or injected.get(s.session_id)
        yield _result(shard, s, ctx, turns_done.get(s.session_id, 0), error, tokens[s.session_id], calls[s.session_id])


def _claim_crash(path: str, shard_id: str) -> bool:
    try:
        if Path(path).read_text().strip() != shard_id:
            return False
        os.rename(path, path + ".fired")  # atomic: exactly one worker fires
    except OSError:
        return False
    return True


async def _ask(model, role, turn, sessions: list[SessionSpec], ctx, errors, tokens, calls) -> None:
    """One lockstep batch for ``role``; failed requests are re-sent up to the role's attempts."""
    settings = ctx.roles[role]
    pending = list(sessions)
    last: dict[str, str] = {}
    for _ in range(settings.attempts):
        if not pending:
            return
        requests = [
            ChatRequest(
                messages=({"role": "user", "content": f"{role} turn {turn} of {s.session_id}"},),
                role=role,
                temperature=settings.temperature,
                max_tokens=min(settings.max_tokens, 64),
                seed=s.seed + turn,
                request_id=f"{s.session_id}/{turn}/{role}",
            )
            for s in pending
        ]
        responses: list[ChatResponse] = await generate_all(model, requests)
        retry = []
        for s, resp in zip(pending, responses):
            calls[s.session_id] += 1
            t = tokens[s.session_id]
            t[role] = t.get(role, 0) + resp.usage.total
            if resp.error is not None:
                last[s.session_id] = resp.error
                retry.append(s)
        pending = retry
    for s in pending:  # named like the loop's: <role>_<reason>
        reason = last[s.session_id].split(":")[0].strip().replace(" ", "_")
        errors[s.session_id] = reason if reason.startswith(role) else f"{role}_{reason}"


def _result(shard: ShardSpec, s: SessionSpec, ctx: ShardContext, n_turns: int, error: str | None,
            tokens: dict[str, int], llm_calls: int) -> SessionResult:
    graph = shard.graph_of(s)
    index = build_index(graph, s.item_id)
    rng = np.random.default_rng(s.seed)
    ks = s.initial_ks or {}
    initial = [state_value((ks.get(label) or {}).get("state")) for label in index.labels]
    tau = capacity(index.size, ctx.rules.capacity_ratio, ctx.rules.capacity_floor)
    ok = error is None
    error, _, detail = (error or "").partition(": ")
    metrics = {}
    if ok and SIMULATORS.get(s.simulator).structured:
        for m in SESSION_METRICS:
            metrics[m] = float(rng.uniform(0, 1))
            metrics[f"{m}_es"] = float(rng.uniform(0, 1))
    fm = {f"fm_{m}": int(rng.integers(0, 4)) for m in FAILURE_MODES}
    es_turn = int(rng.integers(1, ctx.max_turns + 1)) if ok and rng.uniform() < 0.5 else None
    row = SessionRow(
        run_id=ctx.run_id,
        config_hash=ctx.config_hash,
        session_id=s.session_id,
        task=s.task,
        item_id=s.item_id,
        knowledge_level=s.knowledge_level,
        condition=s.condition,
        assistant_model=s.assistant_model,
        assistant_strategy=s.assistant_strategy,
        simulator=s.simulator,
        trial=s.trial,
        seed=s.seed,
        rules_preset=ctx.rules.preset,
        graph_size=index.size,
        tau=tau,
        iu_labels=list(index.labels),
        initial_states=initial,
        graph_json=json.dumps(graph.to_json_dict(), sort_keys=True),
        status="ok" if ok else "failed",
        turns=n_turns,
        stop_reason="max_turns" if ok else "error",
        early_stop_turn=es_turn,
        early_stop_reason="cognitive_overload" if es_turn else None,
        error=error or None,
        error_detail=detail or None,
        llm_calls=llm_calls,
        **{token_columns(role)["tokens"]: tokens.get(role, 0) for role in ROLES},
        **metrics,
        **fm,
    )
    turns = []
    states = list(initial)
    for t in range(1, n_turns + 1):
        k = int(rng.integers(0, index.size))
        states[k] = min(3, states[k] + 1)
        load = float(rng.uniform(0, 2 * tau))
        turns.append(TurnRow(
            run_id=ctx.run_id, session_id=s.session_id, turn=t,
            user_message=f"user {t}", assistant_message=f"assistant {t}", signals_json="[]",
            states=list(states), carries=[0.0] * index.size,
            comprehension_load=load, attempt_load=0.0, effective_load=load, overload=load >= tau,
            eta=1.0, n_upward_transitions=1, absorbed_gain=1.0, ic_numerator=1, ic_denominator=1,
            zpd_size=1, absorbed_ic_numerator=1, new_ius=1, disallowed=0, familiarity=0.5,
            novelty=0.5, engagement=0.5, density=0.5,
        ))
    return SessionResult(session=row, turns=turns)


__all__ = ["run_shard"]
