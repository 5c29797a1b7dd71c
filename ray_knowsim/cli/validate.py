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
            "--inspect only loads the human data and says what was read (no --sim needed). "
            "--extractor-agreement compares the extractor with people's per-IU labels (sheet 'iu labels'): the run's "
            "extractor (or --extractor) labels each labelled tutor reply, and Cohen's kappa and TPR/TNR per label are "
            "reported; resumable (its answers are kept in the output folder) and costed."
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
    p.add_argument("--extractor-agreement", action="store_true",
                   help="only compare the extractor with the human per-IU labels (needs --sim RUN_DIR or --config FILE)")
    p.add_argument("--config", type=Path, default=None,
                   help="with --extractor-agreement: the run config whose items, graphs and extractor to use (default: --sim's recorded config)")
    p.add_argument("--extractor", default=None,
                   help="with --extractor-agreement: a model key of the config, or a YAML file with one model entry (default: roles.extractor)")
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


def extractor_agreement(args: argparse.Namespace) -> int:
    """The extractor against people's per-IU labels: load, ask (resumed), compare, write."""
    from ray_knowsim.config import ConfigError
    from ray_knowsim.score.run_stage import ScoreError
    from ray_knowsim.validate.conditions import LevelCuts
    from ray_knowsim.validate.knowchat import KnowChatFormatError, load_knowchat
    from ray_knowsim.validate.layout import LayoutError, load_layout
    from ray_knowsim.validate.tables import format_extractor_agreement, write_tables

    if args.sim is None and args.config is None:
        print("validate: --extractor-agreement needs --sim RUN_DIR or --config FILE (the items, graphs and extractor)", file=sys.stderr)
        return 2
    out = args.out or (args.sim / "validation" if args.sim else None)
    if out is None:
        print("validate: --extractor-agreement with --config needs --out DIR", file=sys.stderr)
        return 2
    try:
        human = load_knowchat(args.human, LevelCuts.parse(args.level_cuts), load_layout(args.layout))
        result, params = _ask_extractor(human, args, out)
    except (KnowChatFormatError, LayoutError, ConfigError, ScoreError, ValueError, OSError) as exc:
        print(f"validate: {exc}", file=sys.stderr)
        return 2
    tables = {"extractor_human_agreement": result.agreement, "extractor_human_labels": result.labels}
    write_tables(tables, out, params, result.notes)
    for note in result.notes:
        print(f"# {note}")
    print(format_extractor_agreement(result))
    print(f"tables written to {out}")
    return 0


def _ask_extractor(human, args: argparse.Namespace, out: Path):  # noqa: ANN001
    """Build the extractor from the config and ask it (Ray only for a backend that starts actors)."""
    import random

    from ray_knowsim.config import load_run_config
    from ray_knowsim.run.extractor import extractor_model, recorded_config
    from ray_knowsim.plan.sessions import derive_seed, load_inputs
    from ray_knowsim.score.run_stage import ScoreError, _entry_json, resolve_judge
    from ray_knowsim.rules.init_state import initial_state_for
    from ray_knowsim.schema.graph import build_index
    from ray_knowsim.schema.items import item_key
    from ray_knowsim.validate.extractor_labels import label_replies, model_identity

    if args.config is not None:
        cfg = load_run_config(args.config)
    else:
        try:
            cfg = recorded_config(args.sim)
        except ValueError as exc:
            raise ScoreError(f"{exc}; give --config FILE") from None
    key = args.extractor or cfg.roles.extractor.model
    if not key:
        raise ScoreError("the config names no extractor (roles.extractor); give --extractor MODEL_KEY_OR_FILE")
    cfg, key = resolve_judge(cfg, key, flag="--extractor")
    inputs = load_inputs(cfg)
    items = {item_key(task, it.id): it for task, its in inputs.items.items() for it in its}
    entry = cfg.models[key]
    rules = cfg.rule_config

    def initial(item, graph, level):  # noqa: ANN001, ANN202 - the state trial 0 of the run would start from
        rng = random.Random(derive_seed(cfg.seed, f"init/{item.task}/{item.id}/{level}/0"))
        return initial_state_for(item, level, build_index(graph, item.id), rules, rng, inputs.init_caches.get(item.task))

    levels = {(s.arm, s.task, s.prolific_id, str(s.session)): s.level for s in human.sessions}
    with extractor_model(cfg, key, inputs.graphs, unit="validate-extractor", address=getattr(args, "address", None)) as model:
        result = label_replies(human, items=items, graphs=inputs.graphs, initial_state=initial, levels=levels, model=model,
                               model_key=key, model_identity=model_identity(entry.backend, _entry_json(entry)),
                               settings=cfg.roles.settings("extractor"), out_dir=out, price=getattr(entry, "price", None),
                               prompts=cfg.prompts.version)
    params = dict(human=str(args.human), config=str(args.config or args.sim), extractor=key, backend=entry.backend,
                  asked=result.asked, layout=args.layout and str(args.layout))
    return result, params


def run(args: argparse.Namespace) -> int:
    if args.inspect:
        return inspect(args)
    if args.extractor_agreement:
        return extractor_agreement(args)
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
