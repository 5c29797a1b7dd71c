"""The ``http`` backend's check before spending: one ``GET {base_url}/models`` (or one tiny chat
request where there is no models list), read into a :class:`~ray_knowsim.backends.probe.Capacity`."""

from __future__ import annotations

import asyncio
import difflib
import json
from typing import Any

from ray_knowsim.backends.probe import (
    _SHOWN_MODELS,
    CONTEXT_FIELDS,
    PROBE_TIMEOUT_S,
    TINY_MAX_TOKENS,
    Capacity,
    _NoAnswer,
    _server_message,
    _usage,
)
from ray_knowsim.backends.limiter.client import LimiterUnavailable
from ray_knowsim.llm.limiter import RateLimiter, granted


async def probe_http(entry: Any, key: str, limiter: RateLimiter | None = None) -> Capacity:
    """One ``GET {base_url}/models`` (or one tiny chat request where there is no models list, under
    ``limiter``: the endpoint's quota, as every request of the run)."""
    import aiohttp

    from ray_knowsim.llm.http.credentials import Secret, auth_header

    secret = Secret.from_env(entry.api_key_env) if entry.api_key_env else None
    scrub = secret.scrub if secret is not None else (lambda t: t)
    headers = auth_header(entry.api_key_header, secret)
    cap = Capacity(where=entry.base_url, checked="models list")
    timeout = aiohttp.ClientTimeout(total=min(entry.timeout_s, PROBE_TIMEOUT_S), sock_connect=entry.connect_timeout_s)

    async def send(method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        last = ""
        for attempt in range(2):  # one more try for a dropped connection or a server error
            cap.requests += 1
            cap.chat_requests += path == "/chat/completions"
            try:
                async with session.request(method, entry.base_url + path, json=body, headers=headers) as resp:
                    raw = await resp.read()
                    if resp.status < 500 or attempt == 1:
                        return resp.status, raw
                    last = f"HTTP {resp.status}: {_server_message(raw, scrub)}"
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                last = scrub(f"{type(exc).__name__}: {exc}".strip().rstrip(":"))
                if attempt == 1:
                    raise _NoAnswer(last) from None
            await asyncio.sleep(1.0)
        raise _NoAnswer(last)

    def refused_key(status: int, raw: bytes) -> str:
        what = f"the key from ${entry.api_key_env}" if entry.api_key_env else "a request without a key (no api_key_env set)"
        return f"{entry.base_url} refused {what} (HTTP {status}: {_server_message(raw, scrub)})"

    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            status, raw = await send("GET", "/models")
            listed = _model_list(raw) if status == 200 else None
            if status in (401, 403):
                cap.error = refused_key(status, raw)
            elif listed is not None:
                _read_list(cap, listed, entry.model)
            elif status in (200, 404, 405, 501):  # no models list here: one tiny request instead
                cap.checked = "one tiny request"
                body = {"model": entry.model, "messages": [{"role": "user", "content": "Reply with OK."}],
                        entry.max_tokens_field: TINY_MAX_TOKENS, **entry.extra_body}
                async with granted(limiter, TINY_MAX_TOKENS):
                    status, raw = await send("POST", "/chat/completions", body)
                if status == 200:
                    prompt, completion, cached = _usage(raw)
                    cap.chat_prompt_tokens += prompt
                    cap.chat_completion_tokens += completion
                    cap.chat_cached_prompt_tokens += cached
                if status in (401, 403):
                    cap.error = refused_key(status, raw)
                elif status == 429:
                    cap.warning = f"{entry.base_url} rate-limited the test request (HTTP 429); the model was not checked"
                elif status >= 400:
                    served = "does not serve" if status == 404 else "refused a one-token test request for"
                    cap.error = f"{entry.base_url} {served} model {entry.model!r} (HTTP {status}: {_server_message(raw, scrub)})"
            elif status == 429:
                cap.warning = f"{entry.base_url} rate-limited GET /models (HTTP 429); the model was not checked"
            else:
                cap.error = f"{entry.base_url} answers GET /models with HTTP {status}: {_server_message(raw, scrub)}"
    except _NoAnswer as exc:
        cap.error = f"{entry.base_url} does not answer ({exc})"
    except LimiterUnavailable as exc:  # the endpoint's quota could not be reached: no request went out
        cap.error = f"{entry.base_url}: the run-wide rate limiter could not be reached ({exc})"
    return cap


def _model_list(raw: bytes) -> list[dict[str, Any]] | None:
    """The entries of an OpenAI-style models list (``{"data": [{"id": ...}, ...]}``), else None."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    data = body.get("data") if isinstance(body, dict) else body
    if not isinstance(data, list) or not all(isinstance(d, dict) and "id" in d for d in data):
        return None
    return data


def _read_list(cap: Capacity, listed: list[dict[str, Any]], model: str) -> None:
    ids = [str(d["id"]) for d in listed]
    if model not in ids:
        if len(ids) <= _SHOWN_MODELS:
            serves = ", ".join(ids) or "nothing"
        else:
            near = difflib.get_close_matches(model, ids, n=_SHOWN_MODELS, cutoff=0.3) or ids[:_SHOWN_MODELS]
            serves = f"{len(ids)} models; closest: {', '.join(near)}"
        cap.error = f"{cap.where} does not serve model {model!r} (it serves: {serves})"
        return
    entry = listed[ids.index(model)]
    for name in CONTEXT_FIELDS:
        value = entry.get(name)
        if isinstance(value, int) and value > 0:
            cap.max_model_len, cap.limit_source = value, f"{name} in its models list"
            cap.setting = ("start the vLLM server with --max-model-len {n}" if name == "max_model_len" else
                           "a model or provider with a {n}-token context")
            return


__all__ = ["probe_http"]
