"""Checks before spending: every model entry a run uses is asked one cheap question before the
first session starts, and what the run will send is compared with what the endpoint can hold.

Why: a wrong model name, a dead endpoint or a context too small for the prompts makes every
session fail — found out only after the first requests were paid for, and the run went on to the
end. Here they stop the run with ONE message naming each config entry at fault, before any
session starts and before anything is sent to a model (``ray-knowsim run --no-preflight`` skips
the checks, e.g. where the driver cannot reach the endpoint; the manifest records either way).

What each backend is asked (its ``probe``, registered with the backend: engine/backends.py):

* ``http``: ``GET {base_url}/models`` with the entry's credential header (the key from the
  environment variable the entry names; never logged, scrubbed from every message). The model
  must be in the list; its ``max_model_len`` (vLLM) or ``context_length`` (OpenRouter and others)
  is the context the run is compared with. An endpoint without a models list gets one tiny chat
  request (8 tokens) instead, which says whether the model is served but not its context.
* ``vllm`` (self-hosted engines, not started yet): the entry's ``max_model_len``, else the
  ``max_position_embeddings`` of a local model directory's ``config.json``; no engine is started
  for the check.
* ``offline``: nothing to ask.

The fit check takes, per role and model, the largest first-turn prompt of the run as
``run --dry-run`` renders and counts it (engine/estimate.py: the same renderers and token counts;
the character proxy ``ceil(chars / 4)`` where the backend has no tokenizer of its own), and adds
the tokens the role will ask for. Which findings stop the run, and why:

* **errors** (the run stops): the entry cannot be used (no answer, a refused key, a model not
  served); the largest first-turn prompt plus the first try's ``max_tokens`` exceeds the context
  (every such request is refused: the measured case is a 3.4–3.8k-token extractor prompt against
  a 4,096 context, 48 of 48 sessions ``extractor_http_400``); the prompt plus the role's cap, which
  a truncated answer is asked again with, exceeds it (that retry is certain to be refused and
  fails as an HTTP error, which a resume then reruns as an infrastructure failure). Both are
  certain from the first turn, which is rendered exactly.
* **warnings** (printed and recorded; the run goes on): what rests on estimates. A later turn's
  prompt (the transcript's growth is estimated from typical completion lengths), the judge's
  prompt (rendered over a synthetic transcript), a repair round (the refused answer appended), a
  timeout against the estimated latency (a prior of the backend's speed unless measured; a timed
  out request is retried by the client, then recorded as a failure that a resume reruns), and the
  first-try budget against the cap (schema/roles.py's warning, the same text as at config time).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ray_knowsim.engine.backends import BACKENDS
from ray_knowsim.engine.build import RunError
from ray_knowsim.engine.clients import used_model_keys
from ray_knowsim.llm.http.credentials import mask_secrets
from ray_knowsim.llm.http.response import error_message

#: the longest a probe waits for one answer (the entry's own timeout when that is shorter)
PROBE_TIMEOUT_S = 20.0
#: fields of a models-list entry that state the model's context length, in the order looked at
CONTEXT_FIELDS = ("max_model_len", "context_length", "context_window", "max_context_length")
#: completion tokens of the tiny request sent to an endpoint without a models list
TINY_MAX_TOKENS = 8
_SHOWN_MODELS = 8


class PreflightFailed(RunError):
    """The checks before spending found entries the run cannot use (the message names them)."""


@dataclass
class Capacity:
    """What one model entry's endpoint said about itself."""

    where: str  # the endpoint in words, for messages ("http://host/v1", "self-hosted vLLM /models/x")
    checked: str  # how: "models list", "one tiny request", "entry", or why not ("not checked: ...")
    max_model_len: int | None = None  # the context, prompt and completion together (None: unknown)
    limit_source: str = ""  # where max_model_len comes from
    error: str | None = None  # why the entry cannot be used; None: usable
    warning: str | None = None  # something odd that does not stop the run
    requests: int = 0  # HTTP requests this check sent
    chat_requests: int = 0  # of them, chat completions (the tiny request)


@dataclass(frozen=True)
class Finding:
    level: Literal["error", "warning"]
    where: str  # the config entry at fault ("models.tutor", "roles.extractor (models.sim)")
    message: str

    def line(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


@dataclass
class Preflight:
    """The outcome of the checks (recorded in the manifest's invocation)."""

    skipped: bool = False
    capacities: dict[str, Capacity] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warning"]

    def summary(self) -> str:
        if self.skipped:
            return "preflight skipped (--no-preflight): no endpoint or model name was checked"
        parts = [f"models.{k} {c.checked}" + (f", context {c.max_model_len:,}" if c.max_model_len else "")
                 for k, c in self.capacities.items()]
        return f"preflight: {'; '.join(parts) or 'nothing to check'} ({self.seconds:.1f}s)"

    def refusal(self) -> str:
        lines = "\n  ".join(f.line() for f in self.errors)
        also = "".join(f"\n  warning: {f.line()}" for f in self.warnings)
        return (f"the checks before spending refused the run; no session started and nothing was sent to a model:\n  {lines}{also}\n"
                "(--no-preflight skips these checks)")

    def to_manifest(self) -> dict[str, Any]:
        return {"skipped": self.skipped, "seconds": round(self.seconds, 2),
                "entries": {k: asdict(c) for k, c in self.capacities.items()},
                "errors": [f.line() for f in self.errors], "warnings": [f.line() for f in self.warnings]}


# ----------------------------------------------------------------------------- the checks


def check_before_spending(cfg: Any, plan: Any, inputs: Any, *, skip: bool = False) -> Preflight:
    """Probe every model entry the run uses, compare prompts and budgets with what each can hold;
    raises :class:`PreflightFailed` (one message, every entry at fault) on an error finding."""
    if skip:
        return Preflight(skipped=True)
    t0 = time.perf_counter()
    out = Preflight()
    probes = {}
    for key in used_model_keys(cfg):
        probe = BACKENDS.get(cfg.models[key].backend).probe
        if probe is not None:
            probes[key] = probe(cfg.models[key], key)
    out.capacities = _run(_gather(probes))
    for key, cap in out.capacities.items():
        if cap.error:
            out.findings.append(Finding("error", f"models.{key}", cap.error))
        if cap.warning:
            out.findings.append(Finding("warning", f"models.{key}", cap.warning))
    if any(c.max_model_len for c in out.capacities.values() if not c.error) or any(_timeout(cfg.models[k]) for k in out.capacities):
        from ray_knowsim.engine.estimate import estimate

        est = estimate(cfg, plan, inputs)  # the dry run's renders and counts: no second way of rendering
        out.findings += fit_findings(cfg, est, out.capacities)
        out.findings += timeout_findings(cfg, est)
    from ray_knowsim.engine.plan import largest_graph

    out.findings += [Finding("warning", "", w) for w in cfg.budget_warnings(largest_graph(inputs.graphs))]
    out.seconds = time.perf_counter() - t0
    if out.errors:
        raise PreflightFailed(out.refusal())
    return out


def _timeout(entry: Any) -> float | None:
    return getattr(entry, "timeout_s", None)


def _where(cfg: Any, role: str, key: str) -> str:
    if role != "assistant":
        return f"roles.{role} (models.{key})"
    conds = [cfg.condition_name(c) for c in cfg.conditions if (c.assistant or cfg.roles.assistant.model) == key]
    return f"assistant of {', '.join(conds)} (models.{key})"


def fit_findings(cfg: Any, est: Any, capacities: dict[str, Capacity]) -> list[Finding]:
    """Each role's largest prompt plus what it asks for, against each endpoint's context."""
    from ray_knowsim.schema.roles import first_try_tokens

    out = []
    for name, big in est.largest_prompts.items():
        role, key = name.split(":", 1)
        cap = capacities.get(key)
        if cap is None or cap.error or not cap.max_model_len:
            continue
        limit, s = cap.max_model_len, cfg.roles.settings(role)
        first = first_try_tokens(role, s.max_tokens, big.graph_size)
        where = _where(cfg, role, key)
        counted = est.per_role[role].token_counter if role in est.per_role else "estimated"
        context = f"the {limit:,}-token context of {cap.where} ({cap.limit_source})"
        prompt = big.first_turn
        if role == "judge":  # rendered over a synthetic transcript: an estimate, not a render of what will be sent
            if prompt + first > limit:
                out.append(Finding("warning", where, f"its prompt is estimated at ~{prompt:,} tokens ({counted}); with "
                                   f"max_tokens {first:,} that is {prompt + first:,}, above {context}: judge requests of long "
                                   "conversations may be refused"))
            continue
        head = f"its largest first-turn prompt is ~{prompt:,} tokens ({counted}; session {big.session_id})"
        if prompt + first > limit:
            room = limit - prompt
            fix = (f"or roles.{role}.max_tokens of at most {room:,} (a first try that small may be cut short)" if room > 0 else
                   "the prompt alone does not fit")
            out.append(Finding("error", where, f"{head}; with the first try's max_tokens {first:,} that is {prompt + first:,}, "
                               f"above {context}: every such request would be refused. Use a longer context "
                               f"(vLLM: --max-model-len), {fix}"))
            continue
        if s.attempts >= 2 and first < s.max_tokens and prompt + s.max_tokens > limit:
            out.append(Finding("error", where, f"{head}; a truncated answer is asked again with max_tokens {s.max_tokens:,} "
                               f"(roles.{role}.max_tokens), {prompt + s.max_tokens:,} in all, above {context}: that retry would be "
                               f"refused. Set roles.{role}.max_tokens to at most {limit - prompt:,}, or use a longer context"))
            continue
        if s.attempts >= 2 and prompt + 2 * first > limit:
            out.append(Finding("warning", where, f"{head}; a repair round appends the refused answer (up to {first:,} tokens) and "
                               f"asks for {first:,} more: ~{prompt + 2 * first:,}, above {context}"))
        if big.last_turn + first > limit:
            out.append(Finding("warning", where, f"its prompt is estimated to reach ~{big.last_turn:,} tokens by the last turn; "
                               f"with max_tokens {first:,} that is above {context}: late turns of long conversations may be "
                               "refused"))
    return out


def timeout_findings(cfg: Any, est: Any) -> list[Finding]:
    """Each role's timeout against the dry run's latency per request (measured by ``--from-run``
    runs, else the backend's prior speed): warnings only, latency is an estimate."""
    from ray_knowsim.engine.estimate import request_latency_s
    from ray_knowsim.schema.roles import first_try_tokens

    measured = est.assumptions.get("completion_per_request", {}).get("latency_s", {}) or {}
    out = []
    for role, e in est.per_role.items():
        for key in e.models:
            entry = cfg.models[key]
            timeout = _timeout(entry)
            if not timeout or not e.requests:
                continue
            profile = BACKENDS.get(entry.backend).profile
            mean = measured.get(role) or request_latency_s(profile, e.completion_tokens_per_request)
            source = "measured by an earlier run" if role in measured else (
                f"estimated at {profile.tokens_per_s:g} tok/s after {profile.latency_s:g}s, a prior for this backend")
            where = f"{_where(cfg, role, key)} timeout_s {timeout:g}"
            first = first_try_tokens(role, cfg.roles.settings(role).max_tokens,
                                     est.largest_prompts.get(f"{role}:{key}").graph_size if f"{role}:{key}" in est.largest_prompts else None)
            full = request_latency_s(profile, first)
            if mean > timeout / 2:
                out.append(Finding("warning", where, f"a request takes ~{mean:.0f}s on average ({source}): "
                                   f"{'most' if mean > timeout else 'the slower'} requests would time out and be retried; "
                                   f"raise models.{key}.timeout_s"))
            elif full > timeout:
                out.append(Finding("warning", where, f"a first try that uses its whole budget ({first:,} tokens) takes ~{full:.0f}s "
                                   f"({source}), above the timeout; raise models.{key}.timeout_s"))
    return out


# ----------------------------------------------------------------------------- running probes


async def _gather(probes: dict[str, Any]) -> dict[str, Capacity]:
    got = await asyncio.gather(*probes.values())
    return dict(zip(probes, got))


def _run(coro: Any) -> Any:
    """Run ``coro`` to completion from sync code, also when the caller's thread runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class _NoAnswer(Exception):
    """The endpoint could not be reached or did not answer in time."""


def _server_message(raw: bytes, scrub: Any) -> str:
    """The server's reason (the HTTP client's own reading of an error body), scrubbed and with
    anything credential-shaped masked, short."""
    return mask_secrets(scrub(error_message(raw)))[:240]


async def probe_http(entry: Any, key: str) -> Capacity:
    """One ``GET {base_url}/models`` (or one tiny chat request where there is no models list)."""
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
                status, raw = await send("POST", "/chat/completions", body)
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
            return


async def probe_vllm(entry: Any, key: str) -> Capacity:
    """The self-hosted engine's context from its entry or its local model directory (no engine starts)."""
    vcfg = entry.vllm_config()
    cap = Capacity(where=f"self-hosted vLLM {vcfg.model}", checked="entry")
    limit = vcfg.engine_args().get("max_model_len")
    if limit:
        cap.max_model_len, cap.limit_source = int(limit), "the entry's max_model_len"
        return cap
    found = _local_context(vcfg.model)
    if found:
        cap.max_model_len, cap.limit_source = found, "max_position_embeddings in the model's config.json"
        cap.checked = "model config.json"
    else:
        cap.checked = "not checked: no max_model_len in the entry and no local config.json"
    return cap


def _local_context(model: str) -> int | None:
    path = Path(os.path.expanduser(model)) / "config.json"
    try:
        conf = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for part in (conf, conf.get("text_config") or {}):
        value = part.get("max_position_embeddings") if isinstance(part, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None


__all__ = ["CONTEXT_FIELDS", "Capacity", "Finding", "Preflight", "PreflightFailed", "check_before_spending", "fit_findings",
           "probe_http", "probe_vllm", "timeout_findings"]
