"""One shard's lockstep turn loop (no Ray inside).

Per turn, for every live session of the shard at once: the learner simulator's requests go out as
one batch, then the assistants' (grouped by model), then the signal extractor's; then ONE kernel
call advances every structured session's knowledge state. The judges are not part of this loop:
they are a stage of their own over the finished transcripts (``ray_knowsim.score``). A session that cannot continue (a model failing past its retries, an empty
message) ends as an explicit failure naming why; the others carry on.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, AsyncIterator, Callable

import numpy as np

from ray_knowsim.kernels.batch import BatchState
from ray_knowsim.llm.parse import ParseResult, parse_signal_report, parse_user_turn
from ray_knowsim.model.chat import ChatRequest
from ray_knowsim.model.roles import extractor_budget  # the first try's budget; a truncated report is retried at the cap
from ray_knowsim.prompts.render import render_assistant, render_extractor
from ray_knowsim.registry import import_plugins
from ray_knowsim.rules.termination import early_stop
from ray_knowsim.sim.ask import Answer, ask_all
from ray_knowsim.sim.session import LiveSession, start_session
from ray_knowsim.sim.types import RoleModels, SessionResult, ShardContext, ShardSpec, request_id, request_seed

def _seed(live: LiveSession, role: str, turn: int) -> int:
    return request_seed(live.spec.seed, role, turn)


def _charge(live: LiveSession, role: str, answer: Answer) -> None:
    live.charge(role, answer.usage, answer.calls, answer.prompt_version, cache_hits=answer.cache_hits, truncations=answer.truncations)


def _rid(live: LiveSession, role: str, turn: int) -> str:
    return request_id(live.spec.session_id, role, turn)


async def _ask_role(
    model: Any, lives: list[LiveSession], ctx: ShardContext, role: str, render: Callable, parse: Callable, **kwargs: Any
) -> list[Answer]:
    """One request per session, with the run's settings for ``role``, asked as one batch.

    Every role's turn asks the same way; only what it renders and how it reads the reply differ.
    """
    settings = ctx.roles[role]
    requests = [settings.apply(render(live)) for live in lives]
    return await ask_all(model, requests, parse, attempts=settings.attempts, repair_temperature=settings.repair_temperature, **kwargs)


async def _user_turns(lives: list[LiveSession], models: RoleModels, ctx: ShardContext, turn: int) -> None:
    def render(live: LiveSession) -> ChatRequest:
        return live.simulator.render(live.learner_view(
            live.transcript, prompts=ctx.prompts, connectable=ctx.connectable,
            seed=_seed(live, "user_sim", turn), request_id=_rid(live, "user_sim", turn),
        ))  # fmt: skip

    answers = await _ask_role(models.user_sim, lives, ctx, "user_sim", render, lambda text, i: parse_user_turn(text))
    for live, answer in zip(lives, answers):
        _charge(live, "user_sim", answer)
        if not answer.ok:
            live.fail(answer.error or "user_sim_failed", answer.detail)
            continue
        message = (answer.value.message or "").strip()
        terminate = bool(answer.value.terminate) and not live.structured  # structured runs ignore it (spec §8.1)
        if terminate:
            if message:
                live.transcript.append(["user", message])
            live.status, live.stop_reason = "done", "user_terminated"
            continue
        if not message:
            live.status, live.stop_reason, live.error = "failed", "empty_user_message", "empty_user_message"
            continue
        live.transcript.append(["user", message])


async def _assistant_turns(lives: list[LiveSession], models: RoleModels, ctx: ShardContext, turn: int) -> None:
    by_model: dict[str, list[LiveSession]] = defaultdict(list)
    for live in lives:
        by_model[live.spec.assistant_model].append(live)
    for key, group in by_model.items():
        answers = await _ask_role(
            models.assistant(key),
            group,
            ctx,
            "assistant",
            lambda live: render_assistant(
                live.item,
                live.spec.assistant_strategy,
                live.transcript,
                seed=_seed(live, "assistant", turn),
                request_id=_rid(live, "assistant", turn),
                prompts=ctx.prompts,
            ),
            _plain_text,
        )
        for live, answer in zip(group, answers):
            _charge(live, "assistant", answer)
            if not answer.ok:
                live.fail(answer.error or "assistant_failed", answer.detail)
            else:
                live.transcript.append(["assistant", answer.value])


def _plain_text(text: str, index: int) -> ParseResult[str]:
    text = (text or "").strip()
    return ParseResult(value=text) if text else ParseResult(error="assistant_empty", detail="the reply was empty")


async def _extract(lives: list[LiveSession], models: RoleModels, ctx: ShardContext, turn: int) -> list[Answer]:
    def render(live: LiveSession) -> ChatRequest:
        return render_extractor(
            live.item,
            live.graph,
            live.states,
            live.transcript[:-2],
            live.transcript[-2][1],
            live.transcript[-1][1],
            index=live.index,
            seed=_seed(live, "extractor", turn),
            request_id=_rid(live, "extractor", turn),
            prompts=ctx.prompts,
        )

    answers = await _ask_role(
        models.extractor,
        lives,
        ctx,
        "extractor",
        render,
        lambda text, i: parse_signal_report(text, lives[i].graph),
        estimates=[extractor_budget(live.index.size) for live in lives],
    )
    for live, answer in zip(lives, answers):
        _charge(live, "extractor", answer)
        live.extractor_refusals += len(answer.refusals)
        if answer.ok:
            live.extractor_repairs += len(answer.repairs)
        if not answer.ok:
            live.fail(answer.error or "extractor_failed", answer.detail)
    return answers


async def run_shard(shard: ShardSpec, models: RoleModels, ctx: ShardContext) -> AsyncIterator[SessionResult]:
    import_plugins(list(ctx.plugins))
    sessions: list[LiveSession] = []
    for spec in shard.sessions:
        sessions.append(start_session(spec, shard.item_of(spec), shard.graph_of(spec), ctx.rules))
    structured = [s for s in sessions if s.structured]
    slot = {id(s): k for k, s in enumerate(structured)}
    batch = (
        BatchState([s.index for s in structured], ctx.rules, [s.initial for s in structured], max_turns=ctx.max_turns)
        if structured
        else None
    )

    for turn in range(1, ctx.max_turns + 1):
        live = [s for s in sessions if s.live]
        if not live:
            break
        await _user_turns(live, models, ctx, turn)
        live = [s for s in live if s.live]
        await _assistant_turns(live, models, ctx, turn)
        live = [s for s in live if s.live]
        for s in live:
            if not s.structured:
                s.record_baseline_turn(turn)
        stateful = [s for s in live if s.structured]
        if stateful and batch is not None:
            answers = await _extract(stateful, models, ctx, turn)
            ok = [(s, a) for s, a in zip(stateful, answers) if a.ok]
            signals: list[list] = [[] for _ in structured]
            for s, a in ok:
                signals[slot[id(s)]] = list(a.value.entries)
            active = np.zeros(len(structured), dtype=bool)
            for s, _ in ok:
                active[slot[id(s)]] = True
            counters = batch.step(signals, active)  # the one kernel call of this turn
            for s, a in ok:
                k = slot[id(s)]
                post, carries = batch.session(k)
                s.record_turn(turn, signals[k], counters[k], post, carries, repairs=a.repairs, refusals=a.refusals)
                _apply_early_stop(s, ctx)
        if ctx.on_turn is not None:
            ctx.on_turn({"turn": turn, "live": sum(1 for s in sessions if s.live)})

    for s in sessions:
        if s.live:
            s.status = "done"
    for s in sessions:
        row, turns = s.rows(ctx)
        yield SessionResult(session=row, turns=turns)


def _apply_early_stop(s: LiveSession, ctx: ShardContext) -> None:
    """In "stop" mode the conversation ends at the rules' stop; "virtual" only records it."""
    if ctx.early_stop != "stop" or s.trajectory is None:
        return
    stop = early_stop(s.trajectory.stop_signals(), ctx.rules.termination)
    if stop is not None:
        s.status, s.stop_reason = "done", stop.reason
