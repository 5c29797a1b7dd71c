"""Run an adaptive config round by round through the normal run path; write ``decisions.json``.

Each round adds the next items of the seeded order (:mod:`.schedule`) for the conditions still
in play at each (task, level), and runs every session asked for so far with
``run.fan_out.run(cfg, sessions=...)``: the same plan, config hash, shards, commits and resume
as a fixed run, into the same run directory. Then it reads the committed rows of the scheduled
sessions, updates the procedure (:class:`ray_knowsim.stats.adaptive.Procedure`) and records the
round (the rounds themselves are :func:`ray_knowsim.adaptive.rounds.drive`, shared with the
planning replay). The spec is locked at round 1: a resume with another is refused. Resuming replays the rounds from the first: their sessions are committed, so the runner
skips them, and the decisions are recomputed from the same rows, which gives the same rounds and
decisions as an uninterrupted run.
"""

from __future__ import annotations

import logging
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ray_knowsim.adaptive.observe import ROW_KEYS, scheduled
from ray_knowsim.adaptive.rounds import (Schedule, drive, failure_gap_records, keep_recorded_design, procedure_for, record,
                                         select, spec_changes, spec_of)
from ray_knowsim.config import RunConfig
from ray_knowsim.config.adaptive import AdaptiveConfig
from ray_knowsim.plan.sessions import session_id
from ray_knowsim.plan.build import RunError, prepare
from ray_knowsim.run.fan_out import ray_options, ray_session, run, write_run_tables
from ray_knowsim.io.decisions import read_decisions, write_decisions
from ray_knowsim.io.rundir import RunReader, sessions_text
from ray_knowsim.schema.decisions import DecisionsFile, Spend
from ray_knowsim.schema.graph import GraphWarning
from ray_knowsim.stats.adaptive import Procedure

log = logging.getLogger(__name__)


@dataclass
class AdaptiveOutcome:
    run_dir: Path
    record: DecisionsFile
    rounds_run: int


def _rows(run_dir: Path, metrics: list[str]) -> pd.DataFrame:
    """The run's ok session rows with the decision metrics (through compare's run reader: one
    place reads run directories for the statistics)."""
    from ray_knowsim.compare.runs import load_runs

    return load_runs([run_dir], metrics)[0].sessions


def _spend(run_dir: Path, wanted: set[str], config_hash: str | None = None) -> pd.DataFrame:
    """Tokens and cost of every scheduled session, failed ones included (they were paid for);
    read through the one run-directory reader (io/rundir.py) and the cost columns of tables/cost.py."""
    from ray_knowsim.tables.cost import read_cost_columns
    from ray_knowsim.io.rundir import has_commit_markers
    from ray_knowsim.score.store import RunScores

    reader = RunReader.open(run_dir, config_hash) if has_commit_markers(run_dir) else None  # None: nothing committed yet
    if reader is None or not reader.sessions.files:
        return pd.DataFrame(columns=["session_id", "condition", "prompt", "completion", "cost_usd"])
    scores = RunScores.load(run_dir, reader)
    df = read_cost_columns(reader.sessions, scores.attach if scores.sets else None)
    df = df[df["session_id"].isin(wanted)]
    df = df.assign(prompt=df[[c for c in df.columns if c.startswith("prompt_tokens_")]].sum(axis=1),
                   completion=df[[c for c in df.columns if c.startswith("completion_tokens_")]].sum(axis=1))
    return df


def _spend_record(df: pd.DataFrame) -> Spend:
    cost = pd.to_numeric(df["cost_usd"], errors="coerce")
    return Spend(sessions=int(len(df)), prompt_tokens=int(df["prompt"].sum()), completion_tokens=int(df["completion"].sum()),
                 cost_usd=float(cost.sum()) if len(df) and cost.notna().all() else None)


def _spend_fixed(df: pd.DataFrame, fixed_per_condition: dict[str, int]) -> Spend:
    """Each condition's mean per session run, times its sessions in the fixed design."""
    total = {"prompt": 0.0, "completion": 0.0, "cost": 0.0}
    priced = True
    for cond, n in fixed_per_condition.items():
        part = df[df["condition"] == cond]
        if part.empty:
            continue
        total["prompt"] += part["prompt"].mean() * n
        total["completion"] += part["completion"].mean() * n
        cost = pd.to_numeric(part["cost_usd"], errors="coerce")
        priced = priced and bool(cost.notna().all())
        total["cost"] += float(cost.mean()) * n if priced else 0.0
    return Spend(sessions=sum(fixed_per_condition.values()), prompt_tokens=int(round(total["prompt"])),
                 completion_tokens=int(round(total["completion"])), cost_usd=total["cost"] if priced and len(df) else None)


def _outcomes(run_dir: Path, config_hash: str) -> pd.DataFrame:
    """Every committed session's identity and status (failed ones included): the failure-rate check."""
    from ray_knowsim.io.rundir import has_commit_markers

    reader = RunReader.open(run_dir, config_hash) if has_commit_markers(run_dir) else None
    if reader is None or not reader.sessions.files:
        return pd.DataFrame(columns=[*ROW_KEYS, "status"])
    table = reader.sessions.read([*ROW_KEYS, "status", "failure_class", "error"])
    return table.to_pandas()


def recorded_design(run_dir: Path, ad: AdaptiveConfig) -> AdaptiveConfig:
    """On resume, the design recorded in decisions.json for what the config leaves to defaults
    (:func:`ray_knowsim.adaptive.rounds.keep_recorded_design`); unchanged for a fresh run or an
    unreadable record (which :func:`locked_spec` refuses with the reason)."""
    try:
        old = read_decisions(run_dir)
    except ValueError:
        return ad
    return ad if old is None else keep_recorded_design(ad, old.spec)


def locked_spec(run_dir: Path, spec: dict) -> None:
    """Refuse to resume (or replay into) a run directory whose decisions.json was decided with
    another spec: a changed alpha, metric or rule after seeing results would void the error control."""
    try:
        old = read_decisions(run_dir)
    except ValueError as exc:  # another format (DecisionsFormatError) or a damaged file
        raise RunError(f"{run_dir}: the adaptive run cannot be resumed: {exc}") from exc
    if old is None:
        return
    changed = spec_changes(old.spec, spec)
    if changed:
        raise RunError(f"{run_dir}: the adaptive spec is locked since round 1 and this one changes: {'; '.join(changed)}. "
                       "Resume with the locked spec, or decide afresh in a new output directory "
                       "(ray-knowsim adaptive-replay plans other specs over a completed run without spending)")


def check_feasible(proc: Procedure, schedule: Schedule, quiet: bool = False) -> None:
    """Before spending: a task whose pool has fewer items than an exact sign test needs at the
    family's first level can never decide. All of them: refused; some: said."""
    from ray_knowsim.stats.feasibility import feasibility

    size = proc.family_size if proc.family == "run" else max(len(d.pairs) for d in proc.decisions)
    lines = {t: feasibility(len(ids), proc.alpha, size) for t, ids in schedule.order.items()}
    bad = {t: f for t, f in lines.items() if not f.can_decide}
    if bad and len(bad) == len(lines):
        raise RunError("the adaptive design can never decide: " + "; ".join(f"{t}: {f.line()}" for t, f in bad.items())
                       + ". Use more items, fewer metrics, levels or conditions, a larger alpha, or family: decision")
    for t, f in bad.items():  # said once: on the terminal, else (quiet) to the log, never both
        msg = f"adaptive: task {t} {f.line()}; its decisions stay open"
        if quiet:
            log.warning(msg)
        else:
            print(f"warning: {msg}", file=sys.stderr, flush=True)


def round_preflight(round_no: int, preflight: bool, quiet: bool) -> bool | str:
    """The checks before spending of one round (``run(preflight=...)``): round 1 is checked (or
    skipped by --no-preflight, which it says); later rounds skip them with the true reason -- the
    endpoints are the ones round 1 checked -- said once, at round 2, not every round."""
    if round_no == 1:
        return preflight
    reason = "done in round 1" if preflight else "skipped in round 1 (--no-preflight)"
    if round_no == 2 and preflight and not quiet:
        print(f"checks before spending: {reason}", flush=True)
    return reason


def run_adaptive(cfg: RunConfig, *, address: str | None = None, output: str | Path | None = None, quiet: bool = False,
                 max_rounds: int | None = None, console: Any = None, rerun_model_failures: bool = False,
                 preflight: bool = True) -> AdaptiveOutcome:
    """Run ``cfg`` (which has an ``adaptive`` section) in rounds until every decision is made, the
    pool is used up or a budget is reached; ``max_rounds`` stops earlier (the run resumes from
    there when called again). ``rerun_model_failures`` and ``preflight`` are the run's
    (run/fan_out.py); the checks before spending go with the first round this call runs (the
    endpoints are the same in every round)."""
    ad = cfg.adaptive
    if ad is None:
        raise RunError("the config has no adaptive: section")
    plan, run_dir, _, config_hash, inputs = prepare(cfg, output)
    all_conditions = cfg.condition_names()
    conditions = list(ad.conditions) if ad.conditions is not None else all_conditions
    unknown = [c for c in conditions if c not in all_conditions]
    if unknown:
        raise RunError(f"adaptive.conditions: {unknown} are not conditions of the config ({all_conditions})")
    tasks = list(inputs.items)
    trials = ad.round.trials or cfg.trials
    ad = recorded_design(run_dir.root, ad)
    spec = spec_of(ad, conditions, trials)
    locked_spec(run_dir.root, spec)
    schedule = Schedule.of({t: [it.id for it in inputs.items[t]] for t in tasks}, cfg.seed, ad.round.items,
                           list(cfg.levels), trials)
    proc = procedure_for(ad, tasks, list(cfg.levels), conditions)
    check_feasible(proc, schedule, quiet)
    sessions_fixed = schedule.fixed_sessions(len(conditions))
    fixed_per_condition = {c: sessions_fixed // len(conditions) for c in conditions}
    ids = lambda keys: {session_id(*k) for k in keys}  # noqa: E731
    state: dict[str, Any] = {"spend": None, "record": None}  # the spend of what was asked as of the last record

    def spend_of(wanted: set) -> pd.DataFrame:
        return _spend(run_dir.root, ids(wanted), config_hash)

    def stop_before(round_no: int, wanted: set, new: list) -> bool:
        if ad.budget.sessions is not None and len(wanted) + len(new) > ad.budget.sessions:
            return True
        if ad.budget.usd is not None and wanted:
            spent = _spend_record(state["spend"] if state["spend"] is not None else spend_of(wanted))
            if spent.cost_usd is not None and spent.sessions:
                return spent.cost_usd + spent.cost_usd / spent.sessions * len(new) > ad.budget.usd
        return False

    def fetch(round_no: int, wanted: set, new: list) -> pd.DataFrame:
        if not quiet:  # the round's header, in the words of the final line and the viewer (io/rundir.py)
            print(f"adaptive round {round_no}: {sessions_text(len(wanted), sessions_fixed)} asked for "
                  f"({len(new):,} new)", flush=True)
        with warnings.catch_warnings():  # the graphs' warnings were said once, when the run was prepared above
            warnings.simplefilter("ignore", GraphWarning)
            outcome = run(cfg, address=address, output=run_dir.root, quiet=quiet, tables=False,
                          config_file=None, console=console, sessions=ids(wanted), rerun_model_failures=rerun_model_failures,
                          preflight=round_preflight(round_no, preflight, quiet))
        if outcome.stopped is not None:
            raise RunError(f"round {round_no}: stopped early by engine.fail_fast ({outcome.stopped.line()}); fix the "
                           "cause, then run the same command again to resume the adaptive run")
        if outcome.incomplete:
            raise RunError(f"round {round_no}: {len(outcome.incomplete)} shard(s) did not finish; run the same command "
                           "again to resume the adaptive run")
        return scheduled(_rows(run_dir.root, list(ad.metrics)), ids(wanted))

    def write(status: str, wanted: set, rounds: list) -> None:
        state["spend"] = spend_of(wanted)
        gaps = failure_gap_records(select(_outcomes(run_dir.root, config_hash), wanted), conditions)
        state["record"] = record(spec, proc, status, len(wanted), sessions_fixed, rounds, config_hash=config_hash,
                                 spend_run=_spend_record(state["spend"]),
                                 spend_fixed=_spend_fixed(state["spend"], fixed_per_condition), gaps=gaps)
        write_decisions(run_dir.root, state["record"])

    with ray_session(address, **ray_options(cfg), quiet=quiet):
        status, wanted, rounds = drive(proc, schedule, fetch, stop_before=stop_before, after_round=write,
                                       max_rounds=max_rounds, tasks=tasks)
        if state["record"] is None or state["record"].status != status:  # (else the last round's record is the final one)
            write(status, wanted, rounds)
        if wanted:
            reader = RunReader.open(run_dir.root, config_hash)
            if reader.sessions.files:
                write_run_tables(run_dir, reader)
    return AdaptiveOutcome(run_dir.root, state["record"], len(rounds))


__all__ = ["AdaptiveOutcome", "locked_spec", "run_adaptive"]
