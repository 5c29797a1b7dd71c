"""The whole run: one YAML file validates into :class:`RunConfig` before any work starts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from ray_knowsim.config.adaptive import AdaptiveConfig
from ray_knowsim.config.base import NAME as _NAME
from ray_knowsim.config.base import ConfigError, Strict, format_errors
from ray_knowsim.io.paths import resolve_path
from ray_knowsim.config.model_entries import HASHED_IF_SET, answer_fields, validate_model_entries
from ray_knowsim.config.sections import (
    ConditionConfig,
    EngineConfig,
    PromptsConfig,
    RolesConfig,
    RulesSection,
    TaskConfig,
)
from ray_knowsim.schema.states import KNOWLEDGE_LEVELS
from ray_knowsim.registry import import_plugins
from ray_knowsim.rules.config import RuleConfig

Level = Literal["novice", "intermediate", "advanced"]


#: top-level sections the config hash leaves out: where the output goes, how the work is cut and
#: run (engine; its shard_fn is hashed on its own), and which planned sessions an adaptive run picks
UNHASHED_SECTIONS: tuple[str, ...] = ("output_dir", "engine", "adaptive")


class SimulatorModels(Strict):
    """One simulator of a ``simulators:`` list: its name (the run directory under the output) and
    the models of the learner and the extractor: a key of ``models:`` or an inline model entry."""

    name: str
    user_sim: str | dict[str, Any]
    extractor: str | dict[str, Any]


def file_digest(path: Path) -> str:
    """The first 16 hex digits of a file's sha256 (the config hash's digest of an input file)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


class RunConfig(Strict):
    name: str = "run"
    tasks: list[TaskConfig] = Field(min_length=1)
    init_cache: str | None = None  # initial-state cache (spec §1.3); missing states are sampled
    graph_mode: Literal["strict", "reference"] = "strict"
    levels: list[Level] = Field(default_factory=lambda: list(KNOWLEDGE_LEVELS), min_length=1)
    # Modules imported before anything else is validated, and in every worker: they register
    # backends, judges, strategies and simulators (docs/extending.md)
    plugins: list[str] = Field(default_factory=list)
    models: dict[str, Any] = Field(min_length=1)  # key -> a registered backend's entry (validated below)
    roles: RolesConfig
    conditions: list[ConditionConfig] = Field(min_length=1)
    rules: RulesSection = Field(default_factory=RulesSection)
    trials: int = Field(1, ge=1)
    seed: int = 42
    max_turns: int = Field(15, ge=1)
    early_stop: Literal["virtual", "stop"] = "virtual"
    output_dir: str = "runs/{name}"  # relative to the config file; {name} is replaced
    engine: EngineConfig = Field(default_factory=EngineConfig)
    prompts: PromptsConfig = Field(default_factory=PromptsConfig)
    # decide in rounds with fewer sessions (config/adaptive.py); outside the config hash
    adaptive: AdaptiveConfig | None = None
    # one design under several simulator models: `ray-knowsim run` makes one run per entry (its
    # own directory, manifest, resume, cost and audit; see simulator_configs), then their agreement
    simulators: list[SimulatorModels] | None = None

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("name may use letters, digits and _ . : + - (no spaces or slashes)")
        return v

    @model_validator(mode="before")
    @classmethod
    def _import_plugins(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("plugins"), list):
            import_plugins([str(m) for m in data["plugins"]])
        return data

    @field_validator("models", mode="before")
    @classmethod
    def _models(cls, v: Any) -> Any:
        return validate_model_entries(v)

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
        if self.adaptive is not None:
            if self.adaptive.round.trials is not None and self.adaptive.round.trials > self.trials:
                errors.append(f"adaptive.round.trials: {self.adaptive.round.trials} > trials {self.trials} (a round runs planned sessions only)")
            if len(self.conditions) < 2:
                errors.append("adaptive: needs at least two conditions to decide between")
            if "iq" in self.adaptive.metrics and self.roles.judge is None:
                errors.append("adaptive.metrics: iq needs a judge (roles.judge)")
        errors += self._check_simulators()
        if errors:
            raise ValueError("\n".join(errors))
        return self

    def _check_simulators(self) -> list[str]:
        if self.simulators is None:
            return []
        errors = [] if len(self.simulators) >= 2 else ["simulators: needs at least two entries (one design under several simulators)"]
        names = [s.name for s in self.simulators]
        for k, sim in enumerate(self.simulators):
            if not _NAME.match(sim.name):
                errors.append(f"simulators.{k}.name: {sim.name!r} may use letters, digits and _ . : + - only")
            if names.count(sim.name) > 1 and names.index(sim.name) == k:
                errors.append(f"simulators: name {sim.name!r} appears twice")
            for role in ("user_sim", "extractor"):
                value = getattr(sim, role)
                if isinstance(value, str) and value not in self.models:
                    errors.append(f"simulators.{k}.{role}: unknown model {value!r}; defined: {sorted(self.models)}")
                elif isinstance(value, dict):
                    try:
                        validate_model_entries({f"{sim.name}-{role}": value})
                    except ValueError as exc:
                        errors.append(f"simulators.{k}.{role}: {exc}")
        if self.adaptive is not None:
            errors.append("simulators: not with adaptive (run each simulator's adaptive design on its own)")
        return errors

    @classmethod
    def parse(cls, data: Any, base_dir: Path | str = ".", source: str = "", check_files: bool = True) -> "RunConfig":
        """Validate a mapping into a RunConfig whose relative paths resolve against ``base_dir``;
        ConfigError lists every problem with its key path. (Here, not in config/loading.py, which
        reads YAML and calls this: so this module imports nothing that imports it.)"""
        if not isinstance(data, dict):
            raise ConfigError([f"(top level): expected a mapping of settings, got {type(data).__name__}"], source)
        try:
            cfg = cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(format_errors(exc, data, cls), source) from None
        cfg._base_dir = Path(base_dir).resolve()
        if check_files:
            errors = cfg.check_files()
            if errors:
                raise ConfigError(errors, source)
        return cfg

    def simulator_configs(self) -> list[tuple[str, "RunConfig"]]:
        """(name, config) per entry of ``simulators``: this config with the entry's learner and
        extractor models in ``roles.user_sim`` / ``roles.extractor`` (an inline entry becomes the
        model ``<name>-<role>``), no ``simulators`` list, and only the models it uses -- so a
        simulator's run, hash and resume do not depend on the other entries."""
        out = []
        for sim in self.simulators or []:
            data = self.model_dump(mode="json", exclude={"simulators"})
            for role in ("user_sim", "extractor"):
                value = getattr(sim, role)
                key = value if isinstance(value, str) else f"{sim.name}-{role}"
                if not isinstance(value, str):
                    data["models"][key] = value
                data["roles"][role]["model"] = key
            used = {data["roles"][r]["model"] for r in ("user_sim", "extractor")}
            used |= {(data["roles"].get("judge") or {}).get("model"), data["roles"]["assistant"].get("model")}
            used |= {c.get("assistant") for c in data["conditions"]}
            data["models"] = {k: v for k, v in data["models"].items() if k in used}
            out.append((sim.name, RunConfig.parse(data, base_dir=self._base_dir, source=f"simulators.{sim.name}")))
        return out

    # ---- derived views ----------------------------------------------------------------------

    def condition_name(self, cond: ConditionConfig) -> str:
        if cond.name:
            return cond.name
        if not cond.structured:
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

    def role_settings(self) -> dict[str, Any]:
        """Every role's settings resolved over its defaults (the manifest records them): the judge's
        only when the run has one."""
        roles = ("user_sim", "assistant", "extractor", *(("judge",) if self.roles.judge is not None else ()))
        return {role: self.roles.settings(role) for role in roles}

    def budget_warnings(self, largest_graph: int | None = None) -> list[str]:
        """Roles whose first try already asks for their cap, so that a truncated answer cannot be
        asked again with more (:func:`ray_knowsim.schema.roles.budget_warning`); the extractor's
        first try grows with the graph (``largest_graph``: IUs of the run's largest)."""
        from ray_knowsim.schema.roles import budget_warning

        structured = any(c.structured for c in self.conditions)
        out = []
        for role, s in self.role_settings().items():
            if s.attempts < 2 or (role == "extractor" and not structured):
                continue  # no retry at all / no extractor call
            warning = budget_warning(role, s.max_tokens, largest_graph if role == "extractor" else None)
            if warning:
                out.append(warning)
        return out

    def public_dict(self) -> dict[str, Any]:
        """The config as written to the manifest (it holds no secrets: only env var names)."""
        return self.model_dump(mode="json", exclude=set() if self.simulators else {"simulators"})

    def config_hash(self) -> str:
        """What decides the results: the config minus output/engine settings, minus operational
        model knobs, minus the adaptive section (it picks which planned sessions run, not what they
        produce), plus the content of every input file. Equal hash = resumable run dir."""
        blob = json.dumps(self.hash_payload(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def hash_payload(self) -> dict[str, Any]:
        """What :meth:`config_hash` hashes (recorded in the manifest, so a refused resume can say
        which fields changed)."""
        data = self.model_dump(mode="json", exclude={*UNHASHED_SECTIONS, *(() if self.simulators else ("simulators",))})
        data["roles"] = self.roles.hash_view(data["roles"])
        if not data["plugins"]:
            del data["plugins"]  # configs without plugins keep the hashes they always had
        for key in list(data["models"]):
            model = data["models"][key] = answer_fields(data["models"][key])
            for field, default in HASHED_IF_SET.get(model["backend"], {}).items():
                if model.get(field) == default:
                    model.pop(field, None)
        data["engine"] = {"shard_fn": self.engine.shard_fn, "shard_fn_options": self.engine.shard_fn_options}
        data["rules"] = self.rule_config.model_dump(mode="json")
        data["inputs"] = {key: file_digest(self.resolve(raw)) for key, raw in sorted(self.input_paths().items())}
        return data
