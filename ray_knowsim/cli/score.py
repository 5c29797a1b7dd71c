"""`ray-knowsim score RUN_DIR [--judge MODEL_KEY_OR_FILE] [--name NAME]`: re-judge a finished run."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ray_knowsim.cli.output import add_json_option, emit, json_target_error
from ray_knowsim.score.judges import DEFAULT_JUDGES


def register(sub: Any) -> None:
    p = sub.add_parser(
        "score",
        help="judge (or re-judge) a run's finished transcripts into scores/<name>/ without re-simulating",
        description="Apply the judges (Interaction Quality rater, baseline termination judge) to the committed "
        "transcripts of RUN_DIR. Results go to RUN_DIR/scores/<name>/ (sessions and turns stay untouched); "
        "re-running resumes: committed shards are skipped. The optional LLM review of the simulator: "
        "--judges simulator_review --name review (its findings per session, and its agreement with the "
        "simulator audit in RUN_DIR/tables/review_agreement).",
    )
    p.add_argument("run_dir")
    p.add_argument("--judge", default=None, help="a model key of the run's config, or a YAML file with one model entry "
                   "({backend: ..., ...}; its key is the file name); default: the run's roles.judge")
    p.add_argument("--name", default=None, help="name of the score set (default: the judge's model key; "
                   "'review' for --judges simulator_review alone)")
    p.add_argument("--judges", default=",".join(DEFAULT_JUDGES), help="comma-separated registered judges to apply")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import this module first (it registers judges or backends); repeatable")
    p.add_argument("--primary", action="store_true",
                   help="make this score set the one the tables and report show as iq & co. (rewrites tables/)")
    p.add_argument("--shard-concurrency", type=int, default=4, metavar="N",
                   help="shards judged at once (default 4); each commits on its own as it finishes")
    p.add_argument("--address", default=None, help="Ray address (default: RAY_ADDRESS, else a local Ray)")
    add_json_option(p, "the score set's counts, mean IQ per condition, review agreement")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ray_knowsim.config import ConfigError, parse_run_config
    from ray_knowsim.run.manifest import read_manifest
    from ray_knowsim.io.commits import RunDir
    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.cluster.codecheck import CodeMismatch, require_same_code
    from ray_knowsim.run.fan_out import ray_options, ray_session, write_run_tables
    from ray_knowsim.score.store import ScoreDir
    from ray_knowsim.score.run_stage import ScoreError, score_run
    from ray_knowsim.registry import PluginImportError, import_plugins
    from ray_knowsim.score.summary import review_record, score_lines, score_record

    if (why := json_target_error(args)) is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    rd = RunDir(args.run_dir)
    manifest = read_manifest(rd)
    if manifest is None:
        print(f"error: {rd.root} has no manifest.json (is it a run directory?)", file=sys.stderr)
        return 2
    try:
        import_plugins(args.plugin)
        cfg = parse_run_config(manifest["config"], base_dir=_base_dir(manifest, rd))
        config_hash = cfg.config_hash()
        with ray_session(args.address, **ray_options(cfg), quiet=True):
            require_same_code(lambda line: print(line, file=sys.stderr))  # the judges' reduction runs on workers
            judges = [j for j in args.judges.split(",") if j]
            # a review-only pass is its own set, "review", unless named (the judge's key names the run's primary set)
            name = args.name or ("review" if judges == ["simulator_review"] else None)
            out = score_run(cfg, rd.root, judge=args.judge, name=name, config_hash=config_hash,
                            judges=judges, shard_concurrency=args.shard_concurrency)
            if args.primary:
                ScoreDir(rd.root, out.name).make_primary()
                write_run_tables(rd, RunReader.open(rd.root, config_hash))
        review = None
        if "simulator_review" in judges:  # its agreement with the deterministic audit
            from ray_knowsim.score.review import run_review_agreement

            review = review_record(run_review_agreement(rd.root, out.name, RunReader.open(rd.root, config_hash)))
        means = _means(rd.root, config_hash, out.name)
    except (ConfigError, ScoreError, PluginImportError, CodeMismatch) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    record = score_record(out, judges=judges, primary=bool(args.primary), where=str(ScoreDir(rd.root, out.name).root),
                          means=means, review=review)
    emit(args, record, lambda record_file: score_lines(record, record_file))
    return 0


def _means(root: Any, config_hash: str, name: str) -> list[dict]:
    """Per (task, condition) the score set's mean IQ and n: the report's judge-table numbers."""
    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.report.judges import score_set_means
    from ray_knowsim.score.store import RunScores

    scores = RunScores.load(root)
    sessions = scores.attach(RunReader.open(root, config_hash).sessions.read()).to_pandas()
    return score_set_means(sessions, name, scores.primary)


def _base_dir(manifest: dict, rd: Any) -> Any:
    from ray_knowsim.run.extractor import base_dir_of

    return base_dir_of(manifest)
