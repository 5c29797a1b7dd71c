"""`ray-knowsim adaptive-replay RUN_DIR [--spec FILE] [--set KEY=VALUE ...] [--json [FILE]]`: what an
adaptive run would have decided over a completed run, with how many sessions -- without running any.

The rounds are the adaptive runner's own (the run's seed orders the items), each round's
sessions read from RUN_DIR instead of being run (ray_knowsim.adaptive.replay). The spec is the
`adaptive:` section (default: the one locked in RUN_DIR/decisions.json, else the run config's,
else the defaults); `--spec` reads one from a YAML
file (a whole config or just the section), `--set` changes a field (e.g. --set alpha=0.1
--set round.items=10 --set design.kind=anytime). Prints a summary: the decisions, the sessions used
against the fixed design's, and what the fixed design of the same pool decides; --json prints
everything decisions.json would hold instead, --json FILE writes it to FILE. Nothing in RUN_DIR
changes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ray_knowsim.cli.output import add_json_option


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("adaptive-replay", help="replay the adaptive decision procedure over a completed run",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--spec", default=None, help="YAML file with the adaptive: section (or a config holding one)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="change a field of the spec (YAML value), e.g. --set alpha=0.1 --set round.items=10")
    add_json_option(p, "everything decisions.json would hold")
    p.set_defaults(func=main)


def load_rows(run_dir: str | Path, metrics: list[str]):
    """One row per session of the run (every status): identity, status and the metric columns."""
    import pandas as pd

    from ray_knowsim.adaptive.observe import ROW_KEYS
    from ray_knowsim.compare.runs import load_runs
    from ray_knowsim.io.rundir import open_run

    run = load_runs([run_dir], metrics)[0]
    keep = [*ROW_KEYS, "status", *[m for m in metrics if m in run.sessions.columns]]
    ok = run.sessions[keep]
    every = open_run(run_dir).sessions.read([*ROW_KEYS, "status"]).to_pandas()
    return pd.concat([ok, every[every["status"] != "ok"]], ignore_index=True), run


def main(args: argparse.Namespace) -> int:
    import yaml

    from ray_knowsim.adaptive.planning import replay
    from ray_knowsim.adaptive.summary import replay_lines
    from ray_knowsim.cli.output import emit, json_target_error
    from ray_knowsim.config.loading import ConfigError, apply_overrides
    from ray_knowsim.io.decisions import read_decisions
    from ray_knowsim.io.rundir import RunDirError, open_run

    if (why := json_target_error(args)) is not None:
        print(f"ray-knowsim adaptive-replay: {why}", file=sys.stderr)
        return 2
    try:
        manifest = open_run(args.run_dir).manifest or {}
        config = manifest.get("config") or {}
        locked = read_decisions(args.run_dir)  # an adaptive run's own spec, as locked at its round 1
        spec = dict(locked.spec) if locked is not None else dict(config.get("adaptive") or {})
        if args.spec:
            loaded = yaml.safe_load(Path(args.spec).read_text(encoding="utf-8")) or {}
            spec = dict(loaded.get("adaptive", loaded)) if isinstance(loaded, dict) else {}
        spec.pop("budget", None)  # a replay spends nothing
        spec = apply_overrides(spec, list(args.overrides))
        metrics = list(spec.get("metrics") or ["kg", "dc", "co"])
        rows, _ = load_rows(args.run_dir, metrics)
        out = replay(rows, spec, seed=int(config.get("seed", 0)), levels=config.get("levels"))
    except (RunDirError, ConfigError, ValueError, OSError) as exc:
        print(f"ray-knowsim adaptive-replay: {exc}", file=sys.stderr)
        return 2
    emit(args, out, lambda record_file: replay_lines(out, record_file))
    return 0
