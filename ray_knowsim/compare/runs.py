"""Read run directories for ``compare``: their session rows and what must agree to merge them.

Runs merge when their items, knowledge levels, rules and learner simulator agree; cells then pair
across runs when they are the same task, item, level and trial AND start from the same initial
state (``match``). Conditions are labelled ``<run>/<condition>`` once more than one run takes
part (``<run>`` = the run directory's name, made unique). The first difference found between a
run and the first run is the error, e.g. ``runs/b: rules.dropoff_softening 1.0 != 1.3 in runs/a``.
"""

from __future__ import annotations

import json
import hashlib
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from pydantic import BaseModel, ConfigDict

from ray_knowsim.compare.failures import OUTCOME_COLUMNS
from ray_knowsim.io.rundir import RunDirError, RunReader, import_run_plugins, open_run
from ray_knowsim.score.store import RunScores

#: session columns compare reads (metrics beyond these are read when asked for)
BASE_COLUMNS = ("session_id", "task", "item_id", "knowledge_level", "trial", "condition", "status", "initial_states",
                "simulator", "assistant_model", "assistant_strategy")


class IncompatibleRuns(ValueError):
    """Two runs cannot be merged; the message names the first difference."""


class RunIdentity(BaseModel):
    """What must agree between runs for their cells to be comparable."""

    model_config = ConfigDict(extra="forbid")
    items: dict[str, list[str]]  # task -> sorted item ids
    levels: list[str]
    rules: dict[str, Any]  # the resolved RuleConfig
    simulator: dict[str, Any]  # user_sim / extractor model identity and settings, turns, early stop


class LoadedRun(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    path: str
    label: str
    identity: RunIdentity
    conditions: list[str]
    sessions: Any  # pandas DataFrame of ok sessions (label-qualified condition in "condition")
    outcomes: Any = None  # every session's task, level, condition (label-qualified), status, failure class, error
    completeness: Any = None  # io.rundir.Completeness: n of N planned sessions, and why not all


def _model_identity(models: dict[str, Any], key: str | None) -> dict[str, Any]:
    from ray_knowsim.config.model_entries import answer_fields

    if key is None or key not in models:
        return {"model": key}
    return answer_fields(models[key])


def run_identity(manifest: dict[str, Any], sessions: pd.DataFrame) -> RunIdentity:
    from ray_knowsim.config.sections import RoleConfig, RulesSection

    cfg = manifest.get("config") or {}
    rules = RulesSection.model_validate(cfg.get("rules") or {}).config.model_dump(mode="json")
    roles = cfg.get("roles") or {}
    models = cfg.get("models") or {}
    sim: dict[str, Any] = {"max_turns": cfg.get("max_turns"), "early_stop": cfg.get("early_stop"), "graph_mode": cfg.get("graph_mode")}
    for role in ("user_sim", "extractor"):
        rc = RoleConfig.model_validate(roles.get(role) or {})
        settings = rc.resolved(role)
        sim[role] = {"model": _model_identity(models, rc.model), "temperature": settings.temperature,
                     "max_tokens": settings.max_tokens}
    items = {t: sorted(map(str, g["item_id"].unique())) for t, g in sessions.groupby("task")}
    return RunIdentity(items=items, levels=sorted(sessions["knowledge_level"].unique()), rules=rules, simulator=sim)


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """``"key.path a_value != b_value"`` for the first place two JSON-like values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                return f"{sub} {a.get(k, '<absent>')} != {b.get(k, '<absent>')}"
            diff = first_difference(a[k], b[k], sub)
            if diff:
                return diff
        return None
    if a != b:
        return f"{path} {a} != {b}"
    return None


def check_compatible(runs: Sequence[LoadedRun]) -> None:
    base = runs[0]
    ref = base.identity.model_dump(mode="json")
    for run in runs[1:]:
        diff = first_difference(run.identity.model_dump(mode="json"), ref)
        if diff:
            raise IncompatibleRuns(f"{run.path}: {diff} in {base.path}")


def _labels(paths: Sequence[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        name = Path(p).resolve().name or "run"
        label, k = name, 2
        while label in out:
            label, k = f"{name}-{k}", k + 1
        out.append(label)
    return out


def load_runs(paths: Sequence[str | Path], metrics: Sequence[str] = (), *, reader: RunReader | None = None,
              scores: RunScores | None = None) -> list[LoadedRun]:
    """Each run's ok sessions (identity columns + ``match`` + the metric columns present).
    ``reader`` / ``scores``: the one run's reader and score sets when the caller already has them
    (only with one path; they are not opened again)."""
    from ray_knowsim.compare.paired import default_metrics

    if (reader is not None or scores is not None) and len(paths) != 1:
        raise ValueError("load_runs: reader= / scores= are those of one run; pass one path with them")
    paths = [str(p) for p in paths]
    labels = _labels(paths)
    out = []
    runs = [reader if reader is not None else open_run(path) for path in paths]
    for run in runs:  # their outside metrics' catalogue entries (what they are, which way is better)
        import_run_plugins(run.manifest)
    want = list(dict.fromkeys([*BASE_COLUMNS, *default_metrics(), *metrics, "cost_usd", "turns", "failure_class", "error"]))
    for path, label, run in zip(paths, labels, runs):
        manifest = run.manifest
        if manifest is None:  # before any row is read
            raise RunDirError(f"{path} has no manifest.json (is it a run directory?)")
        table = run.sessions.read(want)
        if table.num_rows == 0:
            raise RunDirError(f"{path}/sessions holds no committed rows")
        run_scores = scores if scores is not None else RunScores.load(path, run)  # the judges' columns (IQ, ...) live in scores/, joined here
        df = (run_scores.attach(table) if run_scores.sets else table).to_pandas()
        if "judge_cost_usd" in df.columns and "cost_usd" in df.columns:  # the judge's spend is the session's too
            df["cost_usd"] = df["cost_usd"] + df["judge_cost_usd"].fillna(0.0)
        ok = df[df["status"] == "ok"].copy()
        ok["match"] = [hashlib.sha1(json.dumps([int(x) for x in s]).encode()).hexdigest()[:12] for s in ok["initial_states"]]
        ok = ok.drop(columns=["initial_states"])
        ok["run"] = label
        ok["base_condition"] = ok["condition"]
        conditions = [c for c in dict.fromkeys(df["condition"])]
        outcomes = df[[c for c in OUTCOME_COLUMNS if c in df.columns]].copy()
        out.append(LoadedRun(path=path, label=label, identity=run_identity(manifest, df), conditions=conditions, sessions=ok,
                             outcomes=outcomes, completeness=run.status().completeness()))
    if len(out) > 1:
        for r in out:
            r.sessions["condition"] = r.label + "/" + r.sessions["base_condition"].astype(str)
            r.outcomes["condition"] = r.label + "/" + r.outcomes["condition"].astype(str)
            r.conditions = [f"{r.label}/{c}" for c in r.conditions]
    return out


def merged_sessions(runs: Sequence[LoadedRun]) -> tuple[pd.DataFrame, list[str]]:
    """All runs' ok sessions in one frame and the condition order (run order, then config order)."""
    check_compatible(runs)
    frames = [r.sessions for r in runs]
    conds = [c for r in runs for c in r.conditions]
    return pd.concat(frames, ignore_index=True), conds


__all__ = ["IncompatibleRuns", "LoadedRun", "RunIdentity", "check_compatible", "first_difference", "load_runs",
           "merged_sessions", "run_identity"]
