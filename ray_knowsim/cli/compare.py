"""`ray-knowsim compare RUN_DIR [RUN_DIR ...] --out DIR`: paired comparisons and a leaderboard.

Per (task, knowledge level, metric) and pair of conditions: the mean paired difference over
matched cells (same task, item, level, trial and initial state) with a descriptive item-clustered
CI, and ONE verdict over items: the exact sign test on each item's mean difference with its
win-rate interval, Holm's procedure over the family (Bonferroni with --effect; significant <=> the
adjusted interval excludes 1/2); the same for the level-marginal ("all"). Every verdict carries its counts (matched items,
wins, losses, ties) and a sentence; with ``--effect`` a pair whose net win rate over all matched
items is shown inside +-effect is "equivalent". With too few items for any verdict at the
family's size it says so and gives the minimum detectable effects. The leaderboard orders each
metric's conditions on the same item win rate in tiers from the significant verdicts (conditions no
verdict separates share one; rows inside a tier by mean item rank; ★ only for a condition that beats
every other). Several run directories merge when their items, levels,
rules and learner simulator agree; otherwise the first difference is reported and the exit code is 2.

Failure rates per condition and level are written beside them (failures); a pair of conditions
whose failure rates differ (Fisher's exact test, p < alpha and >= 5 points apart) is warned about:
their means are over different sets of cells.

Writes DIR/paired, best, mde, leaderboard, failures, failure_gaps (.parquet + .csv),
DIR/leaderboard.html, DIR/compare.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ray_knowsim.stats.defaults import ALPHA, POWER
from ray_knowsim.stats.multiplicity import correction_short


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("compare", help="paired condition comparisons and a leaderboard across runs",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--metrics", default=None, help="comma-separated metric columns (default: kg,nkg,dc,ic,co,po,engagement,iq "
                                                   "with data, plus cost_usd when priced)")
    p.add_argument("--effect", type=float, default=None,
                   help="equivalence margin of the win rate (ties half; the same scale as adaptive.effect): a pair whose "
                        "adjusted interval lies inside 1/2 +- EFFECT is reported as differing by less than it (tied items count)")
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"family-wise error rate per family (default {ALPHA})")
    p.add_argument("--power", type=float, default=POWER, help=f"power for the minimum detectable effect (default {POWER})")
    p.add_argument("--family", choices=("run", "level_metric"), default="run",
                   help=f"the family the multiplicity correction covers ({correction_short(False)}; {correction_short(True)} "
                        "with --effect): the "
                        "whole comparison (default) or each (task, level, metric)")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="rank runs that hold fewer sessions than planned (interrupted, stopped on failures, still running); "
                        "refused without it, since such a ranking may differ from the full runs'. The page says so")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ray_knowsim.compare.pipeline import compare_runs
    from ray_knowsim.compare.runs import IncompatibleRuns
    from ray_knowsim.io.rundir import RunDirError

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    try:
        result = compare_runs(args.runs, args.out, metrics=metrics, alpha=args.alpha, power=args.power, family=args.family, allow_incomplete=args.allow_incomplete, effect=args.effect)
    except (IncompatibleRuns, RunDirError, ValueError) as exc:
        print(f"ray-knowsim compare: {exc}", file=sys.stderr)
        return 2
    for line in result.incomplete:
        print(f"warning: incomplete run ranked (--allow-incomplete): {line}", file=sys.stderr)
    for line in result.warnings:
        print(f"warning: failure rates differ: {line}", file=sys.stderr)
    paired = result.tables["paired"]
    sig = paired[paired["significant"]]
    family = int(paired["family_size"].max()) if len(paired) else 0
    print(f"compared {len(args.runs)} run(s), {len(result.conditions)} conditions: "
          f"{len(paired)} paired rows, {int(paired['testable'].sum())} with enough items for a verdict, {len(sig)} "
          f"significant (sign test over items, {correction_short(args.effect is not None)} over {family}, alpha {args.alpha}); "
          f"results in {Path(args.out)}")
    for msg in result.too_few:
        print(f"  {msg}")
    if result.simulator is not None:
        print(f"  {result.simulator.note}")
    for _, r in paired[paired["significant"] | paired["equivalent"]].iterrows():
        print(f"  {r['task']}: {r['sentence']}")
    for line in sorted(set(result.tables["leaderboard"]["ranked_set"])):
        print(f"  leaderboard {line}")
    board = result.tables["leaderboard"]
    for (task, metric), g in board.groupby(["task", "metric"], sort=False):  # tiers from the verdicts, n.s. where none stands
        print(f"  {task} {str(metric).upper()}: {g['tiers'].iloc[0]}")
    for line in dict.fromkeys(board["detectable"]):
        print(f"  {line}")
    return 0
