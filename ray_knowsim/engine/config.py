"""The run configuration: one YAML file validates into :class:`RunConfig` before any work starts.

Every section forbids unknown keys, so a typo is an error naming its key path
(``tasks.0.itemz: unknown key``). Input paths are relative to the config file; ``${VAR}`` expands
an environment variable (an unset one is an error) and ``pkg:demo/x.json`` names a file shipped
inside the package. Model sections hold no secrets, only the NAMES of environment variables.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ray_knowsim.llm.http_backend import HTTPModelConfig
from ray_knowsim.llm.vllm_backend import VLLMModelConfig
from ray_knowsim.model.states import KNOWLEDGE_LEVELS
from ray_knowsim.rules.config import PRESETS, RuleConfig, rules_from

Level = Literal["novice", "intermediate", "advanced"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")  # no "/": names are parts of session ids
_SUBPATH = re.compile(r"^[A-Za-z_][\w.]*: ")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_SHARD_FN = "ray_knowsim.sim.shard:run_shard"


class ConfigError(ValueError):
    """A config that cannot be used; ``errors`` lists ``"key.path: message"`` lines."""

    def __init__(self, errors: list[str], source: str = "") -> None:
        self.errors = errors
        head = f"{source}: " if source else ""
        super().__init__(head + "invalid run config:\n" + "\n".join(f"  {e}" for e in errors))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ----------------------------------------------------------------------------- inputs


class TaskConfig(_Strict):
    """One benchmark task: its items, their IU graphs, and which items to use."""

    name: Literal["math", "expertqa"]
    items: str  # JSONL (spec §1.1)
    graphs: str  # IU graph cache (spec §1.2)
    init_cache: str | None = None  # overrides the run-level init_cache for this task
    split: str | None = None  # keep items whose ``split`` list holds this (benchmarking, validation, demo)
    item_ids: list[str] | None = None  # keep these ids (in this order)
    limit: int | None = Field(None, ge=1)  # then keep the first N


# ----------------------------------------------------------------------------- models


class OfflineModelEntry(_Strict):
    """The deterministic offline model (no network, no key): demos, tests, benchmarks."""

    backend: Literal["offline"]
    name: str | None = None  # identity in caches / results; default: the model key
    options: dict[str, Any] = Field(default_factory=dict)  # passed to the offline model


class HTTPModelEntry(HTTPModelConfig):
    """Any OpenAI-compatible endpoint (see :class:`HTTPModelConfig` for every field)."""

    backend: Literal["http"]

    def http_config(self) -> HTTPModelConfig:
        return HTTPModelConfig.model_validate(self.model_dump(exclude={"backend"}))


class VLLMModelEntry(VLLMModelConfig):
    """A pool of Ray actors each running a ``vllm.LLM`` engine (see :class:`VLLMModelConfig`)."""

    backend: Literal["vllm"]

    def vllm_config(self) -> VLLMModelConfig:
        return VLLMModelConfig.model_validate(self.model_dump(exclude={"backend"}))


ModelEntry = Annotated[Union[OfflineModelEntry, HTTPModelEntry, VLLMModelEntry], Field(discriminator="backend")]

# Fields that change how fast or how safely a model is reached, not what it answers: they stay
# out of the config hash, so tuning them does not invalidate a run directory for resume.
_OPERATIONAL = {
    "http": {"timeout_s", "max_attempts", "backoff", "max_in_flight", "requests_per_minute", "tokens_per_minute",
             "max_in_flight_global", "api_key_env", "api_key_header", "send_knowsim_headers", "offline_server"},
    "vllm": {"replicas", "lifetime", "max_batch_requests", "num_cpus", "env"},
    "offline": set(),
}


# ----------------------------------------------------------------------------- roles, conditions

_ROLE_DEFAULTS = {  # spec §12: temperatures and token budgets of the paper runs
    "user_sim": (0.7, 3000),
    "assistant": (0.0, 3000),
    "extractor": (0.0, 8192),
    "judge": (0.0, 4096),
}


class RoleConfig(_Strict):
    """How a role is asked. ``user_sim: sim`` is short for ``user_sim: {model: sim}``."""

    model: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    attempts: int = Field(3, ge=1)  # tries of one request (error / unparsable) before the session fails

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"model": value} if isinstance(value, str) else value


class RolesConfig(_Strict):
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

    def settings(self, role: str) -> tuple[str, float, int, int]:
        cfg: RoleConfig = getattr(self, role)
        temp, max_tokens = _ROLE_DEFAULTS[role]
        return (
            cfg.model or "",
            temp if cfg.temperature is None else cfg.temperature,
            max_tokens if cfg.max_tokens is None else cfg.max_tokens,
            cfg.attempts,
        )


class ConditionConfig(_Strict):
    """What is compared: an assistant model with a strategy, talking to a simulator kind."""

    name: str | None = None  # default "<assistant>:<strategy>", baselines "baseline:<simulator>"
    assistant: str | None = None  # model key; default roles.assistant.model
    strategy: Literal["minimal", "adaptive", "comprehensive", "socratic"] = "minimal"
    simulator: Literal["structured", "zero-shot", "zero-shot-cot", "zero-shot-cot-user-profile"] = "structured"


class RulesSection(_Strict):
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
        assert self._rules is not None
        return self._rules


class EngineConfig(_Strict):
    """How the work is cut and scheduled; none of it changes results except ``shard_size``,
    which fixes the shard layout of a run directory (resume needs the same value)."""

    shard_size: int = Field(32, ge=1)  # sessions advanced in lockstep by one Ray task
    shard_cpus: float = Field(1.0, gt=0)  # Ray CPUs per shard task (< 1 for LLM-bound shards)
    max_concurrent_shards: int | None = Field(None, ge=1)  # default: cluster CPUs / shard_cpus
    shard_retries: int = Field(2, ge=0)  # Ray re-runs of a shard whose worker died
    num_cpus: int | None = Field(None, ge=1)  # local Ray only (default: all cores)
    object_store_mb: int = Field(256, ge=64)  # local Ray only
    llm_cache: bool = True  # reuse identical reproducible LLM answers (RUN_DIR/cache) on resume
    shard_fn: str = DEFAULT_SHARD_FN  # "module:function" with run_shard's signature
    shard_fn_options: dict[str, Any] = Field(default_factory=dict)  # keyword args for shard_fn

    @field_validator("shard_fn")
    @classmethod
    def _check_fn(cls, v: str) -> str:
        if v.count(":") != 1 or not all(v.split(":")):
            raise ValueError("shard_fn must look like 'package.module:function'")
        return v


# ----------------------------------------------------------------------------- the run


class RunConfig(_Strict):
    name: str = "run"
    tasks: list[TaskConfig] = Field(min_length=1)
    init_cache: str | None = None  # initial-state cache (spec §1.3); missing states are sampled
    graph_mode: Literal["strict", "reference"] = "strict"
    levels: list[Level] = Field(default_factory=lambda: list(KNOWLEDGE_LEVELS), min_length=1)
    models: dict[str, ModelEntry] = Field(min_length=1)
    roles: RolesConfig
    conditions: list[ConditionConfig] = Field(min_length=1)
    rules: RulesSection = Field(default_factory=RulesSection)
    trials: int = Field(1, ge=1)
    seed: int = 42
    max_turns: int = Field(15, ge=1)
    early_stop: Literal["virtual", "stop"] = "virtual"
    output_dir: str = "runs/{name}"  # relative to the config file; {name} is replaced
    engine: EngineConfig = Field(default_factory=EngineConfig)

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("name may use letters, digits and _ . : + - (no spaces or slashes)")
        return v

    @model_validator(mode="after")
    def _check(self) -> "RunConfig":
        errors: list[str] = []
        names = [t.name for t in self.tasks]
        for n in sorted({n for n in names if names.count(n) > 1}):
            errors.append(f"tasks: task {n!r} appears twice")
        if len(set(self.levels)) != len(self.levels):
            errors.append("levels: a level appears twice")
        for key in self.models:
            if not _NAME.match(key):
                errors.append(f"models.{key}: model keys may use letters, digits and _ . : + -")
        for role in ("user_sim", "extractor", "judge", "assistant"):
            cfg = getattr(self.roles, role)
            if cfg is not None and cfg.model is not None and cfg.model not in self.models:
                errors.append(f"roles.{role}.model: unknown model {cfg.model!r}; defined: {sorted(self.models)}")
        seen: dict[str, int] = {}
        for k, cond in enumerate(self.conditions):
            key = cond.assistant or self.roles.assistant.model
            if key is None:
                errors.append(f"conditions.{k}.assistant: required (or set roles.assistant.model)")
            elif key not in self.models:
                errors.append(f"conditions.{k}.assistant: unknown model {key!r}; defined: {sorted(self.models)}")
            name = self.condition_name(cond)
            if not _NAME.match(name):
                errors.append(f"conditions.{k}.name: {name!r} may use letters, digits and _ . : + - only")
            if name in seen:
                errors.append(f"conditions.{k}: name {name!r} repeats condition {seen[name]}; give each a distinct name")
            seen.setdefault(name, k)
        if errors:
            raise ValueError("\n".join(errors))
        return self

    # ---- derived views ----------------------------------------------------------------------

    def condition_name(self, cond: ConditionConfig) -> str:
        if cond.name:
            return cond.name
        if cond.simulator != "structured":
            return f"baseline:{cond.simulator}"
        return f"{cond.assistant or self.roles.assistant.model}:{cond.strategy}"

    def condition_names(self) -> list[str]:
        return [self.condition_name(c) for c in self.conditions]

    @property
    def rule_config(self) -> RuleConfig:
        return self.rules.config

    @property
    def base_dir(self) -> Path:
        return self._base_dir

    def resolve(self, raw: str) -> Path:
        """An input path as the config means it (see the module docstring)."""
        return resolve_path(raw, self._base_dir)

    def output_path(self) -> Path:
        return resolve_path(self.output_dir.replace("{name}", self.name), self._base_dir)

    def input_paths(self) -> dict[str, str]:
        """``{key path: raw path}`` of every input file."""
        out: dict[str, str] = {}
        if self.init_cache:
            out["init_cache"] = self.init_cache
        for k, t in enumerate(self.tasks):
            out[f"tasks.{k}.items"] = t.items
            out[f"tasks.{k}.graphs"] = t.graphs
            if t.init_cache:
                out[f"tasks.{k}.init_cache"] = t.init_cache
        return out

    def check_files(self) -> list[str]:
        """Errors (``key.path: message``) for input files that are missing or unreadable."""
        errors = []
        for key, raw in self.input_paths().items():
            try:
                path = self.resolve(raw)
            except ValueError as exc:
                errors.append(f"{key}: {exc}")
                continue
            if not path.is_file():
                errors.append(f"{key}: file not found: {path}")
        return errors

    def public_dict(self) -> dict[str, Any]:
        """The config as written to the manifest (it holds no secrets: only env var names)."""
        return self.model_dump(mode="json")

    def config_hash(self) -> str:
        """What decides the results: the config minus output/engine settings, minus operational
        model knobs, plus the content of every input file. Equal hash = resumable run dir."""
        data = self.model_dump(mode="json", exclude={"output_dir", "engine"})
        for key, model in data["models"].items():
            for field in _OPERATIONAL[model["backend"]]:
                model.pop(field, None)
        data["engine"] = {"shard_fn": self.engine.shard_fn, "shard_fn_options": self.engine.shard_fn_options}
        data["rules"] = self.rule_config.model_dump(mode="json")
        data["inputs"] = {key: _file_digest(self.resolve(raw)) for key, raw in sorted(self.input_paths().items())}
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- loading


def resolve_path(raw: str, base_dir: Path) -> Path:
    """``${VAR}`` expanded (unset: ValueError), ``pkg:`` inside the package, else relative to base."""

    def env(match: re.Match) -> str:
        value = os.environ.get(match.group(1))
        if not value:
            raise ValueError(f"environment variable {match.group(1)} (used in {raw!r}) is not set")
        return value

    text = _ENV.sub(env, raw)
    if text.startswith("pkg:"):
        return Path(str(resources.files("ray_knowsim").joinpath(text[4:])))
    path = Path(text).expanduser()
    return path if path.is_absolute() else (base_dir / path).resolve()


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def _loc(err: dict) -> str:
    parts = [str(p) for p in err.get("loc", ())]
    if len(parts) >= 3 and parts[0] == "models" and parts[2] in _OPERATIONAL:
        del parts[2]  # the discriminated union's tag ("http") repeats the backend key
    return ".".join(parts) or "(top level)"


def _msg(err: dict) -> str:
    if err.get("type") == "extra_forbidden":
        return "unknown key"
    msg = err.get("msg", "invalid")
    return msg[len("Value error, "):] if msg.startswith("Value error, ") else msg


def format_errors(exc: ValidationError) -> list[str]:
    """``key.path: message`` per error; multi-line validator messages become several lines."""
    out: list[str] = []
    for err in exc.errors():
        loc, msg = _loc(err), _msg(err)
        for line in msg.splitlines():
            sub = _SUBPATH.match(line)  # a validator's own "key.path: message" line
            if sub and loc == "(top level)":
                out.append(line)
            elif sub:
                out.append(f"{loc}.{line}")
            else:
                out.append(f"{loc}: {line}")
    return out


def parse_run_config(data: Any, base_dir: Path | str = ".", source: str = "", check_files: bool = True) -> RunConfig:
    """Validate a mapping into a RunConfig; ConfigError lists every problem with its key path."""
    if not isinstance(data, dict):
        raise ConfigError([f"(top level): expected a mapping of settings, got {type(data).__name__}"], source)
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(exc), source) from None
    cfg._base_dir = Path(base_dir).resolve()
    if check_files:
        errors = cfg.check_files()
        if errors:
            raise ConfigError(errors, source)
    return cfg


def apply_overrides(data: Any, assignments: list[str]) -> Any:
    """``key.path=value`` assignments (value parsed as YAML) applied to the raw config mapping;
    list items by index (``tasks.0.limit=2``)."""
    for text in assignments:
        key, sep, raw = text.partition("=")
        if not sep or not key:
            raise ConfigError([f"--set {text!r}: expected key.path=value"])
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError([f"--set {key}: value is not valid YAML ({exc})"]) from None
        node = data
        parts = key.split(".")
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            where = ".".join(parts[: depth + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ConfigError([f"--set {key}: {where} is not an index of the list"])
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    node = node.setdefault(part, {})
            else:
                raise ConfigError([f"--set {key}: {'.'.join(parts[:depth])} is not a mapping"])
    return data


def load_run_config(path: str | os.PathLike[str], check_files: bool = True, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run config; paths inside are relative to the file's folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read the file: {exc.strerror or exc}"], str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"], str(path)) from None
    if overrides:
        if not isinstance(data, dict):
            data = {}
        data = apply_overrides(data, overrides)
    return parse_run_config(data, path.resolve().parent, str(path), check_files)


__all__ = [
    "ConditionConfig",
    "ConfigError",
    "EngineConfig",
    "HTTPModelEntry",
    "OfflineModelEntry",
    "RoleConfig",
    "RolesConfig",
    "RulesSection",
    "RunConfig",
    "TaskConfig",
    "VLLMModelEntry",
    "apply_overrides",
    "format_errors",
    "load_run_config",
    "parse_run_config",
    "resolve_path",
]
