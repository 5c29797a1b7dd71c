"""`ray-knowsim env serve`: the training environment as an OpenEnv environment server.

Every client session (an OpenEnv ``EnvClient`` over WebSocket, or the HTTP routes) runs its
episodes on one shared environment built from a benchmark run config: its items, graphs, learner
simulator and extractor models, rules and prompts (default: the packaged demo on the offline
model). Needs the ``training`` extra (``pip install 'ray-knowsim[training]'``).
"""

from __future__ import annotations

import argparse
import socket
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("env", help="KnowSim as a training environment (serve it to RL trainers)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="env_command", required=True)
    s = sub.add_parser("serve", help="serve the environment over OpenEnv's HTTP/WebSocket API", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("config", nargs="?", default=None, help="benchmark run config (YAML); default: the packaged demo")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a run-config key (repeatable)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1; there is no auth)")
    s.add_argument("--port", type=int, default=8020, help="port (default: 8020; 0 picks a free one)")
    s.add_argument("--max-sessions", type=int, default=64, help="concurrent client sessions (default: 64)")
    s.add_argument("--max-turns", type=int, default=None, help="tutor turns per episode at most (default: the config's)")
    s.add_argument("--min-turns", type=int, default=1, help="the early stop never ends an episode sooner (default: 1)")
    s.add_argument("--early-stop", choices=("stop", "virtual"), default="stop")
    s.add_argument("--ray-address", default=None,
                   help="join this Ray cluster first (HTTP limiters and vLLM pools are Ray actors); default: no Ray")
    s.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ray_knowsim.training.adapters.openenv import build_app
    except ImportError as exc:
        print(f"env serve: {exc.name or exc} is not installed; pip install 'ray-knowsim[training]'", file=sys.stderr)
        return 2
    from pydantic import ValidationError

    from ray_knowsim.training.schema import EnvironmentConfig

    if args.max_sessions < 1 or not 0 <= args.port <= 65535:
        print("env serve: --max-sessions must be >= 1 and --port in 0..65535", file=sys.stderr)
        return 2
    try:
        config = EnvironmentConfig(run_config=args.config, overrides=list(args.set), max_turns=args.max_turns,
                                   min_turns=args.min_turns, early_stop=args.early_stop)
    except ValidationError as exc:
        print(f"env serve: {exc}", file=sys.stderr)
        return 2
    if args.ray_address:
        import ray

        ray.init(address=args.ray_address, logging_level="WARNING")
    try:
        app = build_app(config, max_sessions=args.max_sessions)
    except (ValueError, OSError) as exc:  # ConfigError, LoadError: the run config's own message
        print(f"env serve: {exc}", file=sys.stderr)
        return 2
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))  # bound here, so --port 0 can say which port it got
    except OSError as exc:
        print(f"env serve: cannot bind {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        app.state.knowsim.close()
        return 2
    sock.listen(2048)  # connections queue from now on, so a client may connect as soon as the line below is out
    port = sock.getsockname()[1]
    print(f"serving the KnowSim training environment on http://{args.host}:{port} (OpenEnv API; Ctrl-C stops)",
          flush=True)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    finally:
        app.state.knowsim.close()
        sock.close()
    return 0
