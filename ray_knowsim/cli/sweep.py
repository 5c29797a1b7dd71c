"""`ray-knowsim sweep CONFIG`: re-score recorded conversations under many rule settings.

Everything a config can get wrong (unknown rule parameter, a setting that breaks a rule
precondition, a missing source) is reported before Ray starts; exit status 2. A re-run into the
same output folder resumes (committed work is skipped, on any cluster: the pieces are cut anew for
the CPUs it has); ``--fresh`` starts over.
On a cluster: ``ray job submit --working-dir . -- ray-knowsim sweep configs/sweep_reference.yaml``
(the driver joins the cluster through RAY_ADDRESS, which ``ray job submit`` sets).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ray_knowsim.cli.output import add_json_option, emit, json_target_error, progress_printer
from ray_knowsim.cluster.codecheck import CodeMismatch
from ray_knowsim.io.loaders import LoadError
from ray_knowsim.sweep.commits import SweepCommitError
from ray_knowsim.sweep.config import SweepConfigError, load_sweep_config
from ray_knowsim.sweep.summary import headline_lines, sweep_lines, sweep_record
from ray_knowsim.text import fit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="re-score recorded conversations under many rule settings (sensitivity report)")
    p.add_argument("config", type=Path, help="sweep config (YAML); relative paths are read from its folder")
    p.add_argument("--out", help="output folder (default: the config's `output`, relative to the config)")
    p.add_argument("--fresh", action="store_true", help="discard an earlier sweep in the output folder instead of resuming")
    p.add_argument("--backend", choices=("auto", "kernel", "python"), help="override execution.backend")
    p.add_argument("--address", help="Ray address to join (default: RAY_ADDRESS, else a local Ray)")
    p.add_argument("--num-cpus", type=int, help="CPUs of a local Ray (default: execution.num_cpus, else all cores; ignored on a cluster)")
    p.add_argument("--plan", action="store_true", help="validate and print the plan (settings, pieces); run nothing")
    p.add_argument("--report-only", action="store_true", help="rebuild the report of a finished sweep; no re-scoring")
    p.add_argument("--no-report", action="store_true", help="skip the sensitivity report")
    p.add_argument("--no-ray", action="store_true", help="run the pieces in this process, one by one (debugging, tiny sweeps)")
    p.add_argument(
        "--check-identity",
        action="store_true",
        help="exit 1 unless the default setting reproduces every recorded metric of the source (see identity.csv)",
    )
    add_json_option(p, "the report's headline, the identity check, the work done, where the report is")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (why := json_target_error(args)) is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    try:
        cfg = load_sweep_config(args.config)
        if args.out:
            cfg = cfg.model_copy(update={"output": str(Path(args.out).resolve())})
        if args.num_cpus:
            cfg = cfg.model_copy(update={"execution": cfg.execution.model_copy(update={"num_cpus": args.num_cpus})})
        if args.report_only:
            from ray_knowsim.sweep.report import write_report
            from ray_knowsim.sweep.runner import check_report_config

            check_report_config(cfg)
            out = cfg.resolve(cfg.output)
            if not (out / "settings.parquet").exists():
                raise SweepConfigError(f"{out} holds no finished sweep to report on")
            files = write_report(out, cfg.report)
            head = _read_headline(out)
            emit(args, {"name": cfg.name, "output": str(out), "report": str(out / files[0]), "headline": head},
                 lambda record_file: [fit(f"sweep '{cfg.name}':"), *headline_lines(head),
                                      fit(f"report: {out / files[0]} ({len(files)} files)"),
                                      *([fit(f"record: {record_file}")] if record_file else [])])
            return 0
        from ray_knowsim.sweep.runner import plan_sweep, run_sweep

        if args.plan:
            from ray_knowsim.sweep.pieces import cut, missing, settings_per_piece

            plan = plan_sweep(cfg, backend=args.backend)
            cpus = cfg.execution.cluster_cpus or cfg.execution.num_cpus or os.cpu_count() or 1
            todo = missing(len(plan.settings), plan.n_blocks, {})
            per_piece = settings_per_piece(todo=todo, block_size=plan.block_size, cpus=cpus, seconds_per_pair=plan.seconds_per_pair,
                                           target_task_seconds=cfg.execution.target_task_seconds,
                                           explicit=cfg.execution.settings_per_task)  # fmt: skip
            print(
                json.dumps(
                    {
                        "settings": len(plan.settings),
                        "conversations": len(plan.source.conversations),
                        "skipped": dict(plan.source.skipped),
                        "params": plan.params,
                        "backend": plan.backend,
                        "conversations_per_block": plan.block_size,
                        "blocks": plan.n_blocks,
                        # the pieces are cut again for the cluster the sweep runs on
                        "pieces_for_cpus": cpus,
                        "settings_per_piece": per_piece,
                        "pieces": len(cut(todo, per_piece)),
                        "output": str(plan.out_dir),
                    },
                    indent=2,
                )
            )
            return 0
        result = run_sweep(cfg, fresh=args.fresh, backend=args.backend, address=args.address, report=not args.no_report,
                           use_ray=not args.no_ray, progress=progress_printer(args))
    except (SweepConfigError, SweepCommitError, LoadError, CodeMismatch) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ident = result.identity or {}
    bad = ident.get("mismatching_conversations", 0)
    record = sweep_record(result, _read_headline(result.out_dir) if result.report_files else None)
    emit(args, record, lambda record_file: sweep_lines(record, record_file))
    if args.check_identity and (bad or not ident.get("checked")):
        print("error: --check-identity: the default setting does not reproduce the source", file=sys.stderr)
        return 1
    return 0


def _read_headline(out: Path) -> dict | None:
    """The report's headline as index.md states it (report/headline.json; None before a report)."""
    path = out / "report" / "headline.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


__all__ = ["register", "run"]
