"""`ray-knowsim report RUN_DIR`: one self-contained HTML page (and Markdown) of a run's results.

Prints the HTML page's path on stdout (the Markdown path goes to stderr with the other notes).
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report",
        help="write an HTML + Markdown report of a run directory",
        description="Tables (per level and level-marginalised, with ranks), failure modes, knowledge-state "
        "trajectories and a conversation viewer, as one offline HTML page plus Markdown tables.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="run directory holding sessions/ and turns/ Parquet tables")
    p.add_argument("--out", metavar="DIR", help="output folder (default: RUN_DIR/report)")
    p.add_argument(
        "--metrics",
        choices=("final", "es"),
        default="final",
        help="KG/CO/DC at the end of the conversation (final, default) or at the virtual early stop (es: *_es columns)",
    )
    p.add_argument("--gain", choices=("kg", "nkg"), default="kg", help="knowledge-gain column: raw KG (default) or normalised NKG")
    p.add_argument("--sessions", nargs="+", metavar="ID", default=(), help="session ids to show in the conversation viewer")
    p.add_argument("--sample", type=int, default=6, metavar="N", help="conversations to sample when --sessions is not given (default 6)")
    p.add_argument("--seed", type=int, default=0, help="seed of the conversation sample (default 0)")
    p.add_argument("--title", help="page title")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="report a run that holds fewer sessions than planned (interrupted, stopped on failures, still "
                        "running); refused without it, since its ranking may differ from the full run's. The page says so")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ray_knowsim.report.build import ReportOptions, build_report
    from ray_knowsim.io.rundir import RunDirError

    if args.sample < 0:
        print("report: --sample must be >= 0", file=sys.stderr)
        return 2
    options = ReportOptions(
        variant=args.metrics, gain=args.gain, sample=args.sample, sessions=tuple(args.sessions), seed=args.seed, title=args.title,
        allow_incomplete=args.allow_incomplete,
    )
    try:
        result = build_report(args.run_dir, args.out, options)
    except RunDirError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    print(f"markdown: {result.markdown_path}", file=sys.stderr)
    print(result.html_path)
    return 0
