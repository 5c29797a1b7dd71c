"""`ray-knowsim env serve`: the training environment as an OpenEnv environment server.

Every client session (an OpenEnv ``EnvClient`` over WebSocket, or the HTTP routes) runs its
episodes on one shared environment built from a benchmark run config: its items, graphs, learner
simulator and extractor models, rules and prompts (default: the packaged demo on the offline
model). Needs the ``training`` extra (``pip install 'ray-knowsim[training]'``).

With ``--replicas N`` (N > 1) the server scales out on Ray Serve: N replicas, each with its own
environment, behind one address; a client session (one WebSocket) stays on its replica, so each
episode is stepped where it was reset. It joins ``--ray-address`` or starts a local Ray.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import time


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
                   help="join this Ray cluster first (HTTP limiters and vLLM pools are Ray actors); default: no Ray "
                        "(a local one with --replicas > 1)")
    s.add_argument("--replicas", type=int, default=1,
                   help="server processes behind the one address, on Ray Serve (default: 1, no Serve)")
    s.add_argument("--max-replicas-per-node", type=int, default=None, metavar="N",
                   help="with --replicas: at most N replicas on one node (1 spreads them over the nodes; default: no limit)")
    s.add_argument("--proxy-location", choices=("EveryNode", "HeadOnly"), default="EveryNode",
                   help="with --replicas: Serve's HTTP proxy on every node that holds a replica (Serve's default) or only "
                        "on the head (one address; needed when the nodes share a host, as on one machine)")
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

    if args.max_sessions < 1 or args.replicas < 1 or not 0 <= args.port <= 65535 or (args.max_replicas_per_node or 1) < 1:
        print("env serve: --max-sessions, --replicas and --max-replicas-per-node must be >= 1 and --port in 0..65535",
              file=sys.stderr)
        return 2
    try:
        config = EnvironmentConfig(run_config=args.config, overrides=list(args.set), max_turns=args.max_turns,
                                   min_turns=args.min_turns, early_stop=args.early_stop)
    except ValidationError as exc:
        print(f"env serve: {exc}", file=sys.stderr)
        return 2
    if args.replicas > 1:
        return serve_replicas(args, config)
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


def serve_replicas(args: argparse.Namespace, config) -> int:
    """``--replicas N``: the OpenEnv app on N Ray Serve replicas behind Serve's proxy."""
    try:
        from ray import serve

        from ray_knowsim.training.adapters.serve import APP_NAME
    except ImportError as exc:
        print(f"env serve: {exc.name or exc} is not installed; pip install 'ray-knowsim[training]'", file=sys.stderr)
        return 2
    import ray

    from ray_knowsim.training.build import load_config

    try:
        load_config(config)  # a bad run config is refused here, not in N replicas' logs
    except (ValueError, OSError) as exc:
        print(f"env serve: {exc}", file=sys.stderr)
        return 2
    port = args.port
    if port == 0:  # Serve's proxy binds the port itself: take a free one first
        with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as probe:
            probe.bind((args.host, 0))
            port = probe.getsockname()[1]
    # "local": a Ray of its own unless told to join one (never whichever cluster this machine runs)
    ray.init(address=args.ray_address or "local", include_dashboard=False, logging_level="WARNING")
    signal.signal(signal.SIGTERM, _interrupt)  # a terminated server still tears Serve and its local Ray down
    pools: dict = {}
    try:
        from ray_knowsim.training.build import shared_engine_pools

        pools = shared_engine_pools(config)  # vLLM engines once, for every replica
        serve.start(http_options={"host": args.host, "port": port}, proxy_location=args.proxy_location)
        serve.run(replicas_app(config, replicas=args.replicas, max_sessions=args.max_sessions,
                               max_replicas_per_node=args.max_replicas_per_node, pools=pools), name=APP_NAME,
                  route_prefix="/")
        print(f"serving the KnowSim training environment on http://{args.host}:{port} (OpenEnv API, {args.replicas} "
              "Ray Serve replicas; Ctrl-C stops)", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        try:
            serve.delete(APP_NAME)
            if not args.ray_address:  # Serve on a joined cluster may hold other applications
                serve.shutdown()
        finally:
            try:
                from ray_knowsim.backends.model_set import shutdown_pools

                shutdown_pools(pools)
            finally:
                ray.shutdown()
    return 0


def replicas_app(config, *, replicas: int = 2, max_sessions: int = 64, max_replicas_per_node: int | None = None,
                 pools: dict | None = None):
    """The bound Serve application of :class:`KnowSimReplica` (each replica builds its own
    environment and OpenEnv app; only the config is shipped): ``serve.run(replicas_app(config,
    replicas=4), name=APP_NAME, route_prefix="/")``. At most ``max_sessions`` sessions per replica
    and, when given, ``max_replicas_per_node`` replicas per node (Serve's own placement limit).
    ``pools``: running vLLM engine pools every replica uses (``shared_engine_pools``)."""
    from ray import serve

    from ray_knowsim.training.adapters.serve import KnowSimReplica

    if replicas < 1 or max_sessions < 1:
        raise ValueError("replicas and max_sessions must be >= 1")
    ingress = serve.ingress()(KnowSimReplica)
    options = {"max_replicas_per_node": max_replicas_per_node} if max_replicas_per_node else {}
    server = serve.deployment(name="KnowSimEnvironment", num_replicas=replicas, max_ongoing_requests=max_sessions,
                              **options)(ingress)
    return server.bind(config.model_dump_json(), max_sessions, pools or None)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
