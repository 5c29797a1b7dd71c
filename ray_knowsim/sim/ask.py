"""Send one role's requests for many sessions as one batch, with bounded retries and parsing.

A reply that fails is retried: a transport error resends the same request, an unreadable reply is
asked again once with the validation error (``build_retry``), and what still fails after the
role's attempts is returned as an explicit, named failure — never replaced by a default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Sequence, TypeVar

from ray_knowsim.llm.parse import ParseResult
from ray_knowsim.prompts.repair import build_retry
from ray_knowsim.model.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.llm.protocol import ChatModel

T = TypeVar("T")


@dataclass
class Answer(Generic[T]):
    """The outcome of one request after retries."""

    value: T | None = None
    text: str = ""
    error: str | None = None  # named failure, e.g. "extractor_invalid_json", "user_sim_http_503"
    detail: str = ""
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    prompt_version: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


def _transport_error(role: str, response: ChatResponse) -> str:
    reason = (response.error or "error").split(":")[0].strip().replace(" ", "_")
    return reason if reason.startswith(role) else f"{role}_{reason}"


async def ask_batch(
    model: ChatModel,
    requests: Sequence[ChatRequest],
    parse: Callable[[str, int], ParseResult[Any]],
    *,
    attempts: int,
) -> list[Answer[Any]]:
    """Answer every request (same order). ``parse(text, index)`` reads reply ``index``."""
    answers = [Answer(prompt_version=r.prompt_version) for r in requests]
    current = list(requests)
    pending = list(range(len(requests)))
    repaired: set[int] = set()
    for attempt in range(max(1, attempts)):
        if not pending:
            break
        responses = await model.complete([current[i] for i in pending])
        retry: list[int] = []
        for i, response in zip(pending, responses):
            a = answers[i]
            a.calls += 1
            a.usage.add(response.usage)
            if response.error is not None:
                a.error, a.detail = _transport_error(requests[i].role, response), response.error
                retry.append(i)
                continue
            result = parse(response.text, i)
            if result.ok:
                a.value, a.text, a.error, a.detail = result.value, response.text, None, ""
                continue
            a.error, a.detail, a.text = result.error, result.detail, response.text
            if i not in repaired:  # one repair round trip carrying the validation error
                current[i] = build_retry(requests[i], response.text, result.detail or result.error or "")
                repaired.add(i)
            retry.append(i)
        pending = retry
    return answers
