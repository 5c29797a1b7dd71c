"""The sweep config (YAML): which recorded conversations, which rule settings, what to report.

Why a model of its own: a sweep is submitted to a cluster and may run for an hour, so every
mistake a config can hold (unknown rule field, bad distribution, missing source, a setting that
breaks a rule precondition) must fail here or in ``space.expand``, before any work starts.
Relative paths are resolved against the config file's folder, so a config travels with its repo.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ray_knowsim.io.yamltext import load_yaml
from ray_knowsim.schema.results import SESSION_METRICS


class SweepConfigError(ValueError):
    """A sweep config that cannot run; the message says which field or setting and why."""


class RunDirSource(BaseModel):
    """A finished run directory of ours (``sessions/`` + ``turns/`` Parquet, schema/results.py)."""

    model_config = ConfigDict(extra="forbid")
    run_dir: str
    #: keep only these conditions / levels (None: all)
    conditions: list[str] | None = None
    levels: list[str] | None = None


class RecordsSource(BaseModel):
    """Reference-format record files (spec §1.6) plus the IU graph caches they refer to."""

    model_config = ConfigDict(extra="forbid")
    records: list[str] = Field(min_length=1)  # files or glob patterns
    graph_cache: list[str] = Field(min_length=1)
    #: "reference" keeps cycles and duplicate edges as the reference code did (its data has both)
    graph_mode: Literal["strict", "reference"] = "reference"
    #: how a record's condition is named: a format string over record fields and ``file`` (stem)
    condition: str = "{assistant_strategy}"
    levels: list[str] | None = None


class ParamDist(BaseModel):
    """One parameter's distribution for random sampling: exactly one of the fields."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    uniform: tuple[float, float] | None = None
    log_uniform: tuple[float, float] | None = None
    integer: tuple[int, int] | None = Field(None, alias="int")  # inclusive bounds
    choice: list[Any] | None = None

    @model_validator(mode="after")
    def _one(self) -> "ParamDist":
        given = [k for k in ("uniform", "log_uniform", "integer", "choice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of uniform / log_uniform / int / choice (got {given or 'none'})")
        for k in ("uniform", "log_uniform", "integer"):
            lo_hi = getattr(self, k)
            if lo_hi is not None and lo_hi[0] > lo_hi[1]:
                raise ValueError(f"{k}: lower bound {lo_hi[0]} is above upper bound {lo_hi[1]}")
        if self.log_uniform is not None and self.log_uniform[0] <= 0:
            raise ValueError("log_uniform bounds must be positive")
        if self.choice is not None and not self.choice:
            raise ValueError("choice needs at least one value")
        return self


class RandomSpace(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(ge=1)
    seed: int = 0
    params: dict[str, ParamDist] = Field(min_length=1)


class SpaceConfig(BaseModel):
    """Settings = the default (always setting 0) + grid product + random draws + explicit list.

    Parameter names are rule-config paths: ``capacity_ratio``, ``termination.window``,
    ``init_ratios.novice.known``, ``init_ratios.*.partial`` (every level), ``w_state.0``
    (one weight) or ``w_state`` (all four).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    grid: dict[str, list[Any]] | None = None
    random: RandomSpace | None = None
    explicit: list[dict[str, Any]] | None = Field(None, alias="list")

    @field_validator("grid")
    @classmethod
    def _grid_values(cls, grid: dict[str, list[Any]] | None) -> dict[str, list[Any]] | None:
        for name, values in (grid or {}).items():
            if not values:
                raise ValueError(f"grid parameter {name!r} has no values")
        return grid


class BaseRules(BaseModel):
    """The default setting: a preset plus overrides (the same paths as the space)."""

    model_config = ConfigDict(extra="forbid")
    preset: str = "reference"
    overrides: dict[str, Any] = Field(default_factory=dict)


class ReportConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: metric columns summarised per setting (any re-scored metric, e.g. nkg, dc, co, nkg_es)
    metrics: list[str] = Field(default_factory=lambda: list(SESSION_METRICS))
    #: rankings of conditions are compared with the default's on these metrics (first = primary)
    ranking_metrics: list[str] = Field(default_factory=lambda: ["nkg"])
    #: what is ranked (a conversation column) and within which groups ("levels")
    rank_by: str = "condition"
    group_by: list[str] = Field(default_factory=lambda: ["knowledge_level"])
    #: numeric parameters with more distinct values than this are binned into quantiles
    max_levels_per_param: int = Field(8, ge=2)
    #: parameters drawn, most influential first
    max_param_plots: int = Field(6, ge=0)
    plots: bool = True


class ExecutionConfig(BaseModel):
    """How the work is cut and run. Only ``conversations_per_block`` is part of the sweep's
    identity (partial sums are per block); everything else may change between a start and a
    resume, on another cluster, without redoing or changing anything (docs/sweep.md)."""

    model_config = ConfigDict(extra="forbid")
    backend: Literal["auto", "kernel", "python"] = "auto"
    #: conversations per block (None: min(conversations, 1000)); changing it makes another sweep
    conversations_per_block: int | None = Field(None, ge=1)
    #: settings per Ray task; None = sized from the cluster: at most ``target_task_seconds`` of
    #: work per task, and at least 4 tasks per CPU of the cluster while enough work is left
    settings_per_task: int | None = Field(None, ge=1)
    target_task_seconds: float = Field(3.0, gt=0)
    #: size tasks for this many CPUs instead of the CPUs the cluster has when the sweep starts
    #: (an autoscaling cluster: its maximum size)
    cluster_cpus: int | None = Field(None, ge=1)
    #: CPUs of a local Ray this sweep starts (None: all cores); ignored when joining a cluster
    num_cpus: int | None = Field(None, ge=1)
    #: tasks in flight per CPU of the cluster (bounds object-store memory)
    inflight_per_cpu: int = Field(2, ge=1)


class SweepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "sweep"
    source: RunDirSource | RecordsSource
    base: BaseRules = BaseRules()
    space: SpaceConfig = SpaceConfig()
    #: keep: the recorded initial states; resample: draw new ones for every setting (seeded by
    #: conversation, shared by all settings); resample_if_changed: only for settings that change
    #: an initial-state rule (init_ratios, init_placement, init_partial_demotion, include_struggling)
    initial_states: Literal["keep", "resample", "resample_if_changed"] = "keep"
    init_seed: int = 0
    #: temporal-decay horizon; None = each conversation's own (its recorded turns)
    max_turns: int | None = Field(None, ge=1)
    output: str = "sweeps/sweep"
    report: ReportConfig = ReportConfig()
    execution: ExecutionConfig = ExecutionConfig()
    #: the folder relative paths are resolved against (set by ``load_sweep_config``)
    config_dir: str = "."

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else (Path(self.config_dir) / p).resolve()


def load_sweep_config(path: str | Path, **overrides: Any) -> SweepConfig:
    """Read a YAML sweep config; ``overrides`` replace top-level keys (e.g. ``output``)."""
    path = Path(path)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise SweepConfigError(f"cannot read sweep config {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise SweepConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SweepConfigError(f"{path}: expected a mapping at the top level")
    data.update({k: v for k, v in overrides.items() if v is not None})
    data.setdefault("config_dir", str(path.resolve().parent))
    return parse_sweep_config(data, where=str(path))


def parse_sweep_config(data: dict[str, Any], where: str = "sweep config") -> SweepConfig:
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
            lines.append(f"  {loc}: {err.get('msg', 'invalid')}")
        raise SweepConfigError(f"{where}: invalid sweep config:\n" + "\n".join(lines)) from exc


__all__ = [
    "BaseRules",
    "ExecutionConfig",
    "ParamDist",
    "RandomSpace",
    "RecordsSource",
    "ReportConfig",
    "RunDirSource",
    "SpaceConfig",
    "SweepConfig",
    "SweepConfigError",
    "load_sweep_config",
    "parse_sweep_config",
]
