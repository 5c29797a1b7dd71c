"""`ray-knowsim replay`: re-run recorded conversations' signals through our rules.

Reference data is not always a DAG, so graphs are read in reference-compatible mode by
default (each cyclic graph named in a warning); ``--graph-mode strict`` rejects them.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from ray_knowsim.io.loaders import LoadError, load_graph_cache, load_records
from ray_knowsim.schema.graph import GraphError, GraphWarning, build_index
from ray_knowsim.rules.config import PRESETS
from ray_knowsim.rules.record_diff import record_differences
from ray_knowsim.rules.reference_record import replay_record


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay recorded conversations through the deterministic rules")
    p.add_argument("records", nargs="+", type=Path, help="JSON list(s) of recorded conversation records")
    p.add_argument("--iu-cache", required=True, action="append", type=Path, help="IU graph cache (repeatable)")
    p.add_argument("--rules", choices=sorted(PRESETS), default="reference", help="rule preset (default: reference)")
    p.add_argument("--format", choices=("table", "reference-json"), default="table")
    p.add_argument("--graph-mode", choices=("reference", "strict"), default="reference")
    p.add_argument("--check", action="store_true", help="compare with the recorded values; exit 1 on any difference")
    p.add_argument("--out", type=Path, help="write the output here instead of stdout")
    p.set_defaults(func=run)


def _warn_to_stderr(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
    print(f"warning: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    warnings.showwarning = _warn_to_stderr
    try:
        graphs = {}
        for path in args.iu_cache:
            with warnings.catch_warnings():
                warnings.simplefilter("always", GraphWarning)
                graphs.update(load_graph_cache(path, mode=args.graph_mode))
        records = [r for path in args.records for r in load_records(path)]
    except (LoadError, GraphError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    rules = PRESETS[args.rules]()
    outputs, rows, n_diffs = [], [], 0
    for record in records:
        if not record.is_structured:
            print(f"note: {record.problem_id}: baseline record ({record.simulation_method}) has no state; skipped", file=sys.stderr)
            continue
        if record.problem_id not in graphs:
            print(f"error: no IU graph for {record.problem_id!r} in {', '.join(map(str, args.iu_cache))}", file=sys.stderr)
            return 2
        raw = record.model_dump(mode="json")
        index = build_index(graphs[record.problem_id], record.problem_id)
        traj, ours = replay_record(raw, index, rules)
        outputs.append(ours)
        diffs = record_differences(raw, ours) if args.check else []
        n_diffs += len(diffs)
        for d in diffs[:50]:
            print(f"DIFF {record.problem_id} {d[0]}: recorded={d[1]!r} replayed={d[2] if len(d) > 2 else ''!r}", file=sys.stderr)
        summary = traj.summary(rules)
        rows.append((record.problem_id, record.knowledge_level or "", len(traj.updates), summary, len(diffs)))

    if args.format == "reference-json":
        text = json.dumps(outputs, indent=1)
    else:
        text = _table(rows, args.check)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    if args.check:
        print(f"check: {len(outputs)} records, {n_diffs} differences", file=sys.stderr)
        return 1 if n_diffs else 0
    return 0


def _fmt(x) -> str:  # noqa: ANN001
    return "-" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))


def _table(rows, check: bool) -> str:  # noqa: ANN001
    head = ["problem", "level", "turns", "KG", "NKG", "DC", "IC", "CO", "PO", "stop"] + (["diffs"] if check else [])
    lines = [head]
    for pid, level, turns, s, nd in rows:
        stop = f"{s['early_stop_turn']} ({s['early_stop_reason']})" if s["early_stop_turn"] else "-"
        line = [pid, level, str(turns)] + [_fmt(s[k]) for k in ("kg", "nkg", "dc", "ic", "co", "po")] + [stop]
        lines.append(line + ([str(nd)] if check else []))
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in lines)
