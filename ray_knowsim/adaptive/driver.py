"""Run an adaptive config round by round through the normal run path; write ``decisions.json``.

Each round adds the next items of the seeded order (:mod:`.schedule`) for the conditions still
in play at each (task, level), and runs every session asked for so far with
``engine.runner.run(cfg, sessions=...)``: the same plan, config hash, shards, commits and resume
as a fixed run, into the same run directory. Then it reads the committed rows of the scheduled
sessions, updates the procedure (:class:`ray_knowsim.stats.adaptive.Procedure`) and records the
round. Resuming replays the rounds from the first: their sessions are committed, so the runner
skips them, and the decisions are recomputed from the same rows, which gives the same rounds and
decisions as an uninterrupted run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ray_knowsim.adaptive.observe import pair_counts, scheduled
from ray_knowsim.adaptive.schedule import item_order, round_items
from ray_knowsim.engine.config import RunConfig
from ray_knowsim.engine.plan import session_id
from ray_knowsim.engine.runner import RunError, prepare, ray_options, ray_session, run, write_run_tables
from ray_knowsim.io.decisions import write_decisions
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.schema.decisions import DecisionRecord, DecisionsFile, PairRecord, RoundRecord, Spend
from ray_knowsim.stats.adaptive import Procedure

PROCEDURE = ("per item, the sign of its mean paired difference (ties dropped); per pair, a Beta(1/2, 1/2) mixture "
             "(Krichevsky-Trofimov) confidence sequence for the win rate at alpha / family_size (Bonferroni over every "
             "pair of every decision), looked at after each round; decided pairs stay decided (running intersection)")


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
    read through the one run-directory reader (io/rundir.py) and the cost columns of io/cost.py."""
    from ray_knowsim.io.cost import read_cost_columns
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


def _decision_records(proc: Procedure) -> list[DecisionRecord]:
    out = []
    for i, d in enumerate(proc.decisions):
        pairs = []
        for a, b in d.pairs:
            st = proc.states.get((i, (a, b)))
            if st is None:
                pairs.append(PairRecord(condition_a=a, condition_b=b, wins_a=0, items=0, win_low=0.0, win_high=1.0,
                                        p_value=1.0, better=None))
                continue
            pairs.append(PairRecord(condition_a=a, condition_b=b, wins_a=st.k, items=st.n, win_low=st.low, win_high=st.high,
                                    p_value=st.p_value, better=d.better((a, b)), within_effect=st.within))
        out.append(DecisionRecord(task=d.task, knowledge_level=d.level, metric=d.metric, kind=d.kind, decided=d.decided,
                                  after_round=d.after_round, winner=d.winner, order=d.order,
                                  in_race=d.race() if d.kind == "best" else sorted(d.in_play()),
                                  eliminated=dict(d.eliminated), pairs=pairs))
    return out


def run_adaptive(cfg: RunConfig, *, address: str | None = None, output: str | Path | None = None, quiet: bool = False,
                 max_rounds: int | None = None, console: Any = None, rerun_model_failures: bool = False,
                 preflight: bool = True) -> AdaptiveOutcome:
    """Run ``cfg`` (which has an ``adaptive`` section) in rounds until every decision is made, the
    pool is used up or a budget is reached; ``max_rounds`` stops earlier (the run resumes from
    there when called again). ``rerun_model_failures`` and ``preflight`` are the run's
    (engine/batch.py); the checks before spending go with the first round this call runs (the
    endpoints are the same in every round)."""
    ad = cfg.adaptive
    if ad is None:
        raise RunError("the config has no adaptive: section")
    plan, run_dir, _, config_hash, inputs = prepare(cfg, output)
    conditions = cfg.condition_names()
    tasks = list(inputs.items)
    trials = list(range(ad.round.trials or cfg.trials))
    order = item_order({t: [it.id for it in inputs.items[t]] for t in tasks}, cfg.seed)
    proc = Procedure.build(tasks, list(cfg.levels), list(ad.metrics), conditions, ad.decide, ad.alpha, ad.effect)
    fixed_per_condition = {c: sum(len(v) for v in order.values()) * len(cfg.levels) * cfg.trials for c in conditions}
    wanted: set[str] = set()
    rounds: list[RoundRecord] = []
    status = "running"
    rows = pd.DataFrame()
    spend: pd.DataFrame | None = None  # the spend of `wanted` as of the last record (nothing has run since)
    record: DecisionsFile | None = None  # the last record written
    with ray_session(address, **ray_options(cfg), quiet=quiet):
        round_no = 0
        while True:
            round_no += 1
            if max_rounds is not None and round_no > max_rounds:
                break
            items = round_items(order, ad.round.items, round_no)
            play = proc.in_play()
            new = {session_id(t, it, lv, c, tr) for t, its in items.items() for it in its for lv in cfg.levels
                   for c in sorted(play.get((t, lv), set())) for tr in trials}
            if not new:
                status = "pool_exhausted" if not any(items.values()) else "decided"
                break
            if ad.budget.sessions is not None and len(wanted) + len(new) > ad.budget.sessions:
                status = "budget"
                break
            if ad.budget.usd is not None and rounds:
                spent = _spend_record(spend if spend is not None else _spend(run_dir.root, wanted, config_hash))
                if spent.cost_usd is not None and spent.sessions:
                    if spent.cost_usd + spent.cost_usd / spent.sessions * len(new) > ad.budget.usd:
                        status = "budget"
                        break
            wanted |= new
            outcome = run(cfg, address=address, output=run_dir.root, quiet=quiet, tables=False, print_tables=False,
                          config_file=None, console=console, sessions=wanted, rerun_model_failures=rerun_model_failures,
                          preflight=preflight and round_no == 1)
            if outcome.stopped is not None:
                raise RunError(f"round {round_no}: stopped early by engine.fail_fast ({outcome.stopped.line()}); fix the "
                               "cause, then run the same command again to resume the adaptive run")
            if outcome.incomplete:
                raise RunError(f"round {round_no}: {len(outcome.incomplete)} shard(s) did not finish; run the same command "
                               "again to resume the adaptive run")
            rows = scheduled(_rows(run_dir.root, list(ad.metrics)), wanted)
            left = proc.look(pair_counts(rows, proc), round_no, bounds=True)
            rounds.append(RoundRecord(
                round=round_no, items={t: v for t, v in items.items() if v}, sessions=len(new),
                in_play={t: {lv: sorted(play.get((t, lv), set())) for lv in cfg.levels if play.get((t, lv))} for t in tasks},
                eliminated=[f"{proc.decisions[i].task}/{proc.decisions[i].level}/{proc.decisions[i].metric}: {c}"
                            for i, cs in left.items() for c in cs],
                decided=[f"{d.task}/{d.level}/{d.metric}" for d in proc.decisions if d.after_round == round_no]))
            if proc.done:
                status = "decided"
            spend = _spend(run_dir.root, wanted, config_hash)
            record = _record(cfg, config_hash, proc, status, wanted, fixed_per_condition, rounds, spend)
            write_decisions(run_dir.root, record)
            if proc.done:
                break
        if record is None or record.status != status:  # (else the last round's record is already the final one)
            if spend is None:
                spend = _spend(run_dir.root, wanted, config_hash)
            record = _record(cfg, config_hash, proc, status, wanted, fixed_per_condition, rounds, spend)
            write_decisions(run_dir.root, record)
        if wanted:
            reader = RunReader.open(run_dir.root, config_hash)
            if reader.sessions.files:
                write_run_tables(run_dir, reader)
    return AdaptiveOutcome(run_dir.root, record, len(rounds))


def _record(cfg: RunConfig, config_hash: str, proc: Procedure, status: str, wanted: set[str],
            fixed_per_condition: dict[str, int], rounds: list[RoundRecord], spend: pd.DataFrame) -> DecisionsFile:
    """The decisions record; ``spend``: :func:`_spend` of ``wanted``."""
    ad = cfg.adaptive
    assert ad is not None
    return DecisionsFile(config_hash=config_hash, decide=ad.decide, metrics=list(ad.metrics), alpha=ad.alpha,
                         family_size=proc.family_size, procedure=PROCEDURE, status=status,  # type: ignore[arg-type]
                         sessions_run=len(wanted), sessions_fixed=sum(fixed_per_condition.values()),
                         spend_run=_spend_record(spend), spend_fixed=_spend_fixed(spend, fixed_per_condition),
                         decisions=_decision_records(proc), rounds=list(rounds))


__all__ = ["AdaptiveOutcome", "run_adaptive"]
