"""`ray-knowsim validate`: check a run's condition contrasts against human ratings (KnowChat format)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "validate",
        help="compare a run's condition contrasts with human-study ratings (sign agreement, Spearman, coverage)",
        description=(
            "Human validation as in the KnowSim paper: Cliff's delta of human ratings per condition pair within "
            "(arm, task, level, metric); sign agreement of the simulator's contrast on the high-signal pairs with a "
            "one-sided exact binomial test; Spearman rho of z-scored cell means; concept-coverage Jaccard. "
            "The human data is read in the layout of the KnowChat dataset card (ray_knowsim/validate/knowchat_layout.yaml, "
            "documented there); --layout FILE renames sheets, columns, fields and condition codes. "
            "--inspect only loads the human data and says what was read (no --sim needed)."
        ),
    )
    p.add_argument("--human", required=True, type=Path, help="folder with the KnowChat JSONL files and XLSX workbooks")
    p.add_argument("--sim", type=Path, default=None, help="run folder (holds sessions/ and, for coverage, turns/); required unless --inspect")
    p.add_argument("--inspect", action="store_true", help="only load --human and print, per (arm, task), what was read; exit 0 if it all loads, 2 otherwise")
    p.add_argument("--layout", type=Path, default=None, help="YAML layout file merged over the built-in card layout (sheet/column/field names, condition codes)")
    p.add_argument("--threshold", type=float, default=0.15, help="high-signal pairs: |Cliff's delta| >= this (default 0.15)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default RUN_DIR/validation)")
    p.add_argument("--level-cuts", default="0.4,0.7", help="prescreening fraction cut points NOVICE_BELOW,ADVANCED_FROM (default 0.4,0.7)")
    p.add_argument("--metric-map", default="", help="human metric -> sim session column, e.g. 'KG=nkg,CO=co_es' (defaults KG=kg,DC=dc,CO=co,IQ=iq)")
    p.add_argument("--sim-map", type=Path, default=None, help="YAML/JSON {arm: {condition: sim condition(s)}} (default: the convention in validate/mapping.py)")
    p.add_argument("--simulator", action="append", default=None, help="only this simulator (repeatable; default: each simulator in the run)")
    p.add_argument("--no-coverage", action="store_true", help="skip the concept-coverage Jaccard (no turns read)")
    p.add_argument("--tagger", default=None, help="IU tagger 'module:callable' (default: the lexical tagger)")
    p.set_defaults(func=run)


def _metric_map(text: str) -> dict[str, str]:
    from ray_knowsim.validate.conditions import DEFAULT_SIM_COLUMNS

    out = dict(DEFAULT_SIM_COLUMNS)
    for part in filter(None, (s.strip() for s in text.split(","))):
        key, eq, col = part.partition("=")
        if not eq or not key.strip() or not col.strip():
            raise ValueError(f"--metric-map entries must look like KG=nkg, got {part!r}")
        out[key.strip().upper()] = col.strip()
    return out


def inspect(args: argparse.Namespace) -> int:
    from ray_knowsim.validate.conditions import LevelCuts
    from ray_knowsim.validate.inspection import inspect_folder
    from ray_knowsim.validate.layout import LayoutError, load_layout

    try:
        layout = load_layout(args.layout)
        cuts = LevelCuts.parse(args.level_cuts)
    except (LayoutError, ValueError) as exc:
        print(f"validate: {exc}", file=sys.stderr)
        return 2
    label = f"{layout.name}, from {args.layout}" if args.layout else f"{layout.name}, built in"
    result = inspect_folder(args.human, cuts, layout, label)
    print(result.text())
    for problem in result.problems:
        print(f"validate: {problem}", file=sys.stderr)
    return 2 if result.problems else 0


def run(args: argparse.Namespace) -> int:
    if args.inspect:
        return inspect(args)
    if args.sim is None:
        print("validate: --sim RUN_DIR is required (or --inspect to check the human data alone)", file=sys.stderr)
        return 2
    from ray_knowsim.validate.conditions import LevelCuts
    from ray_knowsim.validate.layout import LayoutError, load_layout
    from ray_knowsim.validate.coverage import load_tagger
    from ray_knowsim.validate.knowchat import KnowChatFormatError
    from ray_knowsim.validate.mapping import MappingError, load_sim_map
    from ray_knowsim.validate.pipeline import ValidateOptions, run_validation
    from ray_knowsim.validate.simdata import SimDataError
    from ray_knowsim.validate.tables import format_report, write_tables

    try:
        opts = ValidateOptions(
            human=args.human,
            layout=load_layout(args.layout),
            sim=args.sim,
            threshold=args.threshold,
            cuts=LevelCuts.parse(args.level_cuts),
            metric_columns=_metric_map(args.metric_map),
            sim_map=load_sim_map(args.sim_map) if args.sim_map else None,
            simulators=args.simulator,
            coverage=not args.no_coverage,
            tagger=load_tagger(args.tagger) if args.tagger else None,
        )
        result = run_validation(opts)
    except (KnowChatFormatError, LayoutError, MappingError, SimDataError, ValueError, OSError) as exc:
        print(f"validate: {exc}", file=sys.stderr)
        return 2
    out = args.out or (args.sim / "validation")
    write_tables(result.tables, out, result.params, result.notes)
    for note in result.notes:
        print(f"# {note}")
    print(format_report(result.tables, args.threshold))
    print(f"tables written to {out}")
    if result.tables["agreement"]["simulator"].isna().all():
        print("validate: no simulated session matched a human condition (see the notes above)", file=sys.stderr)
        return 1
    return 0
