"""`ray-knowsim view [DIR ...] [--port P]`: browse runs, conversations, sweeps and leaderboards in a
local web app. Serves only what lies under the folders named (default: ./runs, else .)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "view",
        help="browse runs, conversations, sweeps and leaderboards in a local web app",
        description="A local web app over run folders: every run with its status (complete, interrupted, with failures), "
        "n of N planned sessions, models, cost and time; every conversation (filtered, sorted and paged on the server) "
        "in the report's viewer; the run's tables and failures; sweeps and compare leaderboards. Serves only what lies "
        "under the folders named.",
    )
    p.add_argument("dirs", nargs="*", metavar="DIR", help="folders to serve (default: ./runs when it exists, else the current folder)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--depth", type=int, default=4, help="how many folder levels below each DIR to search for outputs (default 4)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    dirs = list(args.dirs) or (["runs"] if Path("runs").is_dir() else ["."])
    missing = [d for d in dirs if not Path(d).is_dir()]
    if missing:
        print(f"view: not a folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"view: --port {args.port} is not a port number", file=sys.stderr)
        return 2
    from ray_knowsim.view.data import Files
    from ray_knowsim.view.routes import ViewState
    from ray_knowsim.view.server import is_loopback, serve

    if not is_loopback(args.host):
        print(f"view: WARNING: listening on {args.host}: anyone who can reach this address can read these folders "
              "(run text included); there is no login", file=sys.stderr)

    state = ViewState(Files(dirs), max_depth=max(0, args.depth))

    def ready(url: str) -> None:
        print(f"view: serving {', '.join(str(r) for r in state.files.roots)}", file=sys.stderr)
        print(url, flush=True)
        print("view: press Ctrl-C to stop", file=sys.stderr)

    try:
        serve(state, args.host, args.port, ready)
    except OSError as exc:
        print(f"view: cannot listen on {args.host}:{args.port}: {exc.strerror or exc} (try --port 0 for a free port)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("view: stopped", file=sys.stderr)
    return 0

