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
import math
import sys

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
    p.add_argument("--address", default=None, help="with --re-extract and a vllm extractor or an endpoint with a quota: the Ray cluster to join, whose runs share the quota (default: RAY_ADDRESS, else a local Ray)")
    p.set_defaults(func=main)


def _f(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def main(args: argparse.Namespace) -> int:
    from ray_knowsim.compare.agreement import agreement
    from ray_knowsim.compare.runs import IncompatibleRuns
    from ray_knowsim.config import ConfigError
    from ray_knowsim.score.run_stage import ScoreError
    from ray_knowsim.io.rundir import RunDirError

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    try:
        result = agreement(args.runs, args.out, reference=args.reference, metrics=metrics, alpha=args.alpha,
                           re_extract=args.re_extract, address=args.address)
    except (IncompatibleRuns, RunDirError, ValueError, ConfigError, ScoreError) as exc:
        print(f"ray-knowsim agreement: {exc}", file=sys.stderr)
        return 2
    print_result(result)
    return 0


def print_result(result) -> None:  # noqa: ANN001 - compare.agreement.AgreementResult
    """The agreement's summary lines (also after `ray-knowsim run` of a config with simulators)."""
    import pandas as pd

    print(f"agreement of {len(result.labels)} runs against {result.reference}; tables in {result.out_dir}")
    rank = result.tables["rank_agreement"]
    marg = rank[rank["knowledge_level"] == "all"] if len(rank) else rank
    for _, r in marg.iterrows():
        print(f"  {r['task']} {r['metric']}: tau {_f(r['tau'])} over {r['n_conditions']} conditions "
              f"({r['run']}, mean item ranks); top on the item win rate {r['top_run'] or 'tied'} vs {r['top_reference'] or 'tied'}")
    item = result.tables["item_agreement"]
    for _, r in (item[item["knowledge_level"] == "all"] if len(item) else item).iterrows():
        print(f"  {r['task']} {r['metric']}: Krippendorff alpha {_f(r['alpha'])} over {r['n_units']} item x condition cells")
    re = result.tables.get("extractor_reextraction")
    for _, r in (re[re["item_id"] == "all"] if re is not None and len(re) else pd.DataFrame()).iterrows():
        print(f"  {r['task']} extractor of {r['run']} on all the reference's exchanges: kappa {_f(r['kappa'])}, "
              f"TPR {_f(r['tpr'])}, TNR {_f(r['tnr'])} over {r['n_labels']:,} labels")
    for line in result.notes:
        print(f"  {line}")
    for _, r in result.tables["audit"].iterrows():
        print(f"  audit {r['run']}: {r['n_flagged']} of {r['n_sessions']} sessions flagged")
