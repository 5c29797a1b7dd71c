"""Reading a chat-completions answer into a :class:`ChatResponse`: the error code of a non-2xx, and
of a 2xx the choice's content (content parts joined, ``<think>`` blocks and split-out reasoning
kept out of ``ChatResponse.text``), the finish reason, a refusal and the usage (reasoning tokens
estimated from the text when the server does not count them). What the model client would
otherwise mix with its transport.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ray_knowsim.json_exact import loads_as_json
from ray_knowsim.schema.chat import ChatResponse, Usage, usage_from_wire
from ray_knowsim.llm.http.credentials import Secret, mask_secrets
from ray_knowsim.llm.retry import is_retryable_status
from ray_knowsim.llm.thinking import strip_thinking

log = logging.getLogger(__name__)

_ERROR_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: characters of a server's error message kept in ChatResponse.detail
MESSAGE_CHARS = 400
def decode_body(raw: bytes) -> Any:
    """A 2xx body decoded exactly as ``json.loads`` decodes it (:func:`ray_knowsim.json_exact.loads_as_json`:
    ~3.5 us for a chat answer of a few KB against ~7.5 us for json, once per request), or None
    when it is no JSON."""
    try:
        return loads_as_json(raw)
    except ValueError:
        return None


class TransportFailure(Exception):
    """One failed attempt, with the short reason recorded in ChatResponse.error.

    ``sent``: the server may have received the request (and may be computing or billing it);
    ``reached``: the model answered (a 2xx came back)."""

    def __init__(self, reason: str, retryable: bool, retry_after_s: float | None = None, *,
                 sent: bool = True, reached: bool = False, usage: Usage | None = None, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail  # the server's words (status and message), secrets masked: ChatResponse.detail
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.sent = sent
        self.reached = reached
        self.usage = usage


class ResponseReader:
    """Reads the answers of one model (``name``), scrubbing its key from all it logs; warns once per
    model when the server reports no usage or no reasoning-token count."""

    def __init__(self, name: str, secret: Secret | None) -> None:
        self.name = name
        self._secret = secret
        self._warned_no_usage = False
        self._warned_reasoning_estimate = False

    def _scrub(self, text: str) -> str:
        return self._secret.scrub(text) if self._secret is not None else text

    def error(self, status: int, raw: bytes, retry_after: float | None) -> TransportFailure:
        """The failed attempt of a non-2xx answer: ``http_<status>[:<provider error code>]``."""
        reason = f"http_{status}"
        code = _error_code(raw)
        if code and self._scrub(code) != code:
            code = None  # a server echoing the key as an error code: never record it
        if code:
            reason = f"{reason}:{code}"
        detail = mask_secrets(self._scrub(raw[:300].decode("utf-8", "replace")))
        level = logging.DEBUG if is_retryable_status(status) else logging.WARNING
        log.log(level, "%s HTTP %d: %s", self.name, status, detail)
        message = clipped(mask_secrets(self._scrub(error_message(raw))), MESSAGE_CHARS)
        return TransportFailure(reason, is_retryable_status(status), retry_after,
                                detail=f"HTTP {status}: {message}" if message else f"HTTP {status}")

    def read(self, raw: bytes) -> ChatResponse:
        """The ChatResponse of a 2xx body; a failed ``bad_response`` attempt when it has no answer."""
        data = decode_body(raw)
        usage = self._usage(data.get("usage")) if isinstance(data, dict) else None
        try:
            choice = data["choices"][0]  # type: ignore[index]
            message = choice.get("message") or {}
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (KeyError, IndexError, TypeError, AttributeError):
            log.debug("%s: unreadable 2xx body: %s", self.name, self._scrub(raw[:300].decode("utf-8", "replace")))
            raise TransportFailure("bad_response", retryable=True, reached=True, usage=usage) from None
        if usage is None:
            usage = self._usage(None)
        finish_reason = choice.get("finish_reason")
        finish_reason = finish_reason if isinstance(finish_reason, str) else None
        content = message.get("content")
        if content is None and message.get("refusal"):
            return ChatResponse(text="", usage=usage, error="refusal", finish_reason=finish_reason)
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        text, thought = strip_thinking(content if isinstance(content, str) else "")
        for field in ("reasoning_content", "reasoning"):  # servers that split reasoning out
            extra = message.get(field)
            if isinstance(extra, str) and extra:
                thought = f"{thought}\n{extra}" if thought else extra
        if thought and not usage.reasoning_tokens:
            # the server did not count them: estimate (~4 characters per token), never above
            # what it says it generated
            usage.reasoning_tokens = -(-len(thought) // 4)
            if usage.completion_tokens:
                usage.reasoning_tokens = min(usage.reasoning_tokens, usage.completion_tokens)
            if not self._warned_reasoning_estimate:
                self._warned_reasoning_estimate = True
                log.info("%s: reasoning tokens not reported by the server; estimated from the text", self.name)
        return ChatResponse(text=text, usage=usage, finish_reason=finish_reason)

    def _usage(self, raw: Any) -> Usage:
        if isinstance(raw, dict):
            try:
                return usage_from_wire(raw)
            except (TypeError, ValueError, AttributeError) as exc:
                if not self._warned_no_usage:
                    self._warned_no_usage = True
                    log.warning("%s: unreadable usage block (%s: %s); token counts are recorded as 0",
                                self.name, type(exc).__name__, exc)
                return Usage()
        if not self._warned_no_usage:
            self._warned_no_usage = True
            log.warning("%s: response has no usage; token counts are recorded as 0", self.name)
        return Usage()


def clipped(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word's end, the cut marked with "...": a
    server's hint read as cut, not as a sentence that ends in the middle."""
    if len(text) <= limit:
        return text
    head = text[: limit - 3]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "..."


def error_message(raw: bytes) -> str:
    """The server's message of an error body: OpenAI's ``error.message`` (vLLM, most proxies),
    a plain ``message`` / ``detail`` / string ``error``, else the body's text; on one line."""
    text = raw[:4000].decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        for value in ((err.get("message") if isinstance(err, dict) else err), data.get("message"), data.get("detail")):
            if isinstance(value, str) and value.strip():
                text = value
                break
    return " ".join(text.split())


def _error_code(raw: bytes) -> str | None:
    """The provider's short error code (OpenAI ``error.code``/``error.type``), if it is a plain id."""
    try:
        err = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        return None
    if not isinstance(err, dict):
        return None
    for field in ("code", "type"):
        value = err.get(field)
        if isinstance(value, str) and _ERROR_CODE.match(value):
            return value
    return None


__all__ = ["error_message", "ResponseReader", "TransportFailure"]
