"""The top of a run — fan-out: Ray fan-out of shard tasks, resume, the manifest and the tables. It
imports the two parts below it, build (:mod:`ray_knowsim.plan.build`) and execute
(:mod:`ray_knowsim.run.worker`), which import neither each other nor this module.

The driver holds the plan (arithmetic), a bounded window of in-flight shard tasks and their small
summaries; trajectories go from the workers straight to Parquet. A shard runs the simulation loop
for all its sessions (``engine.shard_fn``, by default ``ray_knowsim.sim.shard:run_shard``), and the
shards that share a CPU run in ONE Ray task, one worker process (``engine.worker_shards()``) —
never a task per LLM call or per session-turn. What a task
does is the execute layer (:mod:`ray_knowsim.run.worker`); what the driver derives from the
config before any task starts is the build layer (:mod:`ray_knowsim.plan.build`).

Resume is per session (run/resume.py): committed sessions are skipped, infra failures rerun,
model failures kept unless ``rerun_model_failures``; the plan's cut may differ from the last
invocation's. Workers commit finished sessions in small steps (run/worker.py), so a crash
loses only the sessions in flight. A marker that cannot be read stops the run before anything
is cleaned up. A worker that dies is retried by Ray (``engine.shard_retries``; the retry runs only
what is not committed); a shard that still cannot finish is reported and left for the next
invocation of the same command.
"""

from __future__ import annotations

import os
import time
import traceback
import warnings
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterator, Mapping

from ray_knowsim.cluster.bounded_fan_out import BoundedFanOut, SharedDirError, check_shared_dir
from ray_knowsim.plan.build import RunError, make_context, model_prices, place_models, placed_plan, prepare
from ray_knowsim.cluster.codecheck import CodeMismatch, by_value, identity, require_same_code, run_checked
from ray_knowsim.run.cost_watch import watch_costs
from ray_knowsim.run.fail_fast import FailureGuard, Stop
from ray_knowsim.preflight.checks import check_before_spending
from ray_knowsim.config import RunConfig
from ray_knowsim.cluster.ray_session import divert_forwarded_lines, ray_session
from ray_knowsim.run.manifest import RunIdentity, close_manifest, heartbeat, open_manifest
from ray_knowsim.backends.model_set import ModelSet, build_models, shutdown_pools
from ray_knowsim.cluster.node_loss import retry_on_node_loss
from ray_knowsim.plan.sessions import Plan, largest_graph, shard_name
from ray_knowsim.run.progress import REPORT_EVERY_S, Counts, Display, progress_board
from ray_knowsim.run.resume import Attempt, ResumePolicy, Work, plan_work
from ray_knowsim.run.runlog import DIAGNOSTICS, is_noise, run_log, to_run_log
from ray_knowsim.run.worker import CommitPolicy, ShardFailed, execute_shards
from ray_knowsim.io.commits import RunDir, collect_garbage
from ray_knowsim.io.rundir import STATUS_WORDS, RunDirError, RunReader, status_key
from ray_knowsim.schema.failures import INFRA, MODEL
from ray_knowsim.schema.roles import RoleBudgetWarning
from ray_knowsim.score.run_stage import score_run
from ray_knowsim.score.store import RunScores
from ray_knowsim.sim.types import ShardContext

@dataclass
class RunOutcome:
    run_dir: Path
    run_id: str
    config_hash: str
    n_sessions: int
    n_ok: int
    n_failed: int
    skipped_shards: int  # shards of the plan with nothing left to run
    ran_shards: int  # shards this invocation submitted (in tasks of engine.worker_shards() shards)
    incomplete: dict[str, str] = field(default_factory=dict)  # shard id -> why it did not finish
    tables: dict[str, Any] = field(default_factory=dict)
    llm: dict[str, Any] = field(default_factory=dict)  # this invocation's calls/tokens per role (Accounting.to_dict)
    scores: dict[str, Any] = field(default_factory=dict)  # the scoring stage of this invocation
    resume: dict[str, Any] = field(default_factory=dict)  # what this invocation found and reran (Work.to_dict)
    seconds: float = 0.0
    stopped: Stop | None = None  # engine.fail_fast stopped the run (run/fail_fast.py)
    preflight: dict[str, Any] = field(default_factory=dict)  # the checks before spending (preflight/checks.py)

    @property
    def status(self) -> str:
        if self.stopped is not None:
            return "stopped_on_failures"
        if self.incomplete:
            return "incomplete"
        return "ok" if self.n_failed == 0 else "ok_with_failed_sessions"

    @property
    def status_word(self) -> str:
        """What the terminal says: the word the report and the viewer say for the same run
        (io.rundir.STATUS_WORDS; :attr:`status` is the manifest's code)."""
        reason = "stopped_on_failures" if self.stopped is not None else "incomplete" if self.incomplete else None
        return STATUS_WORDS[status_key(reason, self.n_ok + self.n_failed, self.n_failed)]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C: the run stopped; what was committed is safe and the same command resumes."""

    def __init__(self, run_dir: Path, committed: int, ok: int, planned: int) -> None:
        super().__init__(f"interrupted: {committed} of {planned} sessions committed")
        self.run_dir, self.committed, self.ok, self.planned = run_dir, committed, ok, planned


def ray_options(cfg: RunConfig) -> dict[str, Any]:
    """The local cluster a run starts when it joins none (engine.num_cpus, engine.object_store_mb)."""
    return {"num_cpus": cfg.engine.num_cpus, "object_store_mb": cfg.engine.object_store_mb}


def open_committed(run_dir: RunDir, config_hash: str) -> RunReader:
    """The run directory's commits, read before anything else happens: a marker that cannot be
    read stops the run here, with its file named, before any clean-up could touch its files."""
    try:
        return RunReader.open(run_dir.root, config_hash)
    except RunDirError as exc:
        raise RunError(str(exc)) from exc


def pending_work(plan: Plan, reader: RunReader, policy: ResumePolicy, wanted: Collection[str] | None = None) -> Work:
    """The sessions left to run under ``plan`` (see run/resume.py for the rule); ``wanted``:
    only these planned sessions."""
    return plan_work(plan, reader.entries(), policy, wanted)


def write_run_tables(run_dir: RunDir, reader: RunReader | None = None) -> dict[str, Any]:
    """Reduce the counted sessions (with the primary score set joined in) to the run's tables
    and write them to ``tables/``: after a run, and after ``score --primary`` switches the set."""
    from ray_knowsim.tables.outcome_tables import sanity_table
    from ray_knowsim.tables.reduce import aggregate_item_sums, build_tables
    from ray_knowsim.io.tables import write_tables
    from ray_knowsim.tables.cost import cost_tables
    from ray_knowsim.tables.outcomes import outcome_tables
    from ray_knowsim.tables.sanity import check_run
    from ray_knowsim.score.spend import spend_of_run
    from ray_knowsim.audit.run import audit_run

    reader = reader if reader is not None else RunReader.open(run_dir.root)
    scores = RunScores.load(run_dir.root, reader)
    # a Ray Data read places actors on any node, a dying one too: it only reads committed files, so run it again
    tables = build_tables(retry_on_node_loss(aggregate_item_sums, reader.sessions.files, scores=scores, what="the run's tables"))
    # the counted rows' spend, and what the spend journals hold beyond them (cut off, superseded)
    tables.update(cost_tables(reader.sessions, scores.attach if scores.sets else None, spend_of_run(reader)))
    tables.update(outcome_tables(reader.sessions))  # failed sessions by error kind, truncations by role
    tables["sanity"] = sanity_table(check_run(reader, scores.attach if scores.sets else None))
    tables.update(audit_run(reader).tables())  # the simulator audit: tables/audit, tables/audit_flags
    write_tables(tables, run_dir.tables)
    return tables


def run(
    cfg: RunConfig,
    *,
    address: str | None = None,
    output: str | Path | None = None,
    quiet: bool = False,
    overwrite: bool = False,
    config_file: str | None = None,
    tables: bool = True,
    console: Any = None,
    rerun_model_failures: bool = False,
    preflight: bool | str = True,
    sessions: Collection[str] | None = None,
) -> RunOutcome:
    """Run (or resume) ``cfg`` to completion; see the module docstring. ``preflight=False``
    skips the checks before spending (preflight/checks.py; recorded in the manifest); a string
    skips them for that reason, recorded, and leaves saying so to the caller (the adaptive
    driver's later rounds: their first round checked the same endpoints).
    ``sessions``: run only these planned session ids (the adaptive driver's rounds); the plan,
    hash and shards stay the full design's."""
    if cfg.simulators:  # never one run over several simulators: their sessions and verdicts must not pool
        raise RunError("the config lists simulators: run each of cfg.simulator_configs() (as `ray-knowsim run` does)")
    t0 = time.perf_counter()
    sessions = set(sessions) if sessions is not None else None
    with warnings.catch_warnings():  # the checks below say the role budgets, in one verdict with the contexts
        warnings.simplefilter("ignore", RoleBudgetWarning)
        plan, run_dir, run_id, config_hash, inputs = prepare(cfg, output, overwrite)
    # Ray first: the endpoints' quotas are cluster-wide limiters, and the checks' requests count
    # against them as the run's do; the lease the checks take on each is the run's, held in its
    # pools until it ends (a refused run has started or joined Ray, and written nothing)
    with run_log(run_dir.root), ray_session(address, **ray_options(cfg), quiet=quiet), _pools() as pools:
        divert_forwarded_lines(is_noise, to_run_log)  # Ray's shutdown noise to RUN_DIR/run.log, not the terminal
        skip = preflight if isinstance(preflight, str) else not preflight
        checked = check_before_spending(cfg, plan, inputs, skip=skip, pools=pools)  # raises before anything is written or sent
        run_dir.create()
        committed = open_committed(run_dir, config_hash)  # before the manifest is touched: nothing changes on doubt
        identity = RunIdentity.of(cfg, run_id=run_id, config_hash=config_hash, config_file=config_file,
                                  budget_warnings=cfg.budget_warnings(largest_graph(inputs.graphs)))
        manifest = open_manifest(run_dir, identity, plan=plan.summary(), address=address or os.environ.get("RAY_ADDRESS"),
                                 preflight=checked.to_manifest())
        invocation = len(manifest["invocations"]) - 1  # this one's index: its spend journals say so
        journal_checks(run_dir.root, config_hash, invocation, checked, model_prices(cfg))
        garbage = collect_garbage(run_dir.root, committed.all_commits, committed.index)
        if garbage.superseded_commits:  # their rows are outranked: re-read what counts
            committed = open_committed(run_dir, config_hash)
        policy = ResumePolicy(rerun_model_failures=rerun_model_failures, max_attempts=cfg.engine.max_session_attempts)
        work = pending_work(plan, committed, policy, sessions)
        display = Display(plan.n_sessions if sessions is None else len(sessions), work.committed, plan.n_shards, quiet=quiet,
                          console=console, max_turns=cfg.max_turns)
        display.shards_done = work.skipped_shards
        outcome = RunOutcome(run_dir.root, run_id, config_hash, plan.n_sessions, 0, 0, work.skipped_shards, len(work.shards),
                             preflight=checked.to_manifest())
        if not checked.reason:  # a reason is the caller's to say (once, not every round)
            display.log(checked.summary())
        for finding in checked.warnings:
            display.warn(f"preflight warning: {finding.line()}")
        status = "failed"
        alive = ExitStack()  # the driver's heartbeat until the manifest records the end (a kill -9 stops it)
        alive.enter_context(heartbeat(run_dir, invocation))
        try:
            try:
                require_same_code(display.warn)  # before any of our code runs on a worker (shards, reduction)
            except CodeMismatch as exc:
                raise RunError(str(exc)) from None
            vplan = place_models(cfg)  # before anything starts: raises when a model cannot be placed
            if vplan.grouped:  # shards ordered and cut by condition group; pools start/stop per group
                plan = placed_plan(cfg, inputs, plan, vplan)
                work = pending_work(plan, committed, policy, sessions)  # per session: the new cut redoes nothing
                display.already, display.n_shards, display.shards_done = work.committed, plan.n_shards, work.skipped_shards
                outcome.skipped_shards, outcome.ran_shards = work.skipped_shards, len(work.shards)
                manifest["plan"] = plan.summary()
                manifest["invocations"][-1]["plan"] = plan.fingerprint
            outcome.resume = work.to_dict()
            if sessions is None and work.shards:  # an adaptive round is not watched (run/cost_watch.py says why)
                display.cost_watch = watch_costs(cfg, plan, inputs, run_dir.root, manifest, display, checked.estimate)
            if work.exhausted:
                display.warn(f"{len(work.exhausted)} failed session(s) ran {policy.max_attempts} times and are not rerun "
                             f"(engine.max_session_attempts), e.g. {work.exhausted[0]}")
            if work.kept[MODEL] and not rerun_model_failures:
                display.log(f"{work.kept[MODEL]} session(s) failed on the model's answer and stay results "
                            "(rerun them with --rerun-model-failures)")
            if work.shards:
                asked = f"{plan.n_sessions} sessions in {plan.n_shards} shards" if sessions is None else \
                    f"{len(sessions):,} sessions asked for"  # (an adaptive round: its driver says of how many planned)
                display.log(f"run {run_id}: {asked}; "
                            f"{work.committed} committed before, {work.sessions} to run in {len(work.shards)} shards "
                            f"(new {work.new}, rerun infra {work.rerun[INFRA]}, model {work.rerun[MODEL]}) -> {run_dir.root}")
                try:  # before any model starts; the fan-out checks the nodes that join later
                    seen_by = check_shared_dir(run_dir.root, what="the run directory")
                    outcome.incomplete, outcome.llm, outcome.stopped = _run_groups(
                        cfg, plan, inputs, run_dir, make_context(cfg, run_id, config_hash, invocation), work, display, pools,
                        seen_by)
                except SharedDirError as exc:
                    raise RunError(str(exc)) from None
            else:
                asked = plan.n_sessions if sessions is None else f"{len(sessions)} asked-for"
                display.log(f"run {run_id}: nothing to run, all {asked} sessions committed -> {run_dir.root}")
            final = open_committed(run_dir, config_hash)
            if cfg.roles.judge is not None and len(final.index) and outcome.stopped is None:  # a stopped run is not judged
                # the judges are a stage of their own over the committed transcripts (score/run_stage.py)
                scored = score_run(cfg, run_dir.root, inputs=inputs, pools=pools,  # a running judge pool is reused
                                   config_hash=config_hash, reader=final, invocation=invocation)
                outcome.llm = {**outcome.llm, **scored.llm}  # the judge's calls are this invocation's too
                outcome.scores = {"name": scored.name, "scored_shards": scored.scored_shards,
                                  "skipped_shards": scored.skipped_shards, "judge_errors": scored.n_errors, "llm": scored.llm}
            entries = final.entries()
            planned = _planned_ids(plan, entries)
            outcome.n_ok = sum(entries[sid].status == "ok" for sid in planned)
            outcome.n_failed = sum(entries[sid].status != "ok" for sid in planned)
            if tables and len(final.index):
                outcome.tables = write_run_tables(run_dir, final)
            status = outcome.status
        except KeyboardInterrupt:
            status = "interrupted"
            committed, ok = _committed_counts(plan, run_dir, config_hash)
            outcome.n_ok, outcome.n_failed = ok, committed - ok
            raise RunInterrupted(run_dir.root, committed, ok, plan.n_sessions) from None
        finally:
            alive.close()
            outcome.seconds = time.perf_counter() - t0
            manifest["spend"] = spend = run_spend_record(run_dir, config_hash)
            close_manifest(run_dir, manifest, status, {
                "sessions": outcome.n_sessions, "ok": outcome.n_ok, "failed": outcome.n_failed,
                "incomplete_shards": sorted(outcome.incomplete), "seconds": round(outcome.seconds, 2), "llm": outcome.llm,
                "spend": (spend.get("by_invocation") or {}).get(str(invocation)),
                "scores": outcome.scores, "stopped": outcome.stopped.to_dict() if outcome.stopped else None, "resume": {**outcome.resume, "rerun_model_failures": rerun_model_failures,
                                                     "max_session_attempts": policy.max_attempts},
            })
    return outcome


def journal_checks(root: Path, config_hash: str, invocation: int, checked: Any, prices: Mapping[str, Any]) -> None:
    """The chat requests the checks before spending sent (the tiny request, the speed probe) go
    into the run's spend journals like every other request (io/spend.py: apart, ``checks``)."""
    spent = checked.chat_spend()
    if not spent:
        return
    from ray_knowsim.io.spend import SpendJournal

    journal = SpendJournal(root, unit="preflight", config_hash=config_hash, kind="preflight", invocation=invocation, prices=prices)
    try:
        for key, s in spent.items():
            journal.spent(role="preflight", model_key=key, requests=s["requests"], prompt=s["prompt_tokens"],
                          completion=s["completion_tokens"], cached=s.get("cached_prompt_tokens", 0))
    finally:
        journal.close()


def run_spend_record(run_dir: RunDir, config_hash: str) -> dict[str, Any]:
    """The run's whole spend over all its invocations, from its spend journals (io/spend.py),
    for the manifest: what the rows hold, what is apart (cut off, superseded), per invocation.
    Empty when it cannot be read (the manifest is still closed: nothing else is lost)."""
    from ray_knowsim.score.spend import spend_of_run

    try:
        spend = spend_of_run(RunReader.open(run_dir.root, config_hash))
    except (RunDirError, OSError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return spend.to_dict() if spend is not None else {}


def _committed_counts(plan: Plan, run_dir: RunDir, config_hash: str) -> tuple[int, int]:
    """(committed, of them ok) planned sessions, read from the run directory's commits."""
    try:
        reader = open_committed(run_dir, config_hash)
    except RunError:
        return 0, 0
    entries = reader.entries()
    planned = _planned_ids(plan, entries)
    return len(planned), sum(entries[sid].status == "ok" for sid in planned)


def _planned_ids(plan: Plan, entries: Mapping[str, Any]) -> list[str]:
    """The planned sessions with a counted row (``entries``: the reader's; a session of this config
    outside the plan — only a shard function breaking its contract makes one — is not counted)."""
    return [sid for k in range(plan.n_shards) for sid in plan.shard_session_ids(k) if sid in entries]


@contextmanager
def _pools() -> Iterator[dict[str, Any]]:
    """The driver's engine pools by model key; every one is shut down (engines, GPU memory,
    placement groups) however the run ends."""
    pools: dict[str, Any] = {}
    try:
        yield pools
    finally:
        shutdown_pools(pools)


def _run_groups(cfg: RunConfig, plan: Plan, inputs: Any, run_dir: RunDir, ctx: ShardContext, work: Work,
                display: Display, pools: dict[str, Any], seen_by: set[str]) -> tuple[dict[str, str], dict[str, Any], Stop | None]:
    """Run the shards group by group; the engine pools a group needs are started before it and
    the ones it does not need are stopped (the role models' pools stay up across groups). Stops
    early (returning why) when ``engine.fail_fast`` fires."""
    from ray_knowsim.llm.accounting import Accounting

    incomplete: dict[str, str] = {}
    acc = Accounting()
    guard = FailureGuard(cfg.engine.fail_fast)
    stop: Stop | None = None
    by_name = {c.name: c for c in plan.conditions}
    roles = {getattr(cfg.roles, r).model for r in ("user_sim", "extractor", "judge") if getattr(cfg.roles, r) is not None}
    for g, conds in enumerate(plan.condition_groups):
        here = {k: a for k, a in work.shards.items() if plan.shard_group(k) == g}
        if not here:
            continue
        if stop is not None:
            incomplete.update({shard_name(k): f"not started: {stop.line()}" for k in here})
            continue
        keys = roles | {by_name[c].assistant for c in conds}
        if len(plan.condition_groups) > 1:
            display.log(f"group {g}/{len(plan.condition_groups)}: conditions {conds}; models {sorted(keys)}")
            shutdown_pools(pools, [k for k in list(pools) if k not in keys])
        models = build_models(cfg, inputs.graphs, str(run_dir.cache), wait_s=900, keys=keys, pools=pools)
        inc, llm, stop = _fan_out(cfg, plan, run_dir, models, ctx, here, display, guard, seen_by)
        incomplete.update(inc)
        acc.merge(Accounting.from_dict(llm))
    return incomplete, acc.to_dict(), stop


def _fan_out(cfg: RunConfig, plan: Plan, run_dir: RunDir, models: ModelSet, ctx: ShardContext,
             todo: dict[int, dict[str, Attempt]], display: Display,
             guard: FailureGuard, seen_by: set[str]) -> tuple[dict[str, str], dict[str, Any], Stop | None]:
    """Submit shard tasks in a bounded window (cluster.bounded_fan_out); collect summaries.
    Returns the shards that did not finish (id -> why), the LLM accounting of the finished ones,
    and why ``guard`` stopped the batch (then nothing more is submitted and the shards in flight
    are cancelled; their committed sessions stay committed). ``seen_by``: the nodes known to see
    the run directory (the fan-out checks the ones that join, and adds them).

    One task runs the shards that share a CPU (``engine.worker_shards()``, consecutive shards of the
    plan) in one worker process (run/worker.execute_shards), asking for their CPUs together; each
    shard gets its own copy of the models (the ref passed once per shard: Ray deserialises each
    argument on its own), so its in-flight cap and limiter share are its own as before."""
    import ray

    stop: Stop | None = None
    eng = cfg.engine
    task = ray.remote(by_value(run_checked))  # each task checks its worker's code first (codecheck.py)
    code = identity()
    per_worker = eng.worker_shards()
    options = dict(max_retries=eng.shard_retries, retry_exceptions=False)
    models_ref, ctx_ref = ray.put(models), ray.put(ctx)
    board: Any = None  # this driver's board of an earlier run, if idle (set below, before any submit)
    policy = CommitPolicy(every=eng.commit_every, every_s=eng.commit_every_s)

    def submit(group: list[tuple[int, dict[str, Attempt]]]) -> Any:
        jobs = []
        for k, attempts in group:
            spec = plan.shard(k, attempts, reseed={sid: a.attempt for sid, a in attempts.items() if a.reseed})
            jobs.append((spec, {sid: a for sid, a in attempts.items() if a != Attempt()}))
        name = shard_name(group[0][0]) + (f"+{len(group) - 1}" if len(group) > 1 else "")
        return task.options(name=f"ray-knowsim {name}", num_cpus=eng.shard_cpus * len(group), **options).remote(
            code, execute_shards, jobs, ctx_ref, str(run_dir.root), eng.shard_fn, eng.shard_fn_options, board, policy,
            plan.fingerprint, *([models_ref] * len(group)),
        )

    ordered = sorted(todo.items())
    groups = [ordered[i: i + per_worker] for i in range(0, len(ordered), per_worker)]
    fan = BoundedFanOut(groups, submit, window=lambda: _window(eng), refresh_s=10.0, poll_s=0.25,
                        shared_dir=run_dir.root, shared_what="the run directory", checked_nodes=seen_by)
    totals = Counts()
    incomplete: dict[str, str] = {}
    last_poll = 0.0
    ended = False  # a shard ended since the cost watch last looked
    snapshots: dict[str, dict[str, Any]] = {}
    with display, progress_board() as board:
        for finished in fan:
            for f in finished:
                shard_ids = [shard_name(k) for k, _ in f.item]
                for shard_id in shard_ids:
                    board.drop.remote(shard_id)
                    snapshots.pop(shard_id, None)
                outcomes = f.value if f.error is None and not f.cancelled else [None] * len(shard_ids)
                for shard_id, outcome in zip(shard_ids, outcomes):
                    if f.cancelled:  # cancelled by the stop: its committed sessions stay
                        incomplete[shard_id] = f"cancelled: {stop.line() if stop else 'stopped'}"
                    elif f.error is not None or isinstance(outcome, ShardFailed):  # a shard failure must not stop the others
                        incomplete[shard_id] = _short_error(f.error) if f.error is not None else outcome.line()
                        display.warn(f"{shard_id} did not finish: {incomplete[shard_id]}")
                    else:
                        summary = outcome
                        display.shards_done += 1
                        ended = True
                        totals.add(Counts(summary["sessions"], summary["new_failed"], summary["turns"], summary["accounting"],
                                          summary.get("errors", {}), ended_turns=summary["turns"]))
            pending = {shard_name(k) for group in fan.in_flight for k, _ in group}
            if time.monotonic() - last_poll >= REPORT_EVERY_S or not pending:
                last_poll = time.monotonic()
                try:
                    snapshots = ray.get(board.snapshot.remote(), timeout=5)
                except Exception as exc:  # noqa: BLE001 - display only: the run goes on, the numbers lag (run.log says why)
                    DIAGNOSTICS.warning("progress board not reachable (%s: %s); the display may lag", type(exc).__name__, exc)
                shown = Counts(totals.sessions, totals.failed, totals.turns, dict(totals.accounting), dict(totals.errors),
                               totals.ended_turns)
                live = 0
                for sid, snap in snapshots.items():
                    if sid in pending:
                        shown.add(Counts.from_dict(snap))
                        live += int(snap.get("live", 0))
                display.update(shown, live)
                if display.cost_watch is not None:
                    display.cost_watch.poll(display.already + shown.sessions, ended, time.monotonic())
                    ended = False
                if stop is None:
                    stop = guard.check(shown.sessions, shown.errors)
                    if stop is not None:
                        display.warn(f"stopping the run: {stop.line()}; committed sessions stay, the same command resumes")
                        for group in fan.stop():
                            for k, _ in group:
                                incomplete[shard_name(k)] = f"not started: {stop.line()}"
        display.update(totals, 0)
    seen_by |= fan.checked_nodes
    guard.absorb(totals.sessions, totals.errors)
    if not display.interactive and not display.quiet:
        print(display.line(totals), flush=True)
    return incomplete, totals.accounting, stop


def _window(eng) -> int:
    """How many tasks to keep submitted: twice what the cluster can run at once (so no worker
    idles between tasks, and an autoscaler sees pending work), or the configured cap on shards
    (a task runs ``engine.worker_shards()`` of them)."""
    import ray

    per_worker = eng.worker_shards()
    if eng.max_concurrent_shards:
        return max(1, -(-eng.max_concurrent_shards // per_worker))
    cpus = float(ray.cluster_resources().get("CPU", 1.0))
    return max(2, 2 * int(cpus / (eng.shard_cpus * per_worker) + 1e-9))


def _short_error(exc: BaseException) -> str:
    """The last line of a Ray task error (the exception itself), not the whole traceback."""
    text = str(exc).strip().splitlines()
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".splitlines()[0][:500]
    lines = [ln for ln in text if ln.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:500] if text else "".join(traceback.format_exception_only(exc)).strip()


def plan_only(cfg: RunConfig, address: str | None = None) -> str:
    """The placement and group order ``run`` would use, as text; starts no engine (``run --plan``)."""
    plan, *_, inputs = prepare(cfg)
    with ray_session(address, **ray_options(cfg), quiet=True):
        vplan = place_models(cfg)
    plan = placed_plan(cfg, inputs, plan, vplan)
    lines = [vplan.render()]
    lines.append(f"sessions {plan.n_sessions} in {plan.n_shards} shards (shard_size {plan.shard_size})")
    for g, conds in enumerate(plan.condition_groups):
        shards = [k for k in range(plan.n_shards) if plan.shard_group(k) == g]
        lines.append(f"  group {g}: shards {shards[0]}..{shards[-1]} ({len(shards)}), conditions {conds}" if shards else
                     f"  group {g}: no shards")
    return "\n".join(lines)


__all__ = ["RunInterrupted", "RunOutcome", "pending_work", "plan_only", "ray_options", "ray_session", "run", "write_run_tables"]
