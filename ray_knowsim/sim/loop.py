"""One conversation's turn loop, as a coroutine that waits for nothing but its own answers.

A turn is the method's five steps, each one call in :func:`run_session`:

1. **learner**: the learner simulator's message;
2. **tutor**: the tutor's reply;
3. **extractor**: for a structured learner, the signal extractor's report on the exchange;
4. **state update**: the knowledge-state update (one kernel step, batched with whichever other
   sessions are ready: :mod:`ray_knowsim.sim.kernel_steps`), recorded as the turn's row;
5. **termination**: whether the conversation ends here. It is decided where it can happen: a
   baseline learner's own end right after its message (no reply is asked for), the rules' early
   stop after the state update (spec §8), ``max_turns`` after the last turn.

The next turn's request goes out as soon as this turn is read. Every request is built by
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

from ray_knowsim.llm.parse import ParseResult, SignalAnalysis, parse_signal_report, parse_user_turn
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.roles import extractor_budget  # the first try's budget; a truncated report is retried at the cap
from ray_knowsim.schema.outputs import UserTurn
from ray_knowsim.sim.ask import Answer, ask
from ray_knowsim.sim.kernel_steps import StepBatcher
from ray_knowsim.sim.requests import TurnRequests
from ray_knowsim.sim.rows import baseline_turn_row, state_turn_row
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
    if live.structured and (kernel is None or slot is None):
        raise RuntimeError(f"{live.spec.session_id}: a structured session without a kernel slot")
    build = TurnRequests.of(ctx)
    for turn in range(1, ctx.max_turns + 1):
        message = await learner(live, models.user_sim, ctx, build, turn)  # 1. learner
        if message is None:
            break
        if (reason := learner_ends(live, message)) is not None:  # 5. termination: the learner's own end
            live.finish(reason)
            break
        if not await tutor(live, models.assistant(live.spec.assistant_model), ctx, build, turn):  # 2. tutor
            break
        if live.structured:
            report = await extractor(live, models.extractor, ctx, build, turn)  # 3. extractor
            if report is None:
                break
            await update_state(live, kernel, slot, turn, report, run_id=ctx.run_id)  # type: ignore[arg-type]  # 4. state update
        else:
            live.turn_rows.append(baseline_turn_row(live, turn, run_id=ctx.run_id))  # a baseline learner has no state to update
        if (reason := rules_stop(live, ctx)) is not None:  # 5. termination: the rules' early stop
            live.finish(reason)
        on_turn()
        if not live.live:
            break
    if live.live:
        live.finish("max_turns")
    return live


# -- 1-3: the three requests of a turn ------------------------------------------------------------


async def learner(live: LiveSession, model: ChatModel, ctx: ShardContext, build: TurnRequests, turn: int) -> UserTurn | None:
    """The learner's message, added to the transcript; None when the session failed."""
    answer = await _ask(live, model, build.learner(live, live.transcript, turn), ctx, "user_sim", parse_user_turn)
    if not answer.ok:
        return None
    live.transcript.append(["user", answer.value.message.strip()])  # the parser refuses an empty one
    return answer.value


async def tutor(live: LiveSession, model: ChatModel, ctx: ShardContext, build: TurnRequests, turn: int) -> bool:
    """The tutor's reply, added to the transcript; False when the session failed."""
    answer = await _ask(live, model, build.assistant(live, live.transcript, turn), ctx, "assistant", plain_text)
    if answer.ok:
        live.transcript.append(["assistant", answer.value])
    return answer.ok


async def extractor(live: LiveSession, model: ChatModel, ctx: ShardContext, build: TurnRequests,
                    turn: int) -> Answer[SignalAnalysis] | None:
    """The extractor's report on the turn's exchange; None when the session failed (nothing
    unreadable reaches the state)."""
    answer = await _ask(live, model, build.extractor(live, live.transcript, turn), ctx, "extractor",
                        lambda text: parse_signal_report(text, live.graph), estimate=extractor_budget(live.index.size))
    return answer if answer.ok else None


def plain_text(text: str) -> ParseResult[str]:
    """The tutor's reply as it is; an empty one is unreadable (``assistant_empty``)."""
    text = (text or "").strip()
    return ParseResult(value=text) if text else ParseResult(error="assistant_empty", detail="the reply was empty")


async def _ask(live: LiveSession, model: ChatModel, request: ChatRequest, ctx: ShardContext, role: str,
               parse: Callable[[str], ParseResult[Any]], estimate: int | None = None) -> Answer[Any]:
    """Ask ``role``'s part of the turn with the run's settings for it (temperature, token cap,
    attempts, repair temperature), charge it to the session, and fail the session by the answer's
    name when it has none to give."""
    settings = ctx.roles[role]
    answer = await ask(model, settings.apply(request), parse, attempts=settings.attempts, estimate=estimate,
                       repair_temperature=settings.repair_temperature)
    live.ledger.charge(role, answer)
    if answer.error is not None:
        live.fail(answer.error, answer.detail)
    return answer


# -- 4: the state update --------------------------------------------------------------------------


async def update_state(live: LiveSession, kernel: StepBatcher, slot: Hashable, turn: int,
                       report: Answer[SignalAnalysis], run_id: str = "") -> None:
    """One kernel step on the report's signals (in the next flush, with the other sessions ready
    then), taken into the learner's knowledge and recorded as the turn's row (``repairs`` /
    ``refusals``: the extractor's drift this turn, see :mod:`ray_knowsim.sim.ask`)."""
    entries = list(report.value.entries)  # type: ignore[union-attr]
    update, metrics = (await kernel.step(slot, entries)).records()
    live.knowledge.advance(live.index, entries, update, metrics)
    live.turn_rows.append(state_turn_row(live, turn, entries, update, metrics, repairs=report.repairs,
                                         refusals=report.refusals, run_id=run_id))


# -- 5: termination -------------------------------------------------------------------------------


def learner_ends(live: LiveSession, message: UserTurn) -> str | None:
    """``user_terminated`` when a baseline learner ends the conversation with its message; a
    structured learner cannot (spec §8.1)."""
    return "user_terminated" if message.terminate and not live.structured else None


def rules_stop(live: LiveSession, ctx: ShardContext) -> str | None:
    """The rules' early stop of a structured learner after this turn, in "stop" mode only and not
    before ``ctx.min_turns`` ("virtual" only records it, in the session row)."""
    trajectory = live.knowledge.trajectory
    if ctx.early_stop != "stop" or not live.structured or len(trajectory.metrics) < ctx.min_turns:
        return None
    stop = trajectory.early_stop(ctx.rules)
    return stop.reason if stop is not None else None


__all__ = ["extractor", "learner", "learner_ends", "plain_text", "rules_stop", "run_session", "tutor", "update_state"]
