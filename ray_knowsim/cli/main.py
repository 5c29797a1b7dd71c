"""`ray-knowsim` entry point: one module per subcommand, each exposing ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMAND_MODULES = (
    "run",
    "validate_config",
    "replay",
    "sweep",
    "validate",
    "report",
    "extract_graphs",
    "serve_offline",
    "compare",
    "agreement",
    "score",
    "view",
    "env",
    "adaptive_replay",
)


def package_version() -> str:
    """The installed distribution's version (the one pyproject.toml gave the wheel)."""
    from importlib import metadata

    try:
        return metadata.version("ray-knowsim")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ray-knowsim",
        description="Evaluate how well LLM assistants calibrate information to a simulated learner.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(f"ray_knowsim.cli.{name}").register(sub)  # a broken subcommand is an error
    return parser


def plain_warnings() -> None:
    """Print the package's own warnings (a role budget, a graph or load problem) as plain
    ``warning: ...`` lines on stderr, without Python's source path and class name; other
    libraries' warnings keep Python's format."""
    import warnings

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        if getattr(category, "__module__", "").startswith("ray_knowsim"):
            print(f"warning: {message}", file=file or sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def main(argv: list[str] | None = None) -> int:
    plain_warnings()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
