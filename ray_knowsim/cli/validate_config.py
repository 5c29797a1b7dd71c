"""`ray-knowsim validate-config CONFIG`: check a run config without running anything.

Prints the validated config (every default filled in, each role's settings resolved over its
defaults, input paths resolved, the config hash and the planned number of sessions and shards) or every error with its key path; exit code 0 or 2.
``--no-data`` skips reading the item, graph and init-cache files (schema and rules only).
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("validate-config", help="check a run config and print it with defaults filled in",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="run config (YAML)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a config value, as for `run`")
    p.add_argument("--no-data", action="store_true", help="do not read the input files")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import yaml

    from ray_knowsim.config import ConfigError, load_run_config

    try:
        cfg = load_run_config(args.config, check_files=not args.no_data, overrides=args.overrides)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    doc = cfg.public_dict()
    from dataclasses import asdict

    info: dict = {"rules_resolved": cfg.rule_config.model_dump(mode="json"),
                  "roles_resolved": {role: asdict(s) for role, s in cfg.role_settings().items()},
                  "inputs": {k: str(cfg.resolve(v)) for k, v in cfg.input_paths().items()},
                  "output_dir": str(cfg.output_path()),
                  "conditions": cfg.condition_names()}
    if not args.no_data:
        from ray_knowsim.plan.sessions import Plan, load_inputs

        try:
            plan = Plan(cfg, load_inputs(cfg))
        except ValueError as exc:
            print(f"{args.config}: invalid inputs:\n  {exc}", file=sys.stderr)
            return 2
        info["config_hash"] = cfg.config_hash()
        info["plan"] = plan.summary()
    print(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), end="")
    print("# --- resolved ---")
    print(yaml.safe_dump(info, sort_keys=False, allow_unicode=True), end="")
    print(f"# {args.config}: OK", file=sys.stderr)
    return 0
