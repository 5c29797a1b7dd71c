"""Result rows: the contract between the run (``run/``, the writer) and sweep / report / validate (readers).

A run directory holds two Parquet tables:
* ``sessions/`` — one :class:`SessionRow` per finished (or explicitly failed) conversation;
* ``turns/``    — one :class:`TurnRow` per (session, turn): the trajectory.
Metric names follow the paper: KG, NKG, DC (exact absorbed F1, weakest-prerequisite ceiling),
IC (the reference's ic_f1), CO (capacity), PO (excess share); ``*_es`` = at the virtual early stop.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, create_model

from ray_knowsim.schema.chat import Usage
from ray_knowsim.schema.metrics import BUILTIN_METRICS, check_free_column, outside_metrics, reserve_columns, row_fields
from ray_knowsim.schema.metrics import names as metric_names

FAILURE_MODES: tuple[str, ...] = ("redundant", "prereq_blocked", "effective", "overload_wasted", "under_absorbed")
ROLES: tuple[str, ...] = ("user_sim", "assistant", "extractor", "judge")
#: metrics where lower is better (ranking direction), final and at the early stop
LOWER_IS_BETTER: frozenset[str] = frozenset(
    c for m in BUILTIN_METRICS if not m.higher_is_better for c in (m.name, m.es_name) if c is not None
)
#: the metric columns every session row carries (final, then at the early stop)
SESSION_METRICS: tuple[str, ...] = metric_names(source="state")
#: every metric a run's tables reduce and a decision can be about: the session metrics, the
#: judge's interaction quality, then the session metrics at the early stop
RUN_METRICS: tuple[str, ...] = (*SESSION_METRICS, *metric_names(source="judge"), *metric_names(source="state", variant="es"))
#: the metrics `ray-knowsim compare` (and a fixed run's design check) tests by default
COMPARE_METRICS: tuple[str, ...] = metric_names(compared=True)

#: token counters kept per role as ``<kind>_<role>`` columns: the total, then prompt / completion /
#: cached-prompt tokens (new spend; hits of the run's own response cache are free)
TOKEN_KINDS: tuple[str, ...] = ("tokens", "prompt_tokens", "completion_tokens", "cached_prompt_tokens")
#: per-session counts of how the judges drifted (score columns, ray_knowsim.score.store): repairs
#: made to read accepted answers, refused answers, and warnings on accepted ones
JUDGE_DRIFT: tuple[str, ...] = ("judge_repairs", "judge_refusals", "judge_warnings")
#: every per-session drift count the tables sum per cell and the report totals: the extractor's
#: (session columns), truncated answers, then the judges' (joined in from the primary score set)
DRIFT_COLUMNS: tuple[str, ...] = ("extractor_repairs", "extractor_refusals", "llm_truncations", *JUDGE_DRIFT)
#: the roles of the simulation loop (the judges are a stage of their own, ray_knowsim.score)
SIMULATION_ROLES: tuple[str, ...] = ("user_sim", "assistant", "extractor")
#: the roles whose truncated answers each session row counts (``llm_truncations_<role>``)
TRUNCATION_ROLES: tuple[str, ...] = SIMULATION_ROLES
#: the most characters of a failure's reason a session row keeps (``error_detail``)
ERROR_DETAIL_CHARS = 500


def truncation_column(role: str) -> str:
    """The session column counting ``role``'s answers cut by max_tokens, e.g. ``llm_truncations_assistant``."""
    return f"llm_truncations_{role}"


def token_columns(role: str) -> dict[str, str]:
    """``{kind: column}`` for one role, e.g. ``{"prompt_tokens": "prompt_tokens_judge", ...}``."""
    return {kind: f"{kind}_{role}" for kind in TOKEN_KINDS}


def usage_columns(role: str, usage: Usage) -> dict[str, int]:
    """The role's token columns filled from its summed usage."""
    values = {"tokens": usage.total, "prompt_tokens": usage.prompt_tokens,
              "completion_tokens": usage.completion_tokens, "cached_prompt_tokens": usage.cached_prompt_tokens}
    return {column: values[kind] for kind, column in token_columns(role).items()}


class _SessionHead(BaseModel):
    """The session's identity and outcome columns (the metric columns follow, then the rest)."""

    model_config = ConfigDict(extra="forbid")
    # identity
    run_id: str
    config_hash: str
    session_id: str  # "<task>/<item_id>/<level>/<condition>/<trial>"
    task: str
    item_id: str
    knowledge_level: str
    condition: str  # e.g. "gpt-x:adaptive" or "baseline:zero-shot-cot"
    assistant_model: str
    assistant_strategy: str
    simulator: str  # "structured" | "zero-shot" | "zero-shot-cot" | "zero-shot-cot-user-profile"
    trial: int
    seed: int
    rules_preset: str
    graph_size: int
    tau: int
    iu_labels: list[str]
    initial_states: list[int]  # graph node order
    graph_json: str  # the IU graph used, so trajectories can be re-scored without the cache
    # outcome
    status: str  # "ok" | "failed"
    turns: int
    stop_reason: str
    early_stop_turn: int | None = None  # 1-based turn of the virtual early stop (None: none)
    early_stop_reason: str | None = None  # "mastery" | "cognitive_overload" | judge reason
    error: str | None = None
    # why it failed, in the failing party's words (bounded to ERROR_DETAIL_CHARS, secrets masked):
    # for an HTTP error its status and the server's message ("HTTP 400: max_tokens=8192 cannot be
    # greater than max_model_len=4096"), for an unreadable answer the parser's complaint
    error_detail: str | None = None
    # resume bookkeeping, set by the engine when it commits the row (the loop leaves the defaults):
    # which run of this session the row is (1 = first), the errors of the earlier runs (JSON list,
    # oldest first) and the class of this row's error (ray_knowsim.schema.failures.failure_class)
    attempt: int = 1
    previous_errors: str = "[]"
    failure_class: str | None = None  # "infra" | "model" | None (ok)
    # a baseline learner's closing message that got no reply (no turn row holds it); judges read it
    final_user_message: str | None = None


#: the metric columns, from the catalogue (ray_knowsim.schema.metrics): each state metric and its
#: parts (final; None for baselines, which carry no state), then at the virtual early stop, then the
#: LLM judge's (Interaction Quality 1-10): empty as the simulation writes it; the scoring stage
#: writes RUN_DIR/scores/ and readers join it in (ray_knowsim.score.store)
_SessionMetrics = create_model("_SessionMetrics", __base__=_SessionHead, __module__=__name__, **row_fields())


class _SessionCore(_SessionMetrics):  # type: ignore[misc, valid-type]
    """Every session column but the per-role token counters, which :data:`SessionRow` adds."""

    # the judge's further scores (beside IQ)
    judge_information_calibration: float | None = None
    judge_perceived_overload: float | None = None
    judge_perceived_learning: float | None = None
    # failure-mode counts over the whole conversation (spec §10)
    fm_redundant: int = 0
    fm_prereq_blocked: int = 0
    fm_effective: int = 0
    fm_overload_wasted: int = 0
    fm_under_absorbed: int = 0
    # cost
    llm_calls: int = 0  # answers that came from a model (cache hits and failed transport calls excluded)
    llm_cache_hits: int = 0  # answers served by the response cache
    llm_truncations: int = 0  # answers cut by max_tokens (each is retried once with the role's whole budget)
    # (per role: the llm_truncations_<role> columns SessionRow adds, one per TRUNCATION_ROLES)
    # extractor drift (live runs): normalised (e.g. "iu1" -> "IU1") and refused answers, summed over turns
    extractor_repairs: int = 0
    extractor_refusals: int = 0
    prompt_versions: str = "{}"  # JSON {template: version}
    user_profile: str = ""  # the learner profile a profile baseline was given (drawn from the seed)


#: one row per conversation: the core columns, the token counters of every role, the truncated
#: answers of each simulation role, then its cost in USD (None: a model has no price). Generated so
#: that a role added to ROLES / TRUNCATION_ROLES gets its columns.
SessionRow = create_model(
    "SessionRow",
    __base__=_SessionCore,
    __module__=__name__,
    # the simulation's roles' counts; the judge's are null here: the judges run as a stage of their
    # own after the row is committed (ray_knowsim.score), and the scores' join fills them in with
    # the judge's real counts, so a row never claims the judge spent 0
    **{column: (int, 0) for role in ROLES if role != "judge" for column in token_columns(role).values()},
    **{column: (int | None, None) for column in token_columns("judge").values()},
    **{truncation_column(role): (int, 0) for role in TRUNCATION_ROLES},
    cost_usd=(float | None, None),
)
# no outside metric may take one of these (the catalogue checks at registration; this module imports it, never the reverse)
reserve_columns(SessionRow.model_fields)


_WITH_OUTSIDE: dict[tuple[str, ...], type[BaseModel]] = {}


def session_row_model() -> type[BaseModel]:
    """:data:`SessionRow`, plus one ``float | None`` column per outside metric this process has
    registered (``docs/extending.md``, "Adding a metric"); SessionRow itself when there is none, so
    runs without plugin metrics write the schema they always wrote."""
    extra = tuple(m.name for m in outside_metrics())
    if not extra:
        return SessionRow
    if extra not in _WITH_OUTSIDE:
        for column in extra:  # again here: a metric registered before this module was imported was checked without the row's columns
            check_free_column(column)
        # a name of its own in this module, so its rows pickle (Ray) where the same plugins are imported
        name = "SessionRowWith_" + "_".join(extra)
        _WITH_OUTSIDE[extra] = create_model(name, __base__=SessionRow, __module__=__name__,
                                            **{m: (float | None, None) for m in extra})  # type: ignore[call-overload]
        globals()[name] = _WITH_OUTSIDE[extra]
    return _WITH_OUTSIDE[extra]


class TurnRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str
    session_id: str
    turn: int  # 1-based
    user_message: str
    assistant_message: str
    signals_json: str  # the normalised signal list of this turn (JSON list of spec §1.5 entries)
    states: list[int]  # post-turn state per IU, graph node order
    carries: list[float]  # post-turn fractional progress per IU
    comprehension_load: float
    attempt_load: float
    effective_load: float
    overload: bool
    eta: float
    n_upward_transitions: int
    absorbed_gain: float
    ic_numerator: int
    ic_denominator: int
    zpd_size: int
    absorbed_ic_numerator: int
    new_ius: int
    disallowed: int
    familiarity: float
    novelty: float
    engagement: float
    density: float
    fm_redundant: int = 0
    fm_prereq_blocked: int = 0
    fm_effective: int = 0
    fm_overload_wasted: int = 0
    fm_under_absorbed: int = 0
    # the extractor's drift this turn: what was normalised to read the accepted answer, and why
    # each refused answer was refused (JSON lists of strings; "[]" for baselines and replays)
    extractor_repairs: str = "[]"
    extractor_refusals: str = "[]"
