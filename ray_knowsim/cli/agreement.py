"""`ray-knowsim agreement RUN_DIR RUN_DIR ... --out DIR`: does a verdict survive a change of simulator?

The runs are ONE design (same items, levels, conditions, tutors, rules, seed, trials) run under
different learner / extractor models, e.g. from one config with ``--set``:

    ray-knowsim run cfg.yaml --out runs/sim_a
    ray-knowsim run cfg.yaml --out runs/sim_b --set roles.user_sim.model=other --set roles.extractor.model=other

Anything else that differs is refused, naming the difference. Writes to DIR: rank_agreement
(Kendall tau of the conditions' mean item ranks -- the leaderboard's, on the verdicts' item win
rate -- per task, level, metric, against the reference run, and the top of each),
item_agreement (Krippendorff's alpha over item x condition cells), verdicts (compare's verdict
under each simulator; holds_everywhere), extractor_agreement (Cohen's kappa, TPR/TNR of
well_explained per IU, over exchanges that are the same text in both runs), audit (each run's
flagged share), agreement.json.

--re-extract: each other run's extractor (its model entry, from its recorded config) labels ALL
the reference's exchanges through the simulation's own extractor prompt, with the state the
reference's learner held before each; table extractor_reextraction has kappa and TPR/TNR per
(task, item, IU) over all of them. Resumable (DIR/re_extraction/<run>/extractor_answers.parquet:
a rerun asks only what is missing or failed) and costed (calls, tokens, the entry's price).
"""

from __future__ import annotations

import argparse
import sys

from ray_knowsim.cli.output import add_json_option
from ray_knowsim.stats.defaults import ALPHA


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("agreement", help="agreement of runs that differ only in the simulator models",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--reference", default=None, help="the run the others are measured against (default: the first)")
    p.add_argument("--metrics", default=None, help="comma-separated metric columns (default: those with data)")
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"family-wise error rate of compare's verdicts (default {ALPHA})")
    p.add_argument("--re-extract", action="store_true",
                   help="have each other run's extractor label all the reference's exchanges (asks its model; resumable, costed)")
    add_json_option(p, "the headline rows of the tables, the runs and the notes")
    p.add_argument("--address", default=None, help="with --re-extract and a vllm extractor or an endpoint with a quota: the Ray cluster to join, whose runs share the quota (default: RAY_ADDRESS, else a local Ray)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ray_knowsim.cli.output import emit, json_target_error
    from ray_knowsim.compare.agreement import agreement
    from ray_knowsim.compare.agreement_summary import agreement_lines, agreement_record
    from ray_knowsim.compare.runs import IncompatibleRuns
    from ray_knowsim.config import ConfigError
    from ray_knowsim.score.run_stage import ScoreError
    from ray_knowsim.io.rundir import RunDirError

    if (why := json_target_error(args)) is not None:
        print(f"ray-knowsim agreement: {why}", file=sys.stderr)
        return 2
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    try:
        result = agreement(args.runs, args.out, reference=args.reference, metrics=metrics, alpha=args.alpha,
                           re_extract=args.re_extract, address=args.address)
    except (IncompatibleRuns, RunDirError, ValueError, ConfigError, ScoreError) as exc:
        print(f"ray-knowsim agreement: {exc}", file=sys.stderr)
        return 2
    record = agreement_record(result)
    emit(args, record, lambda record_file: agreement_lines(record, record_file))
    return 0


def print_result(result) -> None:  # noqa: ANN001 - compare.agreement.AgreementResult
    """The agreement's summary lines (also after `ray-knowsim run` of a config with simulators)."""
    from ray_knowsim.compare.agreement_summary import agreement_lines, agreement_record

    for line in agreement_lines(agreement_record(result)):
        print(line)
