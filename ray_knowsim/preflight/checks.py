"""Checks before spending: every model entry a run uses is asked one cheap question before the
first session starts, and what the run will send is compared with what the endpoint can hold.

Why: a wrong model name, a dead endpoint or a context too small for the prompts makes every
session fail — found out only after the first requests were paid for, and the run went on to the
end. Here they stop the run with ONE message naming each config entry at fault, before any
session starts and before anything is sent to a model (``ray-knowsim run --no-preflight`` skips
the checks, e.g. where the driver cannot reach the endpoint; the manifest records either way).

What each backend is asked (its ``probe``, registered with the backend: backends/registry.py):

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
``run --dry-run`` renders and counts it (preflight/estimate.py: the same renderers and token counts;
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
import contextlib
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Literal

from ray_knowsim.backends.registry import BACKENDS
from ray_knowsim.plan.build import RunError
from ray_knowsim.backends.model_set import used_model_keys
from ray_knowsim.backends.http.probe import probe_http
from ray_knowsim.backends.probe import PROBE_TIMEOUT_S, Capacity, _usage
from ray_knowsim.backends.vllm.probe import probe_vllm
from ray_knowsim.backends.limiter.client import LimiterUnavailable
from ray_knowsim.llm.limiter import granted


class PreflightFailed(RunError):
    """The checks before spending found entries the run cannot use (the message names them)."""


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
    # why they were skipped when not for --no-preflight: an adaptive run's later rounds (its
    # first round checked the same endpoints), so the terminal and manifest never blame a flag
    # the user did not give
    reason: str | None = None
    capacities: dict[str, Capacity] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    # the dry run's estimate the fit checks made (None: none needed): the run compares its cost
    # with it while it runs (run/cost_watch.py) instead of estimating again; not in the manifest
    estimate: Any = field(default=None, repr=False, compare=False)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warning"]

    def summary(self) -> str:
        if self.skipped and self.reason:
            return f"checks before spending: {self.reason}"
        if self.skipped:
            return "preflight skipped (--no-preflight): no endpoint or model name was checked"
        parts = [f"models.{k} {c.checked}" + (f", context {c.max_model_len:,}" if c.max_model_len else "")
                 + (f", {c.tokens_per_s:.0f} tok/s per request (speed probe)" if c.tokens_per_s else "")
                 for k, c in self.capacities.items()]
        return f"preflight: {'; '.join(parts) or 'nothing to check'} ({self.seconds:.1f}s)"

    def refusal(self) -> str:
        lines = "\n  ".join(f.line() for f in self.errors)
        also = "".join(f"\n  warning: {f.line()}" for f in self.warnings)
        return (f"the checks before spending refused the run; no session started and nothing was sent to a model:\n  {lines}{also}\n"
                "(--no-preflight skips these checks)")

    def chat_spend(self) -> dict[str, dict[str, int]]:
        """What the checks' chat requests (the tiny request, the speed probe) spent, per model key:
        the run's spend journal records it apart (io/spend.py: ``checks``)."""
        return {k: {"requests": c.chat_requests, "prompt_tokens": c.chat_prompt_tokens, "completion_tokens": c.chat_completion_tokens,
                    "cached_prompt_tokens": c.chat_cached_prompt_tokens}
                for k, c in self.capacities.items() if c.chat_requests}

    def to_manifest(self) -> dict[str, Any]:
        return {"skipped": self.skipped, **({"reason": self.reason} if self.reason else {}), "seconds": round(self.seconds, 2),
                "entries": {k: asdict(c) for k, c in self.capacities.items()},
                "errors": [f.line() for f in self.errors], "warnings": [f.line() for f in self.warnings]}


# ----------------------------------------------------------------------------- the checks


def check_before_spending(cfg: Any, plan: Any, inputs: Any, *, skip: bool | str = False,
                          pools: dict[str, Any] | None = None) -> Preflight:
    """Probe every model entry the run uses, compare prompts and budgets with what each can hold;
    raises :class:`PreflightFailed` (one message, every entry at fault) on an error finding.
    ``skip``: True for --no-preflight, a string to skip for that reason (e.g. "done in round 1").
    ``pools``: the run's (model key -> what it holds on the cluster), where the lease the checks
    take on an endpoint's cluster-wide limiter stays for the run; without it the lease ends here."""
    from ray_knowsim.plan.sessions import largest_graph

    budgets = cfg.budget_warnings(largest_graph(inputs.graphs))
    if skip:  # the checks are skipped; the budget warnings rest on the config alone
        return Preflight(skipped=True, reason=skip if isinstance(skip, str) else None,
                         findings=[Finding("warning", "", w) for w in budgets])
    t0 = time.perf_counter()
    out = Preflight()
    with endpoint_quotas(cfg, used_model_keys(cfg), pools) as quotas:  # the checks' requests count as the run's
        out.capacities = _run(_probe_all(cfg, quotas))
        _read_capacities(cfg, plan, inputs, out, budgets, quotas)
    out.seconds = time.perf_counter() - t0
    if out.errors:
        raise PreflightFailed(out.refusal())
    return out


def _read_capacities(cfg: Any, plan: Any, inputs: Any, out: Preflight, budgets: list[str], quotas: dict[str, Any]) -> None:
    """The findings from what the probes said: usable entries, fits, and (when nothing refused
    the run) the timeouts against the speed the probe measured."""
    for key, cap in out.capacities.items():
        if cap.error:
            out.findings.append(Finding("error", f"models.{key}", cap.error))
        if cap.warning:
            out.findings.append(Finding("warning", f"models.{key}", cap.warning))
    if any(c.max_model_len for c in out.capacities.values() if not c.error) or any(_timeout(cfg.models[k]) for k in out.capacities):
        from ray_knowsim.preflight.estimate import estimate

        est = out.estimate = estimate(cfg, plan, inputs)  # the dry run's renders and counts: no second way of rendering
        out.findings += fit_findings(cfg, est, out.capacities)
        judged = judged_roles(est, out.capacities)  # their verdict says what the budget warning would
        budgets = [w for w in budgets if not any(w.startswith(f"roles.{r}.max_tokens ") for r in judged)]
        if not any(f.level == "error" for f in out.findings):  # a refused run is not timed (the probe is a request)
            out.findings += timeout_findings(cfg, est, plan, measure_speeds(cfg, plan, out.capacities, quotas))
    out.findings += [Finding("warning", "", w) for w in budgets]


@contextlib.contextmanager
def endpoint_quotas(cfg: Any, keys: Any, pools: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """The limiter of each rate-limited HTTP entry among ``keys``, held for the checks: the
    cluster-wide one when Ray is up (what the run's sessions and every other run on the cluster
    use), else one in this process. A quota is the provider's, so the checks' chat requests (the
    tiny request, the speed probe) wait for it like any request of the run. The lease on a
    cluster-wide one goes into ``pools`` (the run's models take it from there: one lease a run)."""
    from ray_knowsim.backends.limiter.actor import LimiterLease, SharedLimiter, create_shared_limiter

    quotas: dict[str, Any] = {}
    with contextlib.ExitStack() as held:
        for key in keys:
            entry = cfg.models[key]
            if getattr(entry, "backend", None) != "http":
                continue
            try:
                limiter = create_shared_limiter(entry)
            except ValueError as exc:  # another run on the cluster holds this endpoint's quota with other limits
                raise PreflightFailed(f"the checks before spending refused the run:\n  models.{key}: {exc}") from None
            if limiter is None:
                continue
            quotas[key] = limiter
            if not isinstance(limiter, SharedLimiter):
                continue
            if pools is None:  # alive while the checks use it
                held.callback(limiter.hold(label=f"checks models.{key}").shutdown)
            elif not isinstance(pools.get(key), LimiterLease):
                pools[key] = limiter.hold(label=f"model {key}")
        yield quotas


async def _probe_all(cfg: Any, quotas: dict[str, Any]) -> dict[str, Capacity]:
    probes = {}
    for key in used_model_keys(cfg):
        probe = BACKENDS.get(cfg.models[key].backend).probe
        if probe is not None:
            probes[key] = probe(cfg.models[key], key, quotas.get(key))
    try:
        return await _gather(probes)
    finally:
        await _close_shares(quotas)


async def _close_shares(quotas: dict[str, Any]) -> None:
    """This event loop's share of each limiter back (the loop ends with the probe)."""
    for limiter in quotas.values():
        await limiter.aclose()


def _timeout(entry: Any) -> float | None:
    return getattr(entry, "timeout_s", None)


def _where(cfg: Any, role: str, key: str) -> str:
    if role != "assistant":
        return f"roles.{role} (models.{key})"
    conds = [cfg.condition_name(c) for c in cfg.conditions if (c.assistant or cfg.roles.assistant.model) == key]
    return f"assistant of {', '.join(conds)} (models.{key})"


#: how a context is named where the probe does not say how it is set
DEFAULT_SETTING = "a context of {n} tokens"
#: contexts servers are commonly started with; a verdict names the smallest that holds what it needs
COMMON_CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)


def common_context(tokens: int) -> int:
    """The smallest common context length (a power of two) that holds ``tokens``."""
    return next((c for c in COMMON_CONTEXTS if c >= tokens), 1 << max(0, tokens - 1).bit_length())


def largest_cap_with_retry(role: str, room: int, n_ius: int | None) -> int | None:
    """The largest ``max_tokens`` at most ``room`` whose first try leaves a truncation retry
    (first try below the cap), or None when no cap within ``room`` does."""
    from ray_knowsim.schema.roles import first_try_tokens

    if room <= 1:
        return None
    return room if first_try_tokens(role, room, n_ius) < room else None


def context_verdict(role: str, prompt: int, cap: int, attempts: int, n_ius: int | None, limit: int,
                    setting: str) -> tuple[Literal["error", "warning"], str] | None:
    """ONE verdict for a role's largest first-turn prompt (``prompt`` tokens, rendered exactly)
    against a ``limit``-token context, or None when everything it asks for fits with a retry.

    What it needs: the first try (prompt + its budget) and, where a truncated answer is asked
    again (``attempts`` >= 2 and a first try below the cap), that retry at the whole cap. A
    verdict says what does not fit and both ways out that work together with the rest of the
    role's settings: the smallest context (and the common length holding it) and the largest
    ``max_tokens`` at this context that keeps the retry; when no cap does, it says so, so that
    no message advises a cap another one then calls too small. ``setting``: where the context is
    set (the entry's ``max_model_len``, a server flag)."""
    from ray_knowsim.schema.roles import budget_warning, first_try_tokens

    first = first_try_tokens(role, cap, n_ius)
    retry = attempts >= 2 and first < cap
    need = prompt + (cap if retry else first)
    room = limit - prompt
    best = largest_cap_with_retry(role, room, n_ius) if attempts >= 2 else (room if room > 0 else None)
    to_context = f"a context of at least {need:,} tokens ({setting.format(n=common_context(need))})"
    if need <= limit:
        if attempts < 2 or retry:
            return None
        # it fits, but the first try already asks for the cap: an answer cut there is not asked again
        lost = budget_warning(role, cap, n_ius) or f"roles.{role}.max_tokens {cap:,} leaves no truncation retry"
        lost = lost.split("; set max_tokens", 1)[0]
        if best is not None and best > cap:
            return "warning", f"{lost}; at this context roles.{role}.max_tokens {best:,} keeps the retry"
        full = prompt + 2 * first_try_tokens(role, 10**9, n_ius)
        return "warning", (f"{lost}; no max_tokens keeps the retry within {limit:,} tokens: that needs a context of at least "
                           f"{full:,} ({setting.format(n=common_context(full))})")
    if room <= 0:
        return "error", f"the prompt alone does not fit: use {to_context}"
    parts = [f"with the first try's max_tokens {first:,} that is {prompt + first:,}"] if prompt + first > limit else [
        f"a truncated answer is asked again with max_tokens {cap:,} (roles.{role}.max_tokens), {prompt + cap:,} in all"]
    refused = "every such request would be refused" if prompt + first > limit else "that retry would be refused"
    verdict = f"{parts[0]}, above the {limit:,}-token context: {refused}. Use {to_context}"
    if best is not None:
        kept = f"first try {first_try_tokens(role, best, n_ius):,}, retry {best:,}" if attempts >= 2 else "no retry"
        verdict += f", or set roles.{role}.max_tokens to at most {best:,} ({kept})"
    else:
        size = f" for a {n_ius}-IU graph" if role == "extractor" and n_ius is not None else ""
        verdict += (f"; no roles.{role}.max_tokens fits this context with a truncation retry (the first try{size} alone asks "
                    f"for {first_try_tokens(role, 10**9, n_ius):,} tokens, {room:,} are left after the prompt)")
    return "error", verdict


def judged_roles(est: Any, capacities: dict[str, Capacity]) -> set[str]:
    """The roles whose every model's context is known: their context verdict covers their budget."""
    out: dict[str, bool] = {}
    for name in est.largest_prompts:
        role, key = name.split(":", 1)
        cap = capacities.get(key)
        known = cap is not None and not cap.error and bool(cap.max_model_len) and role != "judge"
        out[role] = out.get(role, True) and known
    return {r for r, known in out.items() if known}


def fit_findings(cfg: Any, est: Any, capacities: dict[str, Capacity]) -> list[Finding]:
    """Each role's largest prompt plus what it asks for, against each endpoint's context: one
    verdict per role and model (:func:`context_verdict`), then what rests on estimates."""
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
                                   f"conversations may be refused ({(cap.setting or DEFAULT_SETTING).format(n=common_context(prompt + s.max_tokens))} "
                                   "holds them)"))
            continue
        head = f"its largest first-turn prompt is ~{prompt:,} tokens ({counted}; session {big.session_id}) against {context}"
        verdict = context_verdict(role, prompt, s.max_tokens, s.attempts, big.graph_size if role == "extractor" else None,
                                  limit, cap.setting or DEFAULT_SETTING)
        if verdict is not None:
            level, text = verdict
            out.append(Finding(level, where, f"{head}; {text}"))
            if level == "error":
                continue
        if s.attempts >= 2 and prompt + 2 * first > limit:
            out.append(Finding("warning", where, f"its largest first-turn prompt is ~{prompt:,} tokens; a repair round appends "
                               f"the refused answer (up to {first:,} tokens) and asks for {first:,} more: ~{prompt + 2 * first:,}, "
                               f"above {context}"))
        if big.last_turn + first > limit:
            out.append(Finding("warning", where, f"its prompt is estimated to reach ~{big.last_turn:,} tokens by the last turn; "
                               f"with max_tokens {first:,} that is above {context}: late turns of long conversations may be "
                               "refused"))
    return out


#: the speed probe: a short answer of known length, timed (one request per concurrent session slot)
SPEED_PROMPT = "Count from 1 to 100 in words, separated by commas. Reply with the list only."
SPEED_MAX_TOKENS = 64
#: an answer shorter than this is not timed (a model that replies "OK" says nothing about its speed)
SPEED_MIN_TOKENS = 16
#: the most copies of the probe sent at once (a self-hosted server's per-request speed falls with
#: its load: SmolLM2 on 2 cores decodes ~20 tok/s per request with 4 at once)
SPEED_MAX_CONCURRENCY = 8


@dataclass
class Speed:
    """What the speed probe measured on one endpoint (or why it did not)."""

    tokens_per_s: float | None  # per request, first-token latency included (None: not measured)
    concurrency: int = 1  # probes sent at once
    seconds: float = 0.0  # the slowest probe's time
    tokens: int = 0  # completion tokens of that probe
    note: str = ""  # why nothing was measured
    requests: int = 0
    prompt_tokens: int = 0  # what the probes spent (their usage)
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0

    def source(self) -> str:
        if self.tokens_per_s is None:
            return ""
        at_once = f", {self.concurrency} at once" if self.concurrency > 1 else ""
        return f"measured by the speed probe: {self.tokens:,} tokens in {self.seconds:.1f}s{at_once}"


def speed_concurrency(entry: Any, plan: Any) -> int:
    """How many probes to send at once: as many requests as the run will keep in flight (one
    process's cap, never above the endpoint's cluster-wide cap), at most eight."""
    sessions = getattr(plan, "n_sessions", 1) or 1
    caps = [getattr(entry, "max_in_flight", 1) or 1, getattr(entry, "max_in_flight_global", None) or SPEED_MAX_CONCURRENCY]
    return max(1, min(sessions, *caps, SPEED_MAX_CONCURRENCY))


async def probe_speed(entry: Any, concurrency: int = 1, limiter: Any = None) -> Speed:
    """Send ``concurrency`` copies of one short request at once and time them: the per-request
    generation speed the run will see (the slowest copy's tokens / seconds, its first-token
    latency included, so long answers are estimated a little slow rather than fast). Each copy
    waits for ``limiter`` (the endpoint's quota) first; only the request itself is timed."""
    import aiohttp

    from ray_knowsim.llm.http.credentials import Secret, auth_header

    secret = Secret.from_env(entry.api_key_env) if entry.api_key_env else None
    headers = auth_header(entry.api_key_header, secret)
    body = {"model": entry.model, "messages": [{"role": "user", "content": SPEED_PROMPT}], "temperature": 0.0,
            entry.max_tokens_field: SPEED_MAX_TOKENS, **entry.extra_body}
    timeout = aiohttp.ClientTimeout(total=min(entry.timeout_s, 4 * PROBE_TIMEOUT_S), sock_connect=entry.connect_timeout_s)

    async def one(session: Any) -> tuple[float, int, int, int] | str:
        try:
            async with granted(limiter, SPEED_MAX_TOKENS):
                t0 = time.perf_counter()
                async with session.post(entry.base_url + "/chat/completions", json=body, headers=headers) as resp:
                    raw = await resp.read()
                    elapsed = time.perf_counter() - t0
                if resp.status != 200:
                    return f"HTTP {resp.status}"
                prompt, completion, cached = _usage(raw)
                return elapsed, completion, prompt, cached
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError, AttributeError, LimiterUnavailable) as exc:
            return type(exc).__name__

    async with aiohttp.ClientSession(timeout=timeout) as session:
        got = await asyncio.gather(*(one(session) for _ in range(concurrency)))
    timed = [g for g in got if not isinstance(g, str)]
    refused = sorted({g for g in got if isinstance(g, str)})
    spent = {"requests": concurrency, "prompt_tokens": sum(g[2] for g in timed), "completion_tokens": sum(g[1] for g in timed),
             "cached_prompt_tokens": sum(g[3] for g in timed)}
    if refused and not timed:
        return Speed(None, concurrency, note=f"the speed probe got no answer ({', '.join(refused)})", **spent)
    elapsed, tokens, _, _ = max(timed)  # the slowest copy
    if tokens < SPEED_MIN_TOKENS or elapsed <= 0:
        return Speed(None, concurrency, note=f"the speed probe's answer was too short to time ({tokens} tokens)", **spent)
    return Speed(tokens / elapsed, concurrency, elapsed, tokens, **spent)


def measure_speeds(cfg: Any, plan: Any, capacities: dict[str, Capacity], quotas: dict[str, Any] | None = None) -> dict[str, Speed]:
    """The speed probe of every usable HTTP entry with a timeout (one per endpoint and model),
    each copy under the entry's quota (``quotas``: :func:`endpoint_quotas`)."""
    quotas = quotas or {}

    async def all_probes() -> dict[str, Speed]:
        probes = {key: probe_speed(cfg.models[key], speed_concurrency(cfg.models[key], plan), quotas.get(key))
                  for key, cap in capacities.items()
                  if not cap.error and getattr(cfg.models[key], "base_url", None) and _timeout(cfg.models[key])}
        try:
            return await _gather(probes) if probes else {}
        finally:
            await _close_shares(quotas)

    speeds = _run(all_probes())
    for key, sp in speeds.items():
        cap = capacities[key]
        cap.requests += sp.requests
        cap.chat_requests += sp.requests
        cap.chat_prompt_tokens += sp.prompt_tokens
        cap.chat_completion_tokens += sp.completion_tokens
        cap.chat_cached_prompt_tokens += sp.cached_prompt_tokens
        cap.tokens_per_s = None if sp.tokens_per_s is None else round(sp.tokens_per_s, 2)
        cap.speed = sp.source() or sp.note
    return speeds


def timeout_findings(cfg: Any, est: Any, plan: Any = None, speeds: dict[str, Speed] | None = None) -> list[Finding]:
    """Each role's timeout against how long its requests take: the typical one (the dry run's
    completion length), the first try at its whole budget, and the retry of a truncated answer at
    the whole cap, each at the speed the probe measured (:func:`probe_speed`; an earlier run's
    latency for the typical one with ``--from-run``; else the backend's prior speed, said so).
    Generation time only: a long prompt's prefill comes on top. Warnings: speed varies with load."""
    from ray_knowsim.preflight.estimate import request_latency_s
    from ray_knowsim.schema.roles import first_try_tokens

    speeds = speeds or {}
    measured = est.assumptions.get("completion_per_request", {}).get("latency_s", {}) or {}
    out = []
    for role, e in est.per_role.items():
        for key in e.models:
            entry = cfg.models[key]
            timeout = _timeout(entry)
            if not timeout or not e.requests:
                continue
            profile = BACKENDS.get(entry.backend).profile
            speed = speeds.get(key)
            if speed is not None and speed.tokens_per_s:
                rate, source = speed.tokens_per_s, f"{speed.tokens_per_s:.0f} tok/s {speed.source()}"

                def seconds(tokens: float, _rate: float = rate) -> float:
                    return tokens / _rate
            else:
                rate = profile.tokens_per_s
                why = f"; {speed.note}" if speed is not None and speed.note else ""
                source = f"an assumed {profile.tokens_per_s:g} tok/s after {profile.latency_s:g}s, this backend's prior{why}"

                def seconds(tokens: float, _p: Any = profile) -> float:
                    return request_latency_s(_p, tokens)
            s = cfg.roles.settings(role)
            big = est.largest_prompts.get(f"{role}:{key}")
            n_ius = big.graph_size if big is not None and role == "extractor" else None
            first = first_try_tokens(role, s.max_tokens, n_ius)
            retry = s.attempts >= 2 and first < s.max_tokens
            mean = measured.get(role) or seconds(e.completion_tokens_per_request)
            mean_source = "measured by an earlier run" if role in measured else source
            where = f"{_where(cfg, role, key)} timeout_s {timeout:g}"
            fail = f"a timed-out request is tried again, up to models.{key}.max_attempts {getattr(entry, 'max_attempts', 1)}, then fails as {role}_timeout"
            if mean > timeout / 2:
                out.append(Finding("warning", where, f"a request takes ~{mean:.0f}s on average ({mean_source}): "
                                   f"{'most' if mean > timeout else 'the slower'} requests would time out ({fail}); "
                                   f"raise models.{key}.timeout_s to at least {math.ceil(2 * mean):,}"))
                continue
            worst, what = (seconds(s.max_tokens), f"a truncated answer is asked again with max_tokens {s.max_tokens:,} "
                           f"(roles.{role}.max_tokens), which takes ~{seconds(s.max_tokens):.0f}s") if retry else (
                           seconds(first), f"a first try that uses its whole budget ({first:,} tokens) takes ~{seconds(first):.0f}s")
            if worst <= timeout:
                continue
            fix = f"raise models.{key}.timeout_s to at least {math.ceil(1.25 * worst):,}"
            if retry and rate:
                fits = int(timeout * 0.8 * rate) if speed is not None and speed.tokens_per_s else int(max(0.0, timeout * 0.8 - profile.latency_s) * rate)
                if largest_cap_with_retry(role, fits, n_ius) is not None and fits < s.max_tokens:
                    fix += f", or set roles.{role}.max_tokens to at most {fits:,}"
            out.append(Finding("warning", where, f"{what} at {source}, above the timeout: it would time out ({fail}); {fix}"))
    return out


# ----------------------------------------------------------------------------- running probes


async def _gather(probes: dict[str, Any]) -> dict[str, Any]:
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


__all__ = ["Capacity", "Finding", "Preflight", "PreflightFailed", "check_before_spending", "endpoint_quotas", "fit_findings",
           "probe_http", "probe_speed", "probe_vllm", "timeout_findings", "context_verdict", "measure_speeds"]
