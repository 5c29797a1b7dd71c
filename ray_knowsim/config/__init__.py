"""The run configuration: one YAML file validates into :class:`RunConfig` before any work starts.

Every section forbids unknown keys, so a typo is an error naming its key path
(``tasks.0.itemz: unknown key``). Input paths are relative to the config file; ``${VAR}`` expands
an environment variable (an unset one is an error) and ``pkg:demo/x.json`` names a file shipped
inside the package. Model sections hold no secrets, only the NAMES of environment variables.

Modules: :mod:`.base` (strict base, errors), :mod:`.model_entries` (the `models:` entries, validated
against the backends registered now; each built-in entry class lives with its backend in
``ray_knowsim/backends/``),
:mod:`.sections` (tasks, roles, conditions, rules, engine, prompts), :mod:`.run` (RunConfig),
:mod:`.loading` (YAML, overrides, paths).
"""

from ray_knowsim.config.base import ConfigError, format_errors
from ray_knowsim.config.loading import apply_overrides, load_run_config, parse_run_config, resolve_path
from ray_knowsim.config.model_entries import HTTPModelEntry, ModelEntry, OfflineModelEntry, VLLMModelEntry
from ray_knowsim.config.run import Level, RunConfig
from ray_knowsim.config.sections import (
    DEFAULT_SHARD_FN,
    ConditionConfig,
    EngineConfig,
    PromptsConfig,
    RoleConfig,
    RolesConfig,
    RulesSection,
    TaskConfig,
)

__all__ = [
    "DEFAULT_SHARD_FN",
    "ConditionConfig",
    "ConfigError",
    "EngineConfig",
    "PromptsConfig",
    "HTTPModelEntry",
    "Level",
    "ModelEntry",
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
