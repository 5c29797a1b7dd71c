"""`ray-knowsim serve-offline`: the deterministic offline model behind an OpenAI-compatible API.

Lets every HTTP path (backend, retries, rate limits, engine batching) run without a provider; with
``--delay-s`` it is the fixed-latency endpoint the engine benchmark measures against; with
``--delay-per-token-s`` a stand-in of known generation speed (0.05: 20 tokens/s, what SmolLM2-135M
decodes per request on 2 CPU cores), for the pre-flight timeout check.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve-offline",
        help="serve the offline model over an OpenAI-compatible HTTP API",
        description=__doc__,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1; there is no auth)")
    p.add_argument("--port", type=int, default=8011, help="port (default: 8011)")
    p.add_argument("--delay-s", type=float, default=0.0, help="fixed delay before each answer (default: 0)")
    p.add_argument("--delay-per-token-s", type=float, default=0.0,
                   help="extra delay per completion token of each answer, a slow model's speed (default: 0)")
    p.add_argument("--model-name", default=None, help="model id clients must ask for (default: the model's name)")
    p.add_argument("--seed", type=int, default=None, help="offline model seed (default: the model's own)")
    p.add_argument(
        "--graph-file", action="append", default=[], metavar="JSON",
        help="extra IU graphs for the offline assistant (repeatable)",
    )
    p.set_defaults(func=run)


def load_offline_model(**options: Any):
    """The offline ChatModel, imported only when serving (the rest of the CLI does not need it).
    It is part of the package: an import error here is a broken install and propagates as one."""
    from ray_knowsim.llm.offline import OfflineModel

    return OfflineModel(**options)


def run(args: argparse.Namespace) -> int:
    if args.delay_s < 0 or args.delay_per_token_s < 0:
        print("serve-offline: --delay-s and --delay-per-token-s must be >= 0", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print("serve-offline: --port must be in 0..65535", file=sys.stderr)
        return 2
    options: dict[str, Any] = {}
    if args.seed is not None:
        options["seed"] = args.seed
    if args.graph_file:
        options["graph_files"] = list(args.graph_file)
    try:
        model = load_offline_model(**options)
    except (OSError, ValueError) as exc:  # an unreadable or invalid --graph-file
        print(f"serve-offline: {exc}", file=sys.stderr)
        return 2
    from ray_knowsim.llm.offline.server import run_server

    run_server(model, host=args.host, port=args.port, served_name=args.model_name, delay_s=args.delay_s,
               delay_per_token_s=args.delay_per_token_s)
    return 0
