"""`ray-knowsim run CONFIG`: plan, run (or resume) and reduce an experiment on Ray.

Without an address it starts a local Ray on this machine and stops it at the end; with
``--address auto`` (or RAY_ADDRESS, which ``ray job submit`` sets) it joins a cluster. Re-running
the same command into the same output directory resumes, per session: committed sessions are
skipped, sessions that failed for the infrastructure (transport, engine, limiter) are rerun, and
sessions that failed on the model's answer (unreadable, truncated, empty) stay results unless
``--rerun-model-failures`` asks otherwise (each rerun is recorded on its row).

An ``http`` entry whose endpoint's models list marks it as ``ray-knowsim serve-offline`` (the
offline test double) gets ``offline_server: true``, said on the terminal and recorded with the config
(backends/http/offline_double.py). Before the first session, every model entry is checked with one cheap call (its endpoint's models
list, or one tiny request), and the run's largest prompts and token budgets are compared with the
context each endpoint holds; an entry that cannot be used stops the run before anything is sent
(``--no-preflight`` skips the checks). A run whose sessions keep failing with one error stops
early (``engine.fail_fast``). Ctrl-C says how many sessions are committed and how to resume.

At the end it prints a result within 100 columns: per condition and level the means with their
95 % intervals, the verdicts (the report's sentences), the caveat when the offline test double
answered, and ``next: ray-knowsim view RUN_DIR | ray-knowsim report RUN_DIR``; the report has the
rest. Diagnostics that ask nothing of you (a lagging progress display, Ray's shutdown noise) go
to RUN_DIR/run.log.

Exit codes: 0 all sessions ok, 1 some sessions failed or shards did not finish (re-run to
resume), 2 bad config or inputs (or the checks before spending refused the run), 3 stopped early
by ``engine.fail_fast`` (re-run to resume once the cause is fixed), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import shlex
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="run (or resume) an experiment config on Ray", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="run config (YAML); see configs/demo.yaml")
    p.add_argument("--output", "-o", default=None, help="run directory (default: the config's output_dir)")
    p.add_argument("--address", default=None,
                   help="Ray cluster to join ('auto', 'ray://host:10001', ...); default: RAY_ADDRESS, else a local Ray")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a config value (YAML value), e.g. --set trials=2 --set engine.shard_size=8; a path "
                        "given here is relative to the working directory (one in the file, to the file's folder)")
    p.add_argument("--quiet", "-q", action="store_true", help="no live progress or tables; a final summary line only")
    p.add_argument("--overwrite", action="store_true", help="discard results already in the run directory")
    p.add_argument("--rerun-model-failures", action="store_true",
                   help="on resume, also rerun sessions that failed on the model's answer (unreadable, truncated, empty); "
                        "by default only infrastructure failures are rerun. Each rerun is a new draw, recorded on its row")
    p.add_argument("--dry-run", action="store_true",
                   help="call no model, write no session: estimate requests, tokens, cost and wall time into RUN_DIR/estimate.json")
    p.add_argument("--from-run", default=None, metavar="DIR",
                   help="with --dry-run: take completion lengths, turns and latencies from this earlier run directory")
    p.add_argument("--reasoning-tokens", action="append", default=[], metavar="[ROLE=]N",
                   help="with --dry-run: thinking tokens per request a reasoning model writes on top of its answer "
                        "(billed as output), for every role or one (user_sim, assistant, extractor, judge); default none")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the checks before spending (models list / tiny request per endpoint, prompt sizes against "
                        "each endpoint's context), e.g. where the driver cannot reach the endpoints; recorded in the manifest")
    p.add_argument("--re-extract", action="store_true",
                   help="with a simulators: list, the agreement also has each other simulator's extractor label all the "
                        "first simulator's exchanges (asks those models; resumable, costed; docs/audit.md)")
    p.add_argument("--plan", action="store_true",
                   help="print where the self-hosted models go and the condition-group order, then exit (starts no engine)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ray_knowsim.config import ConfigError, load_run_config
    from ray_knowsim.plan.build import RunError
    from ray_knowsim.run.fan_out import plan_only

    try:
        cfg = load_run_config(args.config, overrides=args.overrides)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if cfg.simulators:
        return _simulators(cfg, args)
    if args.dry_run:
        return _dry_run(cfg, args, args.output)
    if args.plan:
        try:
            print(plan_only(cfg, address=args.address), flush=True)
        except RunError as exc:
            print(f"ray-knowsim run --plan: {exc}", file=sys.stderr)
            return 2
        return 0
    if not args.no_preflight:  # an endpoint that is `ray-knowsim serve-offline` gets the facts it answers from
        from ray_knowsim.backends.http.offline_double import adopt_offline_doubles

        cfg, adopted = adopt_offline_doubles(cfg)
        if adopted and not args.quiet:
            print("\n".join(adopted), flush=True)
    if cfg.adaptive is not None:
        return _adaptive(cfg, args)
    return _run_one(cfg, args, args.output)


def _dry_run(cfg, args: argparse.Namespace, output) -> int:  # noqa: ANN001
    """The estimate of a run (no model, no Ray, no session): printed and in ``output``/estimate.json."""
    from ray_knowsim.preflight.estimate import dry_run, parse_reasoning, summary_lines
    from ray_knowsim.io.loaders import LoadError

    try:
        reasoning = parse_reasoning(getattr(args, "reasoning_tokens", None) or [])
        if reasoning and args.from_run:
            raise ValueError("--reasoning-tokens sets a prior; the completion tokens of --from-run already hold what its models thought")
        est, path = dry_run(cfg, output, args.from_run, reasoning)
    except (LoadError, ValueError, OSError) as exc:
        print(f"ray-knowsim run --dry-run: {exc}", file=sys.stderr)
        return 2
    print("\n".join(summary_lines(est)) + f"\nestimate in {path}", flush=True)
    _warn_what_the_run_will_refuse(cfg)
    return 0


def _run_one(cfg, args: argparse.Namespace, output, resume_dir=None) -> int:  # noqa: ANN001
    """One run to completion (or resume), its final lines, and its exit code. ``resume_dir``: the
    ``-o`` the printed resume command names (default: the run's own directory)."""
    from ray_knowsim.run.manifest import ManifestMismatch
    from ray_knowsim.run.fan_out import RunInterrupted
    from ray_knowsim.plan.build import RunError
    from ray_knowsim.run.fan_out import run

    try:
        outcome = run(cfg, address=args.address, output=output, quiet=args.quiet,
                      overwrite=args.overwrite, config_file=str(args.config),
                      rerun_model_failures=args.rerun_model_failures, preflight=not args.no_preflight)
    except (RunError, ManifestMismatch) as exc:
        print(f"ray-knowsim run: {exc}", file=sys.stderr)
        return 2
    except RunInterrupted as stop:
        return interrupted(args, stop, resume_dir)
    for line in final_lines(outcome, args.quiet):
        print(line, flush=True)
    if outcome.stopped is not None:
        from ray_knowsim.schema.failures import MODEL, failure_class

        rerun = failure_class(outcome.stopped.error) == MODEL and not args.rerun_model_failures
        command = resume_command(args, resume_dir or outcome.run_dir) + (" --rerun-model-failures" if rerun else "")
        print(f"stopped early by engine.fail_fast: fix the cause of {outcome.stopped.error}, then resume with:\n  {command}"
              + ("\n(a model failure: without --rerun-model-failures the failed sessions stay results)" if rerun else ""),
              file=sys.stderr)
        return 3
    if outcome.incomplete:
        print(f"{len(outcome.incomplete)} shard(s) did not finish; run the same command again to resume", file=sys.stderr)
    return 0 if outcome.status == "ok" else 1


def final_lines(outcome, quiet: bool) -> list[str]:  # noqa: ANN001 - a run.fan_out.RunOutcome
    """What the terminal says after a run. ``quiet``: the one summary line (for logs and scripts:
    it greps whole) and the LLM calls. Otherwise the result in at most 100 columns
    (:mod:`ray_knowsim.report.terminal`): the means, verdicts and caveat, the summary folded, the
    LLM calls, and a closing ``next:`` line with the commands that open the run."""
    from ray_knowsim.io.rundir import run_status_text
    from ray_knowsim.tables.outcome_tables import final_line_parts

    stopped = f" ({outcome.stopped.line()})" if outcome.stopped is not None else ""
    parts = final_line_parts(outcome.tables)  # failures by kind, a broken simulator
    # the report's and the viewer's status line, read from the run directory as they read it
    said = run_status_text(outcome.run_dir) or (f"{outcome.status_word}; sessions ok {outcome.n_ok}, "
                                               f"failed {outcome.n_failed}, of {outcome.n_sessions}")
    head = f"run {outcome.run_id}: {said}{stopped}"
    calls = []
    if outcome.llm:
        from ray_knowsim.llm.accounting import Accounting

        calls = [f"{role} {st.calls} calls/{st.total_tokens} tok" + (f"/{st.errors} errors" if st.errors else "")
                 for role, st in sorted(Accounting.from_dict(outcome.llm).by_role.items())]
    if quiet:
        said = "".join(f"; {part}" for part in parts)
        return [f"{head}{said}; {outcome.seconds:.1f}s; results in {outcome.run_dir}"] + (["llm: " + ", ".join(calls)] if calls else [])
    from ray_knowsim.report.run_result import closing_lines, result_lines
    from ray_knowsim.report.terminal import pack, wrap

    lines = result_lines(outcome.run_dir, outcome.tables) if outcome.tables else []
    lines += ["", *wrap(f"{head}; {outcome.seconds:.1f}s")]
    for part in parts:
        lines += wrap(part, first="  ", indent="    ")
    if calls:
        lines += pack("llm: ", calls)
    return lines + closing_lines(outcome.run_dir)


def _simulators(cfg, args: argparse.Namespace) -> int:  # noqa: ANN001
    """``simulators:`` -- one run per simulator under the output folder (each its own directory,
    manifest, resume, cost and audit: sessions and verdicts never pool across simulators), then
    ``agreement`` over them into ``OUTPUT/agreement`` (the first simulator is the reference)."""
    from pathlib import Path

    from ray_knowsim.config import ConfigError

    if args.plan:
        print("ray-knowsim run: --plan with simulators: not built; plan one simulator's config (without the list)",
              file=sys.stderr)
        return 2
    try:
        runs = cfg.simulator_configs()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    root = Path(args.output) if args.output else cfg.output_path()
    if args.dry_run:  # each simulator's estimate in its own run directory: what the command would spend
        codes = [(print(f"simulator {name}:", flush=True), _dry_run(sub, args, root / name))[1] for name, sub in runs]
        return max(codes)
    paths = []
    for name, sub in runs:
        if not args.no_preflight:
            from ray_knowsim.backends.http.offline_double import adopt_offline_doubles

            sub, adopted = adopt_offline_doubles(sub)
            if adopted and not args.quiet:
                print("\n".join(adopted), flush=True)
        print(f"simulator {name}: learner {sub.roles.user_sim.model}, extractor {sub.roles.extractor.model}", flush=True)
        code = _run_one(sub, args, root / name, resume_dir=root)
        if code != 0:
            print(f"agreement not written: simulator {name}'s run did not finish ok (exit {code}); the same command "
                  "resumes every simulator's run", file=sys.stderr)
            return code
        paths.append(root / name)
    from ray_knowsim.cli.agreement import print_result
    from ray_knowsim.compare.agreement import agreement

    result = agreement(paths, root / "agreement", reference=paths[0], re_extract=args.re_extract, address=args.address)
    print_result(result)
    return 0


def _warn_what_the_run_will_refuse(cfg) -> None:  # noqa: ANN001
    """The dry run calls nothing, but it can see what the real run would refuse before it starts
    (a missing or empty API-key variable) and says so, with where it looked."""
    from ray_knowsim.backends.model_set import check_secrets, where_secrets_were_checked

    errors = check_secrets(cfg)
    if errors:
        print("warning: the run itself will refuse to start: missing API keys:\n  " + "\n  ".join(errors)
              + f"\n({where_secrets_were_checked()})", file=sys.stderr, flush=True)


def interrupted(args: argparse.Namespace, stop, resume_dir=None) -> int:  # noqa: ANN001
    """Ctrl-C: what is committed and the command that resumes; exit code 130. The count is read
    again from the run directory now that the run has stopped (the driver counted while shards
    could still commit), so it is what the viewer and the report will show."""
    from ray_knowsim.io.rundir import RunDirError, RunReader, sessions_text

    committed, ok = stop.committed, stop.ok
    try:
        st = RunReader.open(stop.run_dir).status()
        committed, ok = st.n_committed, st.n_ok
    except (RunDirError, OSError):
        pass
    print(f"interrupted: {sessions_text(committed, stop.planned)} are committed and safe ({ok:,} ok) in "
          f"{stop.run_dir}; resume with:\n  {resume_command(args, resume_dir or stop.run_dir)}", file=sys.stderr, flush=True)
    return 130


def resume_command(args: argparse.Namespace, run_dir) -> str:  # noqa: ANN001
    """The command that resumes this run: the same config, overrides and options, into the same
    run directory (never ``--overwrite``, which would discard what is committed)."""
    argv = ["ray-knowsim", "run", str(args.config), "-o", str(run_dir)]
    for override in args.overrides:
        argv += ["--set", override]
    if args.address:
        argv += ["--address", args.address]
    argv += [flag for flag, on in (("--quiet", args.quiet), ("--rerun-model-failures", args.rerun_model_failures),
                                   ("--no-preflight", args.no_preflight)) if on]
    return shlex.join(argv)


def _adaptive(cfg, args: argparse.Namespace) -> int:
    """A config with an ``adaptive:`` section runs in rounds (docs/adaptive.md)."""
    from ray_knowsim.adaptive.driver import run_adaptive
    from ray_knowsim.run.fan_out import RunInterrupted
    from ray_knowsim.run.manifest import ManifestMismatch
    from ray_knowsim.plan.build import RunError

    if args.overwrite:
        from ray_knowsim.plan.build import prepare

        prepare(cfg, args.output, overwrite=True)
    try:
        out = run_adaptive(cfg, address=args.address, output=args.output, quiet=args.quiet,
                           rerun_model_failures=args.rerun_model_failures, preflight=not args.no_preflight)
    except (RunError, ManifestMismatch) as exc:
        print(f"ray-knowsim run: {exc}", file=sys.stderr)
        return 2
    except RunInterrupted as stop:  # the same command replays the finished rounds (committed) and goes on
        return interrupted(args, stop)
    print(adaptive_final_line(out), flush=True)
    rec = out.record
    for d in rec.decisions:
        what = (d.winner or f"no winner (cycle {' > '.join(d.cycle or [])})") if d.kind == "best" else \
            (" > ".join(d.order) if d.order else f"no strict order (cycle {' > '.join(d.cycle or [])})") \
            if d.kind == "ranking" else "resolved"
        print(f"  {d.task}/{d.knowledge_level} {d.metric}: " + (f"{what} (after round {d.after_round})" if d.decided
                                                                 else f"undecided, in play: {', '.join(d.in_play)}" if d.in_play
                                                                 else "undecided: no outcome reachable with the pool's remaining items"))
    for g in rec.failure_gaps:
        print(f"  warning: {g.task}/{g.knowledge_level}: {g.condition_a} fails {g.failure_rate_a:.0%} of its sessions, "
              f"{g.condition_b} {g.failure_rate_b:.0%} (Fisher p {g.p_fisher:.3g}): their verdicts compare different cases")
    if not args.quiet:  # what a fixed run's result says too: the offline double's caveat, where to look next
        from ray_knowsim.report.run_result import caveat_lines, closing_lines

        for line in caveat_lines(out.run_dir) + closing_lines(out.run_dir):
            print(line)
    return 0


def adaptive_final_line(out) -> str:  # noqa: ANN001
    """The adaptive run's summary line; its sessions in io.rundir.sessions_text's words, the ones
    the round headers and the viewer's run status say (one source for the planned total)."""
    from ray_knowsim.stats.adaptive import session_share
    from ray_knowsim.io.rundir import sessions_text

    rec = out.record
    decided = sum(d.decided for d in rec.decisions)
    saved = 1 - session_share(rec.sessions_run, rec.sessions_fixed)
    return (f"adaptive run: {rec.status} after {out.rounds_run} round(s); {decided} of {len(rec.decisions)} decisions made; "
            f"{sessions_text(rec.sessions_run, rec.sessions_fixed, rec.status)} ({saved:.0%} saved); "
            f"results in {out.run_dir} (decisions.json)")
