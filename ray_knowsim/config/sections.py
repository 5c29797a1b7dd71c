"""The sections of a run config: tasks, roles, conditions, rules and engine settings."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from ray_knowsim.config.base import Strict, _loc, _msg
from ray_knowsim.schema.roles import ROLE_DEFAULTS
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS, PROMPT_SETS
from ray_knowsim.rules.config import PRESETS, RuleConfig, rules_from
from ray_knowsim.sim.types import RoleSettings

#: the product's simulation loop. The worker imports it (run.worker.load_shard_fn), never loads
#: it by this string; the string stays the field's default because the config hash includes it
#: (runs that leave the default keep the hash they always had).
DEFAULT_SHARD_FN = "ray_knowsim.sim.shard:run_shard"



class TaskConfig(Strict):
    """One benchmark task: its items, their IU graphs, and which items to use."""

    name: Literal["math", "expertqa"]
    items: str  # JSONL (spec §1.1)
    graphs: str  # IU graph cache (spec §1.2)
    init_cache: str | None = None  # overrides the run-level init_cache for this task
    split: str | None = None  # keep items whose ``split`` list holds this (benchmarking, validation, demo)
    item_ids: list[str] | None = None  # keep these ids (in this order)
    limit: int | None = Field(None, ge=1)  # then keep the first N



class RoleConfig(Strict):
    """How a role is asked. ``user_sim: sim`` is short for ``user_sim: {model: sim}``. Every
    setting left out takes the role's default (:data:`ray_knowsim.schema.roles.ROLE_DEFAULTS`)."""

    model: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)  # the cap; the first try gets less (schema/roles.py)
    # tries an unreadable answer gets before the session fails (each repair names the latest
    # complaint); a truncated answer gets one more call with the whole max_tokens on top. Transport
    # errors are retried by the HTTP client (max_attempts), never here.
    attempts: int | None = Field(None, ge=1)
    # temperature of the repair rounds of an unreadable answer (default: the extractor 0.4, the
    # other roles their own temperature); recorded in the manifest's resolved ``roles``
    repair_temperature: float | None = Field(None, ge=0, le=2)

    def resolved(self, role: str) -> RoleSettings:
        """This role's settings over its defaults (the model key as given, "" when unset)."""
        d = ROLE_DEFAULTS[role]
        temperature = d.temperature if self.temperature is None else self.temperature
        repair = self.repair_temperature if self.repair_temperature is not None else d.repair_temperature
        return RoleSettings(
            model=self.model or "", temperature=temperature,
            max_tokens=d.max_tokens if self.max_tokens is None else self.max_tokens,
            attempts=d.attempts if self.attempts is None else self.attempts,
            repair_temperature=temperature if repair is None else repair,
        )  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"model": value} if isinstance(value, str) else value


class RolesConfig(Strict):
    user_sim: RoleConfig
    extractor: RoleConfig
    assistant: RoleConfig = Field(default_factory=RoleConfig)  # model: default for conditions
    judge: RoleConfig | None = None  # None: no LLM judge (IQ stays empty)

    @model_validator(mode="after")
    def _check(self) -> "RolesConfig":
        for role in ("user_sim", "extractor"):
            if getattr(self, role).model is None:
                raise ValueError(f"{role}.model: required")
        if self.judge is not None and self.judge.model is None:
            raise ValueError("judge.model: required (or set judge: null for no judge)")
        return self

    def settings(self, role: str) -> RoleSettings:
        """A role's settings over its defaults; a role without a config (no judge) gets the defaults."""
        return (getattr(self, role) or RoleConfig()).resolved(role)

    def hash_view(self, dumped: dict[str, Any]) -> dict[str, Any]:
        """``dumped`` (this section as JSON) as the config hash sees it: settings added since runs
        were first hashed stay out while unset, so older run directories stay resumable."""
        out = dict(dumped)
        for role, rc in out.items():
            if isinstance(rc, dict):
                rc = out[role] = dict(rc)
                if rc.get("attempts") is None:
                    rc["attempts"] = ROLE_DEFAULTS[role].attempts  # was a field default of the same value
                if rc.get("repair_temperature") is None:
                    rc.pop("repair_temperature", None)
        return out


def _registered(registry: Any, what: str, name: str) -> str:
    """``name`` when the registry knows it; the error lists what is registered (plugins add more)."""
    if name not in registry:
        raise ValueError(f"unknown {what} {name!r}; registered: {registry.names()} (plugins register more)")
    return name


class ConditionConfig(Strict):
    """What is compared: an assistant model with a strategy, talking to a simulator kind."""

    name: str | None = None  # default "<assistant>:<strategy>", baselines "baseline:<simulator>"
    assistant: str | None = None  # model key; default roles.assistant.model
    strategy: str = "minimal"  # a registered tutor strategy (ray_knowsim.strategies); "minimal" = Simple
    simulator: str = "structured"  # a registered simulator (ray_knowsim.simulators)

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, v: str) -> str:
        from ray_knowsim.strategies import STRATEGIES

        return _registered(STRATEGIES, "strategy", v)

    @field_validator("simulator")
    @classmethod
    def _known_simulator(cls, v: str) -> str:
        from ray_knowsim.simulators import SIMULATORS

        return _registered(SIMULATORS, "simulator", v)

    @property
    def structured(self) -> bool:
        from ray_knowsim.simulators import SIMULATORS

        return SIMULATORS.get(self.simulator).structured


class PromptsConfig(Strict):
    """Which prompt set the roles get, and which definition of connectable unknowns (spec §12.7)."""

    version: Literal[PROMPT_SETS] = DEFAULT_PROMPTS  # older sets re-render the prompts of earlier runs
    connectable: Literal["reference", "paper"] = "reference"


class RulesSection(Strict):
    """A rule preset plus field overrides (``rules_from``); checked before anything runs."""

    preset: str = "reference"
    overrides: dict[str, Any] = Field(default_factory=dict)
    _rules: RuleConfig | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _build(self) -> "RulesSection":
        if self.preset not in PRESETS:
            raise ValueError(f"preset: unknown rule preset {self.preset!r}; choose one of {sorted(PRESETS)}")
        try:
            self._rules = rules_from(self.preset, **self.overrides)
        except ValidationError as exc:
            raise ValueError("\n".join(f"overrides.{_loc(e)}: {_msg(e)}" for e in exc.errors())) from None
        return self

    @property
    def config(self) -> RuleConfig:
        if self._rules is None:  # set by the validator; only a bypassed validation leaves it empty
            raise RuntimeError("rules section used before validation")
        return self._rules


class FailFastConfig(Strict):
    """``engine.fail_fast``: when a run whose sessions fail the same way stops early (the rule and
    why: run/fail_fast.py); ``engine.fail_fast: null`` never stops a run early."""

    min_finished: int = Field(20, ge=1)  # sessions finished in this invocation before ``share`` applies
    share: float | None = Field(0.9, gt=0, le=1)  # stop when one error code has this share of them
    count: int | None = Field(None, ge=1)  # stop when one error code reached this many sessions

    @model_validator(mode="after")
    def _one_rule(self) -> "FailFastConfig":
        if self.share is None and self.count is None:
            raise ValueError("set share or count (or fail_fast: null to never stop early)")
        return self

    def describe(self) -> str:
        rules = []
        if self.share is not None:
            rules.append(f"share {self.share:g} after {self.min_finished} sessions")
        if self.count is not None:
            rules.append(f"count {self.count}")
        return "engine.fail_fast: " + " or ".join(rules)


class EngineConfig(Strict):
    """How the work is cut and scheduled; none of it changes results. Resume is per session, so
    ``shard_size`` (and the condition grouping of a placement) may differ between invocations."""

    shard_size: int = Field(32, ge=1)  # sessions run at once (each on its own clock) by one shard
    shard_cpus: float = Field(1.0, gt=0)  # Ray CPUs per shard (< 1 for LLM-bound shards; see shards_per_worker)
    max_concurrent_shards: int | None = Field(None, ge=1)  # default: cluster CPUs / shard_cpus
    # shards run together in one worker process (one Ray task asking for their CPUs together, one
    # event loop); default (None): as many as share one CPU (worker_shards); 1: a process each
    shards_per_worker: int | None = Field(None, ge=1)
    shard_retries: int = Field(2, ge=0)  # Ray re-runs of a shard whose worker died
    num_cpus: int | None = Field(None, ge=1)  # local Ray only (default: all cores)
    object_store_mb: int = Field(256, ge=64)  # local Ray only
    llm_cache: bool = True  # reuse identical reproducible LLM answers (RUN_DIR/cache) on resume
    shard_fn: str = DEFAULT_SHARD_FN  # "module:function" with run_shard's signature
    # finished sessions are committed in small steps within a shard (a crash loses only the
    # sessions in flight): every ``commit_every`` sessions, or ``commit_every_s`` seconds after the
    # first one still uncommitted, whichever comes first; the steps are folded into one commit
    # when the shard ends
    commit_every: int = Field(8, ge=1)
    commit_every_s: float = Field(30.0, gt=0)
    # most runs of one session over all invocations: a failure that keeps coming back (a seeded
    # model failing the same way, an endpoint that stays down) is rerun at most this often
    max_session_attempts: int = Field(3, ge=1)
    shard_fn_options: dict[str, Any] = Field(default_factory=dict)  # keyword args for shard_fn
    # stop a run whose finished sessions fail with one error code (run/fail_fast.py)
    fail_fast: FailFastConfig | None = Field(default_factory=FailFastConfig)

    def worker_shards(self) -> int:
        """How many shards one worker process runs together: ``shards_per_worker``, or as many as
        share one CPU (``1 / shard_cpus`` rounded down, at least 1), never more than
        ``max_concurrent_shards``. LLM-bound shards wait on their
        endpoints; several in one process cost less CPU per request than as many processes
        (docs/performance.md, "The ninth round"), and each keeps its own in-flight cap."""
        shards = self.shards_per_worker or max(1, int(1.0 / self.shard_cpus + 1e-9))
        return min(shards, self.max_concurrent_shards) if self.max_concurrent_shards else shards

    @field_validator("shard_fn")
    @classmethod
    def _check_fn(cls, v: str) -> str:
        if v.count(":") != 1 or not all(v.split(":")):
            raise ValueError("shard_fn must look like 'package.module:function'")
        return v
