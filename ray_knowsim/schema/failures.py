"""Failure classes of a session: was it the infrastructure, or the model under test?

A failed session names its error as ``<role>_<reason>`` (``assistant_http_503``,
``extractor_invalid_json``, ``user_sim_truncated``, ...). :func:`failure_class` sorts every error
into one of two classes, and the class decides what a resume does with the session:

* ``"infra"`` — the run could not ask or hear the model: a transport error left after the HTTP
  client's own retries (HTTP status, timeout, connection, an unreadable response body), a rate
  limit wait too long, the run-wide limiter failing, a vLLM engine or replica dead, a worker or
  node lost. Nothing about the model's answer is known, so the session is rerun by default: a
  rerun measures the same thing.
* ``"model"`` — the model answered and the answer is the result: still unreadable after the
  role's retry budget, truncated at the token cap, empty, refused, or a conversation that outgrew
  the model's context. Rerunning these until they pass would keep the successes of a flaky tutor
  and drop its failures (survivorship bias, different per condition), so they are rerun only when
  asked (``ray-knowsim run --rerun-model-failures``), and each rerun is recorded on the row.

An error this function does not recognise is a ``"model"`` failure: kept as a result rather than
rerun behind the user's back. The classes are pure data (no I/O): the engine, the tables and the
viewer share this one function.
"""

from __future__ import annotations

import re
from typing import Literal

from ray_knowsim.schema.results import ERROR_DETAIL_CHARS, ROLES

FailureClass = Literal["infra", "model"]
INFRA: FailureClass = "infra"
MODEL: FailureClass = "model"
FAILURE_CLASSES: tuple[FailureClass, ...] = (INFRA, MODEL)

#: roles whose name prefixes an error code (``<role>_<reason>``)

#: reasons of a MODEL failure: the answer arrived and is the result (checked before the infra
#: patterns: ``http_400:context_length_exceeded`` is the conversation's size, not the transport)
_MODEL = re.compile(
    r"^(truncated|empty|invalid_[a-z_]+|refusal|vllm_prompt_too_long|"
    r"http_4\d\d:(context_length_exceeded|string_above_max_length))$"
)
#: reasons of an INFRA failure: no answer could be obtained, for reasons outside the model
_INFRA = re.compile(
    r"^(http_\d{3}(:.*)?|timeout|connection|bad_request|bad_response|rate_limited_long|limiter_error|"
    r"vllm_(no_replica|replica_died|engine_dead|request_failed|chat_template_error)|"
    r"offline_[a-z_]+|worker_lost|node_lost)$"
)
#: session-level errors (no role prefix)
_SESSION_MODEL = frozenset({"empty_user_message"})


def error_kind(error: str | None) -> str | None:
    """The named failure of a session's error text, its details dropped (``extractor_http_400`` of
    ``extractor_http_400: max_tokens=8192 cannot be ...``): what counts, groups and filters of
    failures go by (the viewer, the progress board, ``engine.fail_fast``). None for no error."""
    if error is None:
        return None
    return str(error).split(":", 1)[0].strip() or "error"


def error_text(error: str | None, error_detail: str | None = None) -> str:
    """Why a session failed, in words, for a page or a table: the row's ``error_detail`` (the
    server's message, the parser's complaint), else what follows the kind in the error text itself
    (``assistant_http_404: The model ... does not exist``: rows written before ``error_detail``
    existed), else ""."""
    if error_detail and str(error_detail).strip():
        return str(error_detail).strip()
    if error is None or ":" not in str(error):
        return ""
    return str(error).split(":", 1)[1].strip()


def bounded_detail(text: str | None, limit: int = ERROR_DETAIL_CHARS) -> str | None:
    """``text`` on one line and at most ``limit`` characters (cut with an ellipsis): a session row
    keeps the reason of its failure, never a whole response body. None or blank stays None."""
    if text is None:
        return None
    flat = " ".join(str(text).split())
    if not flat:
        return None
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def error_reason(error_code: str) -> str:
    """The reason part of ``<role>_<reason>[: detail]`` (the role stripped, details dropped)."""
    code = error_code.strip().split(" ", 1)[0].rstrip(":")  # "<code>: detail" -> "<code>"
    for role in ROLES:
        if code.startswith(role + "_"):
            return code[len(role) + 1:]
    return code


def failure_class(error_code: str | None) -> FailureClass | None:
    """``"infra"`` or ``"model"`` for a failed session's error; None for no error (an ok session)."""
    if error_code is None or not str(error_code).strip():
        return None
    code = str(error_code).strip()
    if code in _SESSION_MODEL:
        return MODEL
    reason = error_reason(code)
    if _MODEL.match(reason):
        return MODEL
    if _INFRA.match(reason):
        return INFRA
    return MODEL


def session_failure_class(recorded: str | None, error: str | None) -> str:
    """A failed session's class: the one its row (or marker) recorded, else its error's
    (:func:`failure_class`; rows written before the column existed), else ``model``."""
    return recorded or failure_class(error) or MODEL


__all__ = ["FAILURE_CLASSES", "INFRA", "MODEL", "FailureClass", "bounded_detail", "error_kind", "error_reason", "error_text",
           "failure_class", "session_failure_class"]
