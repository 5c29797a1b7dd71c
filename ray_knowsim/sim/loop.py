"""One conversation's turn loop, as a coroutine that waits for nothing but its own answers.

Per turn: the learner simulator's message, the tutor's reply, then for a structured learner the
signal extractor's report and the knowledge-state update (one kernel step, batched with whichever
other sessions are ready: :mod:`ray_knowsim.sim.batcher`), then the early stop. The next turn's
request goes out as soon as this turn is read. Every request is built by
:class:`ray_knowsim.sim.requests.TurnRequests` and asked through :func:`ray_knowsim.sim.ask.ask`.

A session that cannot continue ends as an explicit failure naming why, ``<role>_<reason>``:

* a transport failure after the client's own retries (``<role>_http_503``, ``<role>_timeout``,
  ``<role>_connection``, ``<role>_limiter_error``, ``<role>_vllm_engine_dead``, ...);
* an answer still unreadable after the role's ``attempts``: ``<role>_empty`` (an empty reply, or a
  learner turn without a message), ``<role>_invalid_json``, ``<role>_invalid_output``,
  ``extractor_invalid_signals``;
* an answer cut at the role's token cap: ``<role>_truncated``.

What is unreadable is decided by each role's parser alone (:mod:`ray_knowsim.llm.parse`), so
nothing the parser refuses reaches a transcript or the state.

A baseline learner that ends the conversation (``terminate``) is a normal end
(``stop_reason="user_terminated"``); so are the rules' early stop in "stop" mode and ``max_turns``.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable

from ray_knowsim.llm.parse import ParseResult, parse_signal_report, parse_user_turn
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.roles import extractor_budget  # the first try's budget; a truncated report is retried at the cap
from ray_knowsim.rules.termination import early_stop
from ray_knowsim.sim.ask import Answer, ask
from ray_knowsim.sim.batcher import StepBatcher
from ray_knowsim.sim.requests import TurnRequests
from ray_knowsim.sim.session import LiveSession
from ray_knowsim.sim.types import RoleModels, ShardContext

async def run_session(
    live: LiveSession,
    models: RoleModels,
    ctx: ShardContext,
    kernel: StepBatcher | None,
    slot: Hashable | None,
    on_turn: Callable[[], None] = lambda: None,
) -> LiveSession:
    """Run ``live`` to its end (``live.status`` is then "done" or "failed"); ``kernel``/``slot``:
    where a structured session's state lives; ``on_turn`` is called after each finished turn."""
    build = TurnRequests.of(ctx)
    for turn in range(1, ctx.max_turns + 1):
        if not await _learner_turn(live, models.user_sim, ctx, build, turn):
            break
        if not await _assistant_turn(live, models.assistant(live.spec.assistant_model), ctx, build, turn):
            break
        if live.structured:
            if kernel is None or slot is None:
                raise RuntimeError(f"{live.spec.session_id}: a structured session without a kernel slot")
            if not await _state_turn(live, models.extractor, ctx, build, turn, kernel, slot):
                break
        else:
            live.record_baseline_turn(turn)
        on_turn()
        if not live.live:
            break
    if live.live:
        live.status = "done"
    return live


async def _ask_turn(live: LiveSession, model: ChatModel, request: ChatRequest, ctx: ShardContext, role: str,
                    parse: Callable[[str], ParseResult[Any]], estimate: int | None = None) -> Answer[Any]:
    """Ask ``role``'s part of the turn with the run's settings for it (temperature, token cap,
    attempts, repair temperature), charge it to the session, and fail the session by the answer's
    name when it has none to give."""
    settings = ctx.roles[role]
    answer = await ask(model, settings.apply(request), parse, attempts=settings.attempts, estimate=estimate,
                       repair_temperature=settings.repair_temperature)
    live.charge(role, answer.usage, answer.calls, answer.prompt_version, cache_hits=answer.cache_hits,
                truncations=answer.truncations)
    if answer.error is not None:
        live.fail(answer.error, answer.detail)
    return answer


async def _learner_turn(live: LiveSession, model: ChatModel, ctx: ShardContext, build: TurnRequests, turn: int) -> bool:
    """The learner's message; False when the conversation ends here."""
    answer = await _ask_turn(live, model, build.learner(live, live.transcript, turn), ctx, "user_sim", parse_user_turn)
    if not answer.ok:
        return False
    live.transcript.append(["user", answer.value.message.strip()])  # the parser refuses an empty one
    if answer.value.terminate and not live.structured:  # structured learners cannot end it (spec §8.1)
        live.status, live.stop_reason = "done", "user_terminated"
        return False
    return True


async def _assistant_turn(live: LiveSession, model: ChatModel, ctx: ShardContext, build: TurnRequests, turn: int) -> bool:
    """The tutor's reply; False when the session failed."""
    answer = await _ask_turn(live, model, build.assistant(live, live.transcript, turn), ctx, "assistant", plain_text)
    if answer.ok:
        live.transcript.append(["assistant", answer.value])
    return answer.ok


def plain_text(text: str) -> ParseResult[str]:
    """The tutor's reply as it is; an empty one is unreadable (``assistant_empty``)."""
    text = (text or "").strip()
    return ParseResult(value=text) if text else ParseResult(error="assistant_empty", detail="the reply was empty")


async def _state_turn(live: LiveSession, model: ChatModel, ctx: ShardContext, build: TurnRequests, turn: int,
                      kernel: StepBatcher, slot: Hashable) -> bool:
    """The extractor's report and the state update; False when the session failed."""
    answer = await _ask_turn(live, model, build.extractor(live, live.transcript, turn), ctx, "extractor",
                             lambda text: parse_signal_report(text, live.graph), estimate=extractor_budget(live.index.size))
    live.extractor_refusals += len(answer.refusals)
    if not answer.ok:  # nothing unreadable reaches the state
        return False
    live.extractor_repairs += len(answer.repairs)
    entries = list(answer.value.entries)
    step = await kernel.step(slot, entries)
    live.record_turn(turn, entries, step.counters, step.post, step.carries, repairs=answer.repairs,
                     refusals=answer.refusals)
    _apply_early_stop(live, ctx)
    return True


def _apply_early_stop(live: LiveSession, ctx: ShardContext) -> None:
    """In "stop" mode the conversation ends at the rules' stop (not before ``ctx.min_turns``);
    "virtual" only records it."""
    if ctx.early_stop != "stop" or live.trajectory is None or len(live.trajectory.metrics) < ctx.min_turns:
        return
    stop = early_stop(live.trajectory.stop_signals(), ctx.rules.termination)
    if stop is not None:
        live.status, live.stop_reason = "done", stop.reason


__all__ = ["plain_text", "run_session"]
