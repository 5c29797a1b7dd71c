"""Ask a model one request; read, repair and account the answer.

This is the only retry layer above the model clients, and it retries only what a new call can fix:

* **an unreadable answer** (the role's parser refuses it) gets ``attempts`` tries in all (the
  role's setting): each repair is the ORIGINAL request followed by the latest refused reply and
  the parser's precise complaint about it (:func:`ray_knowsim.prompts.repair.build_retry`), at
  the role's ``repair_temperature`` (:mod:`ray_knowsim.schema.roles`), so a model that drifts now
  and then is brought back rather than ending the session, and a repair never carries a pile of
  earlier refusals. With ``attempts: 1`` an unreadable answer is final;
* **a truncated answer** (``finish_reason == "length"``) is asked again ONCE with the role's whole
  token budget, on top of the tries above (a budget of ours, not a fault of the answer). The first
  call gets :func:`first_budget` tokens (half the role's ``max_tokens``, at least
  :data:`MIN_BUDGET`, or a caller's estimate such as the extractor's per-graph one), the bump the
  role's ``max_tokens`` (the cap). A truncated answer that still parses is accepted (a plain-text
  reply cut at the cap is still a reply) and counted in ``truncations``; one that does not parse at
  the cap fails as ``<role>_truncated``;
* **a transport failure** is NOT resent: the HTTP client already retried 429/5xx/timeouts with
  backoff, so what reaches us is final and becomes a named failure (``<role>_<reason>``).

So a request makes at most ``attempts + 1`` model calls. Every call gets its own sampling seed,
derived from the request's seed and the number of calls before it (:func:`attempt_seed`), so a
retry can differ from the refused answer and runs stay reproducible. Nothing a parser refused is
ever the answer: the caller gets a value only from an accepted reply.

Counting: ``calls`` are answers that came from a model, ``cache_hits`` answers served by the
response cache (no model involved), failed transport calls are neither; ``tries`` are the answers
judged (readable or not; the truncation bump's cut answer is not one). An answer is written to the
response cache (``ChatResponse.commit``) only once it was accepted untruncated here: refused,
truncated and failed answers never are.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Sequence, TypeVar

from ray_knowsim.llm.parse import ParseResult
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage, with_fields
from ray_knowsim.schema.roles import MIN_BUDGET, first_budget
from ray_knowsim.prompts.repair import build_retry
from ray_knowsim.sim.types import SEED_MODULUS

T = TypeVar("T")

_SEED_STEP = 0x9E3779B1  # odd, far from small multiples: attempt seeds never collide with turn seeds


def attempt_seed(seed: int | None, attempt: int) -> int | None:
    """Seed of attempt ``attempt`` (0-based) of a request seeded ``seed``: the request's own for the
    first attempt (so cache keys of first answers stay put), a deterministic derivation after."""
    if seed is None or attempt == 0:
        return seed
    return (seed + attempt * _SEED_STEP) % SEED_MODULUS


@dataclass
class Answer(Generic[T]):
    """The outcome of one request after its repairs and its truncation bump."""

    value: T | None = None
    text: str = ""
    error: str | None = None  # named failure, e.g. "extractor_invalid_signals", "user_sim_http_503"
    detail: str = ""
    usage: Usage = field(default_factory=Usage)
    calls: int = 0  # answers from a model
    cache_hits: int = 0  # answers from the response cache
    tries: int = 0  # answers judged readable or not (at most ``attempts``)
    truncations: int = 0  # answers cut by max_tokens
    refusals: list[str] = field(default_factory=list)  # "<error>: <detail>" per refused answer
    repairs: tuple[str, ...] = ()  # what the parser normalised to read the accepted answer
    warnings: tuple[str, ...] = ()  # what the parser accepted in it but found odd (e.g. a clamped ending turn)
    prompt_version: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


_PROVIDER_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def transport_error(role: str, response: ChatResponse) -> str:
    """``<role>_<kind>`` for a failed call, keeping an HTTP status's provider code when there is
    one (``assistant_http_400:context_length_exceeded``: the conversation outgrew the model, a
    model failure, where a bare 400 is the transport's; :func:`ray_knowsim.schema.failures.failure_class`)."""
    kind, _, detail = (response.error or "error").partition(":")
    reason = kind.strip().replace(" ", "_")
    if reason.startswith("http_") and _PROVIDER_CODE.fullmatch(detail.strip()):
        reason = f"{reason}:{detail.strip()}"
    return reason if reason.startswith(role) else f"{role}_{reason}"


@dataclass
class _Pending:
    original: ChatRequest  # the first try (its budget raised to the cap once bumped): what repairs repeat
    request: ChatRequest  # what is sent next
    cap: int
    sent: int = 0  # model calls so far (the next call's seed index)
    bumped: bool = False
    repair_temperature: float | None = None  # of the repair round (None: the request's own)


async def ask(
    model: ChatModel,
    request: ChatRequest,
    parse: Callable[[str], ParseResult[Any]],
    *,
    attempts: int,
    estimate: int | None = None,
    repair_temperature: float | None = None,
) -> Answer[Any]:
    """The answer to ``request`` as ``parse`` reads it. ``request.max_tokens`` is the cap;
    ``estimate`` (optional) the first attempt's budget; ``attempts`` the tries an unreadable answer
    gets; ``repair_temperature`` the temperature of the repairs (None: the request's own)."""
    answer: Answer[Any] = Answer(prompt_version=request.prompt_version)
    first = with_fields(request, max_tokens=first_budget(request.max_tokens, estimate))
    pending = _Pending(original=first, request=first, cap=request.max_tokens, repair_temperature=repair_temperature)
    limit = max(1, attempts)
    while True:
        sent = with_fields(pending.request, seed=attempt_seed(pending.request.seed, pending.sent))
        pending.sent += 1
        response = await model.generate(sent)
        result = parse(response.text) if response.error is None else None
        if not _settle(answer, pending, sent, response, result, limit):
            return answer


async def ask_all(
    model: ChatModel,
    requests: Sequence[ChatRequest],
    parse: Callable[[str, int], ParseResult[Any]],
    *,
    attempts: int,
    repair_temperature: float | None = None,
) -> list[Answer[Any]]:
    """:func:`ask` for every request at once (same order); ``parse(text, index)`` reads reply ``index``."""
    return list(
        await asyncio.gather(*(
            ask(model, r, lambda text, i=i: parse(text, i), attempts=attempts, repair_temperature=repair_temperature)
            for i, r in enumerate(requests)
        ))
    )  # fmt: skip


def _settle(
    a: Answer[Any], p: _Pending, sent: ChatRequest, response: ChatResponse, result: ParseResult[Any] | None, limit: int
) -> bool:
    """Book one response into ``a``; True when the request goes out again (``p`` updated)."""
    a.usage.add(response.usage)
    if result is None:  # the client already retried what a retry can fix
        a.error, a.detail = transport_error(sent.role, response), response.detail or response.error or ""
        return False
    if response.cached:
        a.cache_hits += 1
    else:
        a.calls += 1
    if response.finish_reason == "length":
        a.truncations += 1
        if not p.bumped and sent.max_tokens < p.cap:  # our budget was short: ask again with all of it
            p.bumped = True
            p.original = with_fields(p.original, max_tokens=p.cap)
            p.request = with_fields(p.request, max_tokens=p.cap)
            return True
        if not result.ok:
            a.tries += 1
            a.error = f"{sent.role}_truncated"
            a.detail = f"the answer was cut at max_tokens={sent.max_tokens} ({result.error}: {result.detail})"
            a.text = response.text
            return False
    a.tries += 1
    if result.ok:
        a.value, a.text, a.error, a.detail, a.repairs = result.value, response.text, None, "", result.repairs
        a.warnings = result.warnings
        if response.finish_reason != "length" and response.commit is not None:
            response.commit()
        return False
    a.refusals.append(f"{result.error}: {result.detail}")
    a.error, a.detail, a.text = result.error, result.detail, response.text
    if a.tries < limit:  # the original request, the latest refused reply, the latest complaint
        p.request = build_retry(p.original, response.text, result.detail or result.error or "", temperature=p.repair_temperature)
        return True
    return False


__all__ = ["MIN_BUDGET", "Answer", "ask", "ask_all", "attempt_seed", "first_budget", "transport_error"]
