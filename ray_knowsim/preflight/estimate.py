"""``ray-knowsim run CONFIG --dry-run``: what a run will ask of its models, before asking anything.

No model is called and no session is written; the only output is ``RUN_DIR/estimate.json``.
It also says, per task, whether the design's decisions can ever reach a verdict with the items
the task has, and how many items a given effect needs (``design``: :mod:`ray_knowsim.preflight.design`).

How the numbers come about:

* **Prompts are rendered, not guessed.** The first turn of every planned session is rendered with
  the real renderers (``ray_knowsim.prompts``: learner simulator or baseline learner, assistant,
  signal extractor) from the session's real item, graph and initial state. Growth over turns comes
  from the same renderers: for one session per (task, item, level, strategy, simulator) every turn
  1..T is rendered with a synthetic transcript whose messages have the expected completion lengths;
  each session's turn-t prompt is its own turn-1 prompt plus that group's growth up to turn t. The
  judges are rendered on a synthetic transcript of the whole conversation. So the estimate follows
  whatever the templates say, including after they change.
* **Tokens are counted** with the model's own tokenizer where the entry has one: a ``vllm``
  entry's local model directory (or its ``engine_kwargs.tokenizer``), an ``http`` entry's
  ``tokenizer`` (a local directory or ``tokenizer.json`` of the served model), read with the
  ``tokenizers`` package (the ``tokenizer`` extra; vLLM brings it), plus
  :data:`TEMPLATE_TOKENS_PER_MESSAGE` per message for the chat template's markers; the offline
  model counts whitespace-separated words (:func:`ray_knowsim.llm.offline.ntokens`). Anything else
  falls back to the character proxy ``ceil(characters / 4)`` (rough: on a 14-IU math extractor
  prompt of 16,349 characters it says 4,088 tokens where SmolLM2's chat template and tokenizer make
  4,981, and this count 4,983), and the count's name says which was used and why.
* **Completion lengths** per request: from a previous run (``--from-run DIR``: per-role means per
  call from its session rows; the assistant's per strategy; the extractor's per IU of the graph)
  or, without one, a prior: for the offline model its measured typical lengths, for other backends
  the lengths of real models' recorded answers (learner 170, extractor 118 per IU, rater 320,
  termination judge 200: :mod:`ray_knowsim.preflight.priors` measures them on the KnowSim authors'
  release), never above the role's ``max_tokens`` budget. Thinking: none unless the user states
  it (``--reasoning-tokens [ROLE=]N`` per request, added to the answer within the budget and
  billed as output; the summary says which was assumed). The
  ``upper_bound`` totals assume every completion fills its role's budget.
* **Turns**: ``max_turns`` (the virtual early stop runs every conversation to the end), or the mean
  turns per simulator kind of ``--from-run``.
* **Requests** per session: learner, assistant and (structured simulator) extractor once per turn;
  the rater once per session when a judge is configured, plus the termination judge for baseline
  simulators. Retries are not counted.
* **Cost**: each role's tokens at the price of the model it uses (``price`` on the model entry;
  the offline model is free); ``null`` when a model has no price. Cached prompt tokens: the share
  ``--from-run`` saw, else each turn's stable prefix (the start of its rendered prompt that repeats
  the session's previous prompt of that role: :func:`stable_prefix_tokens`) when it reaches the
  price's cache minimum (:func:`cache_tokens`; ``cache_min_tokens``, its ``provider``'s default or
  1,024, stated in ``assumptions.prompt_cache`` and the summary); what a turn adds to the prefix is
  written at ``cache_write``. First turns and judges are priced uncached; ``upper_bound`` caches
  nothing.
* **Wall time** (minutes): the larger of (a) the latency bound — shards run in waves of
  ``max_concurrent_shards`` (default: CPUs / shard_cpus); a shard's sessions run at once, each
  waiting only for its own requests, one role after the other every turn, and a shard with more
  sessions than ``max_in_flight`` queues the rest — at a per-request latency measured by
  ``--from-run`` or assumed (offline 0.01 s; http 1 s + completion / 60 tok/s; vllm 0.5 s +
  completion / 40 tok/s; the offline model's requests are CPU work that does not overlap, 0.03 s
  each), and (b) per endpoint the configured rate limits: requests / ``requests_per_minute`` and
  tokens / ``tokens_per_minute``; plus 0.25 min of start-up and reduction. Latencies are means: a
  heavy tail stretches each session's chain by its own slow calls only.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from ray_knowsim.schema.price import NO_PRICE, CacheTerms, Price, usd_text
from ray_knowsim.backends.registry import BACKENDS, TYPICAL_COMPLETION
from ray_knowsim.config import RunConfig
from ray_knowsim.plan.sessions import Inputs, Plan
from ray_knowsim.schema.results import ROLES
from ray_knowsim.schema.items import item_key

if TYPE_CHECKING:
    from ray_knowsim.sim.requests import TurnRequests

log = logging.getLogger(__name__)

ESTIMATE_FORMAT = 1
CHARS_PER_TOKEN = 4
STARTUP_MINUTES = 0.25  # Ray start, kernel load, the reduction at the end (measured on a 2-CPU machine)


class Totals(BaseModel):
    model_config = ConfigDict(extra="forbid")
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    minutes: float | None = None
    cached_prompt_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache
    cache_write_tokens: int = 0  # of prompt_tokens, written into it (a premium on some providers)
    reasoning_tokens: int = 0  # of completion_tokens, the thinking assumed (billed as output)


class RoleEstimate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0  # of completion_tokens
    cost_usd: float | None = 0.0
    completion_tokens_per_request: float = 0.0
    models: list[str] = []
    token_counter: str = ""


class FirstTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rendered: int
    mean_prompt_tokens: float
    min_prompt_tokens: int
    max_prompt_tokens: int


class LargestPrompt(BaseModel):
    """The largest prompt one model gets in one role (what ``run``'s preflight compares with the
    endpoint's context): the first turn as rendered, later turns as estimated."""

    model_config = ConfigDict(extra="forbid")
    first_turn: int  # tokens of the largest first-turn prompt rendered (the judges: their estimated prompt)
    session_id: str  # the session it belongs to
    graph_size: int  # IUs of that session's graph (the extractor's first-try budget grows with it)
    last_turn: int  # the largest prompt of any turn, first-turn render plus the estimated growth


class Estimate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: int = ESTIMATE_FORMAT
    name: str
    config_hash: str
    n_sessions: int
    turns: dict[str, float]  # simulator kind -> turns per session assumed
    totals: Totals
    per_role: dict[str, RoleEstimate]
    per_condition: dict[str, Totals]
    upper_bound: Totals  # every completion fills its role's max_tokens
    first_turn: dict[str, FirstTurn]
    assumptions: dict[str, Any]
    largest_prompts: dict[str, LargestPrompt] = {}  # "<role>:<model key>" -> its largest prompt
    # per task: can the design's decisions ever reach a verdict with its items (preflight.design)
    design: list[dict[str, Any]] = []
    # an adaptive design's simulated decisions and session share (preflight.design.adaptive_forecast)
    adaptive_forecast: dict[str, Any] | None = None


# ----------------------------------------------------------------------------- token counting


def char_proxy(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


#: tokens the chat template adds around each message (role markers, separators) on top of its
#: content, counted with a real tokenizer (SmolLM2's ChatML: 5; Llama 3's: 5; a little headroom)
TEMPLATE_TOKENS_PER_MESSAGE = 8


def token_counter(backend: str, entry: Any = None) -> tuple[Callable[[str], int], str]:
    """The model's own token count: the entry's tokenizer where it names one
    (:func:`tokenizer_source`), else the backend's own count where its profile has one, else the
    character proxy, with the reason in the name."""
    profile = BACKENDS.get(backend).profile
    if profile.count_tokens is not None:
        return profile.count_tokens, profile.token_count_name or f"{backend} backend's own count"
    why = "the entry names no tokenizer"
    source = tokenizer_source(entry) if entry is not None else None
    if source is not None:
        loaded = _load_tokenizer(source)
        if isinstance(loaded, str):
            why = loaded
        else:
            def count(text: str, _tok: Any = loaded) -> int:
                return len(_tok.encode(text, add_special_tokens=False).ids) + TEMPLATE_TOKENS_PER_MESSAGE

            return count, f"the model's tokenizer ({source}) + {TEMPLATE_TOKENS_PER_MESSAGE} per message for its chat template"
    return char_proxy, f"character proxy: ceil(chars / {CHARS_PER_TOKEN}) (fallback: {why})"


def tokenizer_source(entry: Any) -> str | None:
    """Where the entry's tokenizer lies on this machine: an ``http`` entry's ``tokenizer``; a
    ``vllm`` entry's ``engine_kwargs.tokenizer`` or its model directory (None: it names none)."""
    named = getattr(entry, "tokenizer", None)
    if named:
        return os.path.expanduser(str(named))
    if getattr(entry, "backend", None) == "vllm":
        kwargs = getattr(entry, "engine_kwargs", None) or {}
        return os.path.expanduser(str(kwargs.get("tokenizer") or entry.model))
    return None


_TOKENIZERS: dict[str, Any] = {}


def _load_tokenizer(source: str) -> Any:
    """The ``tokenizers.Tokenizer`` of ``source`` (a directory holding ``tokenizer.json``, or the
    file), loaded once per process; or why not, in words."""
    if source in _TOKENIZERS:
        return _TOKENIZERS[source]
    path = Path(source)
    path = path / "tokenizer.json" if path.is_dir() else path
    if not path.is_file():
        got: Any = f"no tokenizer.json at {source} (a hub name is not downloaded for a count)"
    else:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            got = f"{path} needs the tokenizers package (pip install 'ray-knowsim[tokenizer]')"
        else:
            try:
                got = Tokenizer.from_file(str(path))
            except Exception as exc:  # noqa: BLE001 - a file the library cannot read: say so, count by proxy
                got = f"{path} could not be read ({type(exc).__name__}: {exc})"
    _TOKENIZERS[source] = got
    return got


def filler(n: float) -> str:
    """Text that counts as ~n tokens under both counters ("abc " = 1 word = 4 characters)."""
    return "abc " * max(1, int(round(n)))


def prompt_tokens(request, count: Callable[[str], int]) -> int:  # noqa: ANN001
    return sum(count(m.get("content") or "") for m in request.messages)


# ----------------------------------------------------------------------------- completion priors


class CompletionModel(BaseModel):
    """Expected completion tokens per request, per role (assistant per strategy)."""

    model_config = ConfigDict(extra="forbid")
    user_sim: float
    assistant: dict[str, float]
    assistant_default: float
    extractor_per_iu: float
    judge: float
    judge_termination: float
    cached_share: dict[str, float] = {}
    #: thinking tokens per request a role's model writes on top of its answer (billed as output):
    #: an assumption the user sets (``run --dry-run --reasoning-tokens``), none by default
    reasoning: dict[str, float] = {}
    latency_s: dict[str, float] = {}  # measured per role (from a previous run)
    turns: dict[str, float] = {}  # simulator kind -> mean turns (from a previous run)
    source: str

    def assistant_for(self, strategy: str) -> float:
        return self.assistant.get(strategy, self.assistant_default)


def prior_completions(cfg: RunConfig) -> CompletionModel:
    from ray_knowsim.strategies import STRATEGIES, TutorStrategy

    def profile(key: str | None) -> Any:
        """The profile the backend of model ``key`` registered (a typical chat model's by default)."""
        return BACKENDS.get(cfg.models[key].backend).profile if key in cfg.models else None

    def table(key: str | None) -> Mapping[str, Any]:
        """The completion lengths the backend of model ``key`` registered (a typical chat model's by default)."""
        p = profile(key)
        return p.completion_tokens if p is not None else TYPICAL_COMPLETION

    user_sim, extractor = (table(cfg.roles.settings(role).model) for role in ("user_sim", "extractor"))
    judge = table(cfg.roles.judge.model) if cfg.roles.judge is not None else TYPICAL_COMPLETION
    # the assistant's reply length is each strategy's own, in the unit of the backend its conditions talk to
    # (one field for all: conditions on backends that count differently get a typical chat model's)
    fields = {getattr(profile(c.assistant or cfg.roles.assistant.model), "reply_length", "reply_tokens") for c in cfg.conditions}
    reply = fields.pop() if len(fields) == 1 else "reply_tokens"
    return CompletionModel(
        user_sim=user_sim["user_sim"],
        assistant={c.strategy: float(getattr(STRATEGIES.get(c.strategy), reply)) for c in cfg.conditions},
        assistant_default=float(TutorStrategy.__dataclass_fields__[reply].default),  # the built-ins' mean
        extractor_per_iu=extractor["extractor_per_iu"], judge=judge["judge"], judge_termination=judge["judge_termination"],
        source="prior: each strategy's expected reply length (ray_knowsim.strategies) and each backend's registered "
               "completion lengths for the other roles (the offline model's measured ones, otherwise those of real "
               "models' recorded answers in the KnowSim release; backends/registry.py, preflight/priors.py)",
    )


def completions_from_run(run_dir: str | Path) -> CompletionModel:
    """Per-request completion means from a previous run's session rows (and its manifest's latencies)."""
    from ray_knowsim.io.rundir import RunReader

    path = Path(run_dir)
    run = RunReader.open(path)  # the counted rows only: each session once
    dataset = run.sessions
    need = ["simulator", "assistant_strategy", "turns", "graph_size", "status", *(f"completion_tokens_{r}" for r in ROLES),
            *(f"prompt_tokens_{r}" for r in ROLES), *(f"cached_prompt_tokens_{r}" for r in ROLES)]
    missing = [c for c in need if c not in dataset.names]
    if missing:
        raise ValueError(f"{path}: session rows lack {missing[:3]}... (a run written before per-role token columns)")
    from ray_knowsim.score.store import RunScores

    scores = RunScores.load(path, run)  # the judge's tokens live in scores/, joined onto the sessions
    table = dataset.read(["session_id", *need])
    df = (scores.attach(table) if scores.sets else table).to_pandas()
    if df.empty:
        raise ValueError(f"{path}: no session rows")
    from ray_knowsim.simulators import SIMULATORS

    kept_state = df["simulator"].map(lambda name: SIMULATORS.get(name).structured)  # plugin simulators too
    structured = df[kept_state]
    baseline = df[~kept_state]
    turns = df["turns"].clip(lower=1)

    def per(num, den) -> float:  # noqa: ANN001
        den = float(den)
        return float(num) / den if den > 0 else 0.0

    assistant = {s: per(g["completion_tokens_assistant"].sum(), g["turns"].clip(lower=1).sum())
                 for s, g in df.groupby("assistant_strategy")}
    judge_calls = len(df) + len(baseline)
    cached = {r: per(df[f"cached_prompt_tokens_{r}"].sum(), df[f"prompt_tokens_{r}"].sum()) for r in ROLES}
    latency: dict[str, float] = {}
    try:
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        agg: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for inv in manifest.get("invocations", []):
            for role, st in ((inv.get("totals") or {}).get("llm") or {}).items():
                agg[role][0] += float(st.get("latency_s", 0.0))
                agg[role][1] += float(st.get("calls", 0)) - float(st.get("cached", 0))
        latency = {r: v[0] / v[1] for r, v in agg.items() if v[1] > 0}
    except (OSError, ValueError) as exc:
        log.warning("%s: no measured latencies in manifest.json (%s); the estimate uses the default guesses", path, exc)
    return CompletionModel(
        user_sim=per(df["completion_tokens_user_sim"].sum(), turns.sum()),
        assistant=assistant,
        assistant_default=per(df["completion_tokens_assistant"].sum(), turns.sum()),
        extractor_per_iu=per(structured["completion_tokens_extractor"].sum(),
                             (structured["turns"].clip(lower=1) * structured["graph_size"]).sum()),
        judge=per(df["completion_tokens_judge"].sum(), judge_calls),
        judge_termination=per(df["completion_tokens_judge"].sum(), judge_calls),
        cached_share=cached, latency_s=latency,
        turns={"structured": float(structured["turns"].mean()) if len(structured) else math.nan,
               "baseline": float(baseline["turns"].mean()) if len(baseline) else math.nan},
        source=f"previous run {path}",
    )


# ----------------------------------------------------------------------------- rendering


def _synthetic(exchanges: int, user_len: float, assistant_len: float) -> list[list[str]]:
    out: list[list[str]] = []
    for _ in range(exchanges):
        out += [["user", filler(user_len)], ["assistant", filler(assistant_len)]]
    return out


def _turn_requests(live, turn: int, comp: CompletionModel, build: TurnRequests) -> dict[str, Any]:  # noqa: ANN001
    """The requests per role of ``turn`` (1-based) of ``live`` with a synthetic transcript, each
    built by the loop's own builder (:class:`ray_knowsim.sim.requests.TurnRequests`)."""
    a_len = comp.assistant_for(live.spec.assistant_strategy)
    prior = _synthetic(turn - 1, comp.user_sim, a_len)
    with_user = prior + [["user", filler(comp.user_sim)]]
    out = {"user_sim": build.learner(live, prior, turn), "assistant": build.assistant(live, with_user, turn)}
    if live.structured:
        out["extractor"] = build.extractor(live, with_user + [["assistant", filler(a_len)]], turn)
    return out


def _counter_of(role: str, live, counters: dict[str, Callable[[str], int]]) -> Callable[[str], int]:  # noqa: ANN001
    return counters[f"assistant:{live.spec.assistant_model}"] if role == "assistant" else counters[role]


def _render_turn(live, turn: int, comp: CompletionModel, counters: dict[str, Callable[[str], int]],  # noqa: ANN001
                 build: TurnRequests) -> dict[str, int]:
    """Prompt tokens per role for ``turn`` of ``live`` (:func:`_turn_requests`)."""
    return {role: prompt_tokens(req, _counter_of(role, live, counters)) for role, req in _turn_requests(live, turn, comp, build).items()}


def stable_prefix_tokens(prev: Sequence[Mapping[str, Any]], cur: Sequence[Mapping[str, Any]], count: Callable[[str], int]) -> int:
    """Tokens at the start of ``cur``'s messages that repeat ``prev``'s: all a provider's prefix
    cache can serve of ``cur`` after ``prev`` (our prompts put static text first for this)."""
    total = 0
    for a, b in zip(prev, cur):
        if a.get("role") != b.get("role"):
            break
        x, y = a.get("content") or "", b.get("content") or ""
        if x == y:
            total += count(y)
            continue
        shared = os.path.commonprefix([x, y])
        total += count(shared) if shared else 0
        break
    return total


def _render_group(live, turns: int, comp: CompletionModel, counters: dict[str, Callable[[str], int]],  # noqa: ANN001
                  build: TurnRequests) -> tuple[dict[str, int], dict[str, list[int]], dict[str, list[int]]]:
    """Every turn of one session: its first turn's prompt tokens per role, each turn's growth over
    the first, and each turn's stable prefix with the turn before (0 for the first)."""
    rows = [_turn_requests(live, t, comp, build) for t in range(1, turns + 1)]
    tokens = [{r: prompt_tokens(q, _counter_of(r, live, counters)) for r, q in row.items()} for row in rows]
    first = tokens[0]
    growth = {r: [t[r] - first[r] for t in tokens] for r in first}
    stable = {r: [0] + [stable_prefix_tokens(a[r].messages, b[r].messages, _counter_of(r, live, counters))
                        for a, b in zip(rows, rows[1:])] for r in first}
    return first, growth, stable


def cache_tokens(stable: Sequence[int], minimum: int) -> tuple[int, int]:
    """(read, written) prompt tokens of one role over a session's turns, from each turn's stable
    prefix with the turn before: a turn reads that prefix from the cache when it is at least the
    provider's ``minimum`` (shorter ones are cached by nobody), and what a turn reads beyond what
    the turn before it read, that turn wrote (billed at the cache-write price). Within a session
    only: the first turn reads nothing, though its static instructions may be warm from others."""
    hits = [s if s >= max(minimum, 1) else 0 for s in stable]
    return sum(hits), sum(max(0, b - a) for a, b in zip(hits, hits[1:]))


def _render_judges(live, turns: int, comp: CompletionModel, counters, prompts: str) -> tuple[int, int | None]:  # noqa: ANN001
    from ray_knowsim.prompts.judges import render_rater, render_termination_judge

    full = _synthetic(max(1, turns), comp.user_sim, comp.assistant_for(live.spec.assistant_strategy))
    rater = prompt_tokens(render_rater(live.item, full, knowledge_level=live.spec.knowledge_level, prompts=prompts),
                          counters["judge"])
    term = None if live.structured else prompt_tokens(render_termination_judge(live.item, full, prompts=prompts),
                                                      counters["judge"])
    return rater, term


# ----------------------------------------------------------------------------- the estimate


class _Tally:
    """The estimate's sums: per role, per condition, at full budgets; each session's share priced
    at its model's price (with its cached and written prompt tokens)."""

    def __init__(self, roles: Sequence[str], prices: Mapping[str, Any]) -> None:
        self.per_role = {r: RoleEstimate() for r in roles}
        self.upper = {r: 0 for r in roles}  # completion tokens at full budgets
        self.per_cond: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
        self.prices = prices

    def add(self, role: str, model: str, condition: str, req: int, prompt: int, compl: int, cached: int = 0,  # noqa: PLR0913
            written: int = 0, thought: int = 0) -> None:
        price = self.prices.get(model)
        cost = price.cost(prompt, compl, cached, written) if price is not None else None
        e = self.per_role[role]
        e.requests += req
        e.prompt_tokens += prompt
        e.completion_tokens += compl
        e.cached_prompt_tokens += cached
        e.cache_write_tokens += written
        e.reasoning_tokens += thought
        e.cost_usd = None if e.cost_usd is None or cost is None else e.cost_usd + cost
        if model not in e.models:
            e.models.append(model)
        pc = self.per_cond[condition][role]
        pc["requests"] += req
        pc["prompt_tokens"] += prompt
        pc["completion_tokens"] += compl
        pc["cost_usd"] = math.nan if cost is None or math.isnan(pc.get("cost_usd", 0.0)) else pc.get("cost_usd", 0.0) + cost

    def totals(self, minutes: float | None) -> tuple[Totals, Totals, dict[str, Totals]]:
        """The whole run, its upper bound (every completion at its budget, nothing cached) and each condition."""
        roles = self.per_role.values()
        total_cost = None if any(e.cost_usd is None for e in roles) else sum(e.cost_usd or 0.0 for e in roles)
        totals = Totals(requests=sum(e.requests for e in roles), prompt_tokens=sum(e.prompt_tokens for e in roles),
                        completion_tokens=sum(e.completion_tokens for e in roles), cost_usd=total_cost, minutes=minutes,
                        cached_prompt_tokens=sum(e.cached_prompt_tokens for e in roles),
                        cache_write_tokens=sum(e.cache_write_tokens for e in roles),
                        reasoning_tokens=sum(e.reasoning_tokens for e in roles))
        upper_cost: float | None = 0.0
        for role, e in self.per_role.items():
            for model in e.models:
                price = self.prices.get(model)
                if price is None or upper_cost is None:
                    upper_cost = None
                    break
                share = 1.0 / len(e.models)
                upper_cost += price.cost(e.prompt_tokens * share, self.upper[role] * share)
        upper = Totals(requests=totals.requests, prompt_tokens=totals.prompt_tokens, completion_tokens=int(sum(self.upper.values())),
                       cost_usd=upper_cost, minutes=None)
        conds = {}
        for cond, by_role in self.per_cond.items():
            costs = [v.get("cost_usd", math.nan) for v in by_role.values()]
            conds[cond] = Totals(requests=int(sum(v["requests"] for v in by_role.values())),
                                 prompt_tokens=int(sum(v["prompt_tokens"] for v in by_role.values())),
                                 completion_tokens=int(sum(v["completion_tokens"] for v in by_role.values())),
                                 cost_usd=None if any(math.isnan(c) for c in costs) else float(sum(costs)))
        return totals, upper, conds


def _counters(cfg: RunConfig, plan: Plan, role_model: Mapping[str, str]) -> tuple[dict[str, Callable[[str], int]], dict[str, str]]:
    counters: dict[str, Callable[[str], int]] = {}
    names: dict[str, str] = {}
    for role, key in role_model.items():
        counters[role], names[role] = token_counter(cfg.models[key].backend, cfg.models[key])
    for c in plan.conditions:
        entry = cfg.models[c.assistant]
        counters[f"assistant:{c.assistant}"], names[f"assistant:{c.assistant}"] = token_counter(entry.backend, entry)
    return counters, names


def _terms(price: Any) -> CacheTerms:
    """A model's cache terms; an unpriced one's tokens are still cached (they are GPU time or a bill
    not given here) at the default minimum, stated as assumed."""
    return (price if price is not None else Price.free()).cache_terms()


def cache_assumption(prices: Mapping[str, Any], models: Sequence[str], comp: CompletionModel) -> dict[str, Any]:
    """What the estimate assumed of each model's prompt cache, in words a user can check (the dry
    run prints it and estimate.json keeps it): measured shares from ``--from-run``, else each
    price's cache terms and where its cache minimum came from."""
    if comp.cached_share:
        return {"source": f"{comp.source}: the share of prompt tokens it saw cached, per role",
                "cached_share": {r: round(v, 3) for r, v in comp.cached_share.items()}}
    terms = {}
    for key in models:
        price = prices.get(key)
        t = _terms(price)
        terms[key] = {"min_tokens": t.min_tokens, "min_tokens_from": t.min_tokens_from,
                      "cached_input": t.cached_input if price is not None else None,
                      "cache_write": t.cache_write if price is not None else None}
    return {"source": "each turn's stable prefix with the session's previous turn of that role, read from the cache when "
                      "at least the model's cache minimum; the growth over the turn before written (cache_write price); "
                      "first turns and judges read nothing", "models": terms}


def estimate(cfg: RunConfig, plan: Plan, inputs: Inputs, from_run: str | Path | None = None,
             reasoning: Mapping[str, float] | None = None) -> Estimate:
    """``reasoning``: thinking tokens per request per role (:func:`parse_reasoning`), added to
    each answer within the role's budget; none when not given."""
    from ray_knowsim.plan.build import make_context, model_prices
    from ray_knowsim.sim.requests import TurnRequests
    from ray_knowsim.sim.session import shared_indexes, start_session

    comp = completions_from_run(from_run) if from_run else prior_completions(cfg)
    comp.reasoning = dict(reasoning or {})
    config_hash = cfg.config_hash()  # digests every input file: once
    build = TurnRequests.of(make_context(cfg, "dry-run", config_hash))  # what the run's shards get
    prices = model_prices(cfg)
    role_model = {r: cfg.roles.settings(r).model for r in ("user_sim", "extractor")}
    judged = cfg.roles.judge is not None
    if judged:
        role_model["judge"] = cfg.roles.settings("judge").model
    budgets = {r: cfg.roles.settings(r).max_tokens for r in ROLES if r != "judge" or judged}
    counters, counter_names = _counters(cfg, plan, role_model)

    def turns_for(structured: bool) -> int:
        got = comp.turns.get("structured" if structured else "baseline", math.nan)
        return max(1, int(round(got))) if got == got and got > 0 else cfg.max_turns

    tally = _Tally((*ROLES[:3], *(["judge"] if judged else [])), prices)
    first: dict[str, list[int]] = defaultdict(list)
    largest: dict[str, LargestPrompt] = {}
    groups: dict[tuple, tuple[dict[str, list[int]], dict[str, list[int]]]] = {}
    judges: dict[tuple, tuple[int, int | None]] = {}
    items = {item_key(task, it.id): it for task, its in inputs.items.items() for it in its}
    index_of = shared_indexes()  # one index per item, as the shards make them (1,008 sessions: 0.47 -> 0.33 CPU-s)

    for spec in plan.iter_sessions():
        item, graph = items[spec.item_key], inputs.graphs[spec.item_key]
        live = start_session(spec, item, graph, cfg.rule_config, index_of(item, graph))
        T = turns_for(live.structured)
        gkey = (spec.task, spec.item_id, spec.knowledge_level, spec.assistant_strategy, spec.simulator, spec.assistant_model, T)
        if gkey not in groups:
            p1, growth, stable = _render_group(live, T, comp, counters, build)
            groups[gkey] = (growth, stable)
            if judged:
                judges[gkey] = _render_judges(live, T, comp, counters, cfg.prompts.version)
        else:
            p1 = _render_turn(live, 1, comp, counters, build)
        growth, stable = groups[gkey]
        for role, n in p1.items():
            first[role].append(n)
        a_len = comp.assistant_for(spec.assistant_strategy)
        completion = {"user_sim": comp.user_sim, "assistant": a_len, "extractor": comp.extractor_per_iu * live.index.size}
        for role, n1 in p1.items():
            model = spec.assistant_model if role == "assistant" else role_model[role]
            prompt = sum(n1 + g for g in growth[role])
            if comp.cached_share:
                cached, written = int(round(prompt * comp.cached_share.get(role, 0.0))), 0
            else:
                cached, written = cache_tokens(stable[role], _terms(prices.get(model)).min_tokens)
            answer, thought = _with_thinking(completion[role], comp.reasoning.get(role, 0.0), budgets[role])
            tally.add(role, model, spec.condition, T, prompt, int(round((answer + thought) * T)), min(cached, prompt), written,
                      int(round(thought * T)))
            tally.upper[role] += budgets[role] * T
            _keep_largest(largest, f"{role}:{model}", n1, n1 + max(growth[role]), spec.session_id, live.index.size)
        if judged:
            _add_judges(tally, largest, judges[gkey], role_model["judge"], spec, comp, budgets["judge"], live.index.size)
    for role, e in tally.per_role.items():
        e.completion_tokens_per_request = e.completion_tokens / e.requests if e.requests else 0.0
        e.token_counter = "; ".join(sorted({counter_names[k] for k in counter_names if k == role or k.startswith(f"{role}:")}))

    minutes, timing = wall_minutes(cfg, plan, tally.per_role, comp)
    totals, upper_totals, conds = tally.totals(minutes)
    models = sorted({m for e in tally.per_role.values() for m in e.models})
    return Estimate(
        name=cfg.name, config_hash=config_hash, n_sessions=plan.n_sessions,
        turns={"structured": turns_for(True), "baseline": turns_for(False)},
        totals=totals, per_role=tally.per_role, per_condition=conds, upper_bound=upper_totals,
        first_turn={r: FirstTurn(rendered=len(v), mean_prompt_tokens=float(np.mean(v)), min_prompt_tokens=int(min(v)),
                                 max_prompt_tokens=int(max(v))) for r, v in first.items()},
        assumptions={"completion_source": comp.source, "completion_per_request": comp.model_dump(exclude={"source"}),
                     "token_counters": counter_names, "wall_time": timing, "retries": "not counted",
                     "prompt_cache": cache_assumption(prices, models, comp),
                     "reasoning_tokens_per_request": comp.reasoning or "none assumed (set --reasoning-tokens for a model that thinks)",
                     "growth": "per (task, item, level, strategy, simulator) group, every turn rendered with a synthetic transcript"},
        largest_prompts=largest,
    )


def _add_judges(tally: _Tally, largest: dict[str, LargestPrompt], rendered: tuple[int, int | None], model: str,  # noqa: PLR0913
                spec: Any, comp: CompletionModel, budget: int, graph_size: int) -> None:
    """A session's judge calls: the rater, and a baseline's termination judge (nothing cached: one call each)."""
    rater, term = rendered
    judge_prompt = max(rater, term or 0)
    _keep_largest(largest, f"judge:{model}", judge_prompt, judge_prompt, spec.session_id, graph_size)
    thinks = comp.reasoning.get("judge", 0.0)
    answer, thought = _with_thinking(comp.judge, thinks, budget)
    n_req, prompt = 1, rater
    tally.upper["judge"] += budget
    if term is not None:
        more = _with_thinking(comp.judge_termination, thinks, budget)
        n_req, prompt, answer, thought = 2, rater + term, answer + more[0], thought + more[1]
        tally.upper["judge"] += budget
    tally.add("judge", model, spec.condition, n_req, prompt, int(round(answer + thought)), thought=int(round(thought)))


def _with_thinking(answer: float, thinking: float, budget: int) -> tuple[float, float]:
    """(answer, thinking) tokens of one request within the role's ``max_tokens``, which a reasoning
    model's thinking counts against (OpenAI's max_completion_tokens): the answer first."""
    answer = min(answer, budget)
    return answer, max(0.0, min(thinking, budget - answer))


def _keep_largest(largest: dict[str, LargestPrompt], key: str, first: int, last: int, session_id: str, graph_size: int) -> None:
    seen = largest.get(key)
    if seen is None or first > seen.first_turn:
        largest[key] = LargestPrompt(first_turn=first, session_id=session_id, graph_size=graph_size,
                                     last_turn=max(last, seen.last_turn if seen else 0))
    elif last > seen.last_turn:
        seen.last_turn = last


def request_latency_s(profile: Any, completion_tokens: float) -> float:
    """Seconds for one request of ``completion_tokens`` at a backend's assumed speed (its profile)."""
    rate = profile.tokens_per_s
    return profile.latency_s + (completion_tokens / rate if rate else 0.0)


def wall_minutes(cfg: RunConfig, plan: Plan, per_role: dict[str, RoleEstimate], comp: CompletionModel) -> tuple[float, dict]:
    engine = cfg.engine
    cpus = engine.num_cpus or os.cpu_count() or 1
    concurrency = engine.max_concurrent_shards or max(1, int(cpus / engine.shard_cpus))
    waves = math.ceil(plan.n_shards / concurrency)
    shard = min(engine.shard_size, plan.n_sessions)

    def backend_of(role: str) -> Any:
        key = per_role[role].models[0] if per_role[role].models else ""
        return cfg.models.get(key)

    per_turn_s = 0.0
    latencies = {}
    for role in ("user_sim", "assistant", "extractor"):
        entry = backend_of(role)
        if entry is None:
            continue
        profile = BACKENDS.get(entry.backend).profile
        lat = comp.latency_s.get(role) or request_latency_s(profile, per_role[role].completion_tokens_per_request)
        # an in-process model (the offline one) is CPU work in the shard's process: no overlap
        in_flight = 1 if profile.in_process else (getattr(entry, "max_in_flight", None) or shard)
        latencies[role] = lat
        per_turn_s += lat * math.ceil(shard / in_flight)
    got = comp.turns.get("structured", math.nan)
    turns = max(1, int(round(got))) if got == got and got > 0 else cfg.max_turns
    judge_s = 0.0
    if "judge" in per_role and backend_of("judge") is not None:
        profile = BACKENDS.get(backend_of("judge").backend).profile
        judge_s = comp.latency_s.get("judge") or request_latency_s(profile, per_role["judge"].completion_tokens_per_request)
        latencies["judge"] = judge_s
        if profile.in_process:
            judge_s *= shard
    latency_min = waves * (turns * per_turn_s + judge_s) / 60.0
    by_endpoint: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for role, e in per_role.items():
        for key in e.models:
            share = 1.0 / len(e.models)
            by_endpoint[key][0] += e.requests * share
            by_endpoint[key][1] += (e.prompt_tokens + e.completion_tokens) * share
    rate_min = 0.0
    limits = {}
    for key, (req, tok) in by_endpoint.items():
        entry = cfg.models[key]
        rpm, tpm = getattr(entry, "requests_per_minute", None), getattr(entry, "tokens_per_minute", None)
        bound = max(req / rpm if rpm else 0.0, tok / tpm if tpm else 0.0)
        limits[key] = {"requests": int(req), "tokens": int(tok), "requests_per_minute": rpm, "tokens_per_minute": tpm,
                       "minutes": round(bound, 3)}
        rate_min = max(rate_min, bound)
    minutes = max(latency_min, rate_min) + STARTUP_MINUTES
    return round(minutes, 3), {"startup_minutes": STARTUP_MINUTES, "concurrent_shards": concurrency, "waves": waves, "latency_s_per_request": latencies,
                               "latency_minutes": round(latency_min, 3), "rate_limit_minutes": round(rate_min, 3),
                               "endpoints": limits}


def write_estimate(est: Estimate, run_dir: Path) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "estimate.json"
    tmp = run_dir / ".estimate.json.tmp"
    tmp.write_text(json.dumps(est.model_dump(mode="json"), indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


__all__ = ["Estimate", "LargestPrompt", "RoleEstimate", "Totals", "cache_assumption", "cache_lines", "cache_tokens", "char_proxy",
           "completions_from_run", "estimate", "parse_reasoning", "prior_completions", "reasoning_line", "request_latency_s",
           "stable_prefix_tokens", "token_counter", "tokenizer_source", "wall_minutes", "write_estimate"]


def dry_run(cfg: RunConfig, output: str | Path | None = None, from_run: str | Path | None = None,
            reasoning: Mapping[str, float] | None = None) -> tuple[Estimate, Path]:
    """Plan the run, estimate it, write RUN_DIR/estimate.json; no model, no Ray, no session."""
    from ray_knowsim.plan.sessions import load_inputs

    inputs = load_inputs(cfg)
    plan = Plan(cfg, inputs)
    est = estimate(cfg, plan, inputs, from_run, reasoning)
    from ray_knowsim.preflight.design import adaptive_forecast, as_records, design_checks

    items = {task: len(its) for task, its in inputs.items.items()}
    est.design = as_records(design_checks(cfg, items))
    est.adaptive_forecast = adaptive_forecast(cfg, items)
    run_dir = Path(output) if output is not None else cfg.output_path()
    return est, write_estimate(est, run_dir)


def summary_lines(est: Estimate) -> list[str]:
    t = est.totals
    cost, up = usd_text(t.cost_usd, digits=2), usd_text(est.upper_bound.cost_usd, digits=2)
    lines = [f"dry run {est.name}: {est.n_sessions:,} sessions, {t.requests:,} requests, {t.prompt_tokens:,} prompt "
             f"({_share(t.cached_prompt_tokens, t.prompt_tokens)} cached) + {t.completion_tokens:,} completion tokens, cost {cost} "
             f"(completions at full budgets, nothing cached: {up}), ~{t.minutes:,.1f} min"]
    for role, e in est.per_role.items():
        c = usd_text(e.cost_usd, digits=2)
        lines.append(f"  {role}: {e.requests:,} requests, {e.prompt_tokens:,} prompt ({_share(e.cached_prompt_tokens, e.prompt_tokens)} "
                     f"cached) / {e.completion_tokens:,} completion tokens, {c}")
    lines += cache_lines(est.assumptions.get("prompt_cache") or {})
    lines.append(reasoning_line(est))
    lines += [d["line"] for d in est.design]
    from ray_knowsim.preflight.design import per_decision_lines

    return lines + per_decision_lines(t.cost_usd, t.prompt_tokens + t.completion_tokens, est.design, est.adaptive_forecast)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "0%"


def reasoning_line(est: Estimate) -> str:
    """The thinking assumed, or that none was: a reasoning model bills it as output, so an estimate
    without it under-states such a model's bill by whatever it thinks."""
    assumed = est.assumptions.get("reasoning_tokens_per_request")
    if not isinstance(assumed, Mapping) or not assumed:
        return ("  reasoning: none assumed; a model that thinks bills its thinking as output: "
                "--reasoning-tokens N (every role) or ROLE=N")
    per = ", ".join(f"{role} {n:,.0f}" for role, n in assumed.items())
    return (f"  reasoning: {per} tokens per request assumed, billed as output within max_tokens "
            f"({est.totals.reasoning_tokens:,} of the completion tokens)")


REASONING_ROLES = ("user_sim", "assistant", "extractor", "judge")


def parse_reasoning(specs: Sequence[str]) -> dict[str, float]:
    """``--reasoning-tokens`` values: ``N`` (every role) or ``ROLE=N``, later ones winning."""
    out: dict[str, float] = {}
    for spec in specs:
        role, _, n = spec.rpartition("=")
        if role and role not in REASONING_ROLES:
            raise ValueError(f"--reasoning-tokens {spec}: no role {role!r} (one of {', '.join(REASONING_ROLES)})")
        try:
            value = float(n)
        except ValueError:
            raise ValueError(f"--reasoning-tokens {spec}: {n!r} is not a number of tokens") from None
        if not value >= 0:
            raise ValueError(f"--reasoning-tokens {spec}: tokens cannot be negative")
        out.update({r: value for r in ([role] if role else REASONING_ROLES)})
    return out


def cache_lines(assumed: Mapping[str, Any]) -> list[str]:
    """The prompt-cache assumption in words (the dry run's terminal lines): a cost that rests on
    cached prices says what it assumed of each model's cache."""
    if "cached_share" in assumed:
        return [f"  prompt cache: {assumed['source']}"]
    out = ["  prompt cache: " + str(assumed.get("source", "none assumed"))]
    for key, t in (assumed.get("models") or {}).items():
        rates = (f"cached ${t['cached_input']:g}, cache write ${t['cache_write']:g} per million prompt tokens"
                 if t.get("cached_input") is not None else NO_PRICE)
        out.append(f"    {key}: cache minimum {t['min_tokens']:,} tokens ({t['min_tokens_from']}); {rates}")
    return out
