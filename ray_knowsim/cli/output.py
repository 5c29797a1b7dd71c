"""What `score`, `sweep`, `adaptive-replay` and `agreement` print: a short human summary by
default, their machine-readable record with ``--json`` (issue 51).

One meaning of ``--json`` for every command, so a script learns it once: ``--json`` alone prints
the record as JSON on stdout *instead of* the summary (stdout then parses as one JSON document;
progress goes to stderr); ``--json FILE`` writes the record to FILE and prints the summary, which
names FILE (adaptive-replay's ``--json OUT`` has always meant that). The summaries themselves are
pure functions beside the numbers they show (their lines: :mod:`ray_knowsim.text`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

STDOUT = "-"


def add_json_option(parser: argparse.ArgumentParser, record: str) -> None:
    """``--json [FILE]`` with the same help on every command; ``record`` says what it holds."""
    parser.add_argument(
        "--json", nargs="?", const=STDOUT, default=None, metavar="FILE",
        help=f"the machine-readable record ({record}) as JSON: alone, on stdout instead of the summary; "
             "with FILE, written to FILE and the summary printed (put --json after the positional arguments)",
    )


def json_on_stdout(args: argparse.Namespace) -> bool:
    """True when stdout is the JSON record (``--json`` without FILE): the rest goes to stderr."""
    return getattr(args, "json", None) == STDOUT


def json_target_error(args: argparse.Namespace) -> str | None:
    """Why ``--json FILE`` cannot be written (a folder: most likely a positional argument the
    optional FILE swallowed), checked before any work; None when it can."""
    target = getattr(args, "json", None)
    if target in (None, STDOUT) or not Path(target).is_dir():
        return None
    return f"--json {target}: is a folder, not a file (to print the JSON on stdout, put --json last)"


def progress_printer(args: argparse.Namespace) -> Callable[[str], None]:
    """Where progress lines go: stdout, except when stdout is the JSON record."""
    if json_on_stdout(args):
        return lambda line: print(line, file=sys.stderr, flush=True)
    return print


def emit(args: argparse.Namespace, record: dict[str, Any], summary: Callable[[str | None], Sequence[str]]) -> None:
    """Print the record (``--json``), or write it to FILE and print the summary, or print the
    summary alone. ``summary(record_file)`` makes the lines; ``record_file`` is FILE or None."""
    target = getattr(args, "json", None)
    if target == STDOUT:
        print(dumps(record))
        return
    if target:
        Path(target).write_text(dumps(record), encoding="utf-8")
    for line in summary(target):
        print(line)


def dumps(record: dict[str, Any]) -> str:
    """The record as JSON: numbers as written, NaN as null (JSON has no NaN)."""
    return json.dumps(_clean(record), indent=1, default=str)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        try:
            return _clean(value.item())
        except (TypeError, ValueError):
            return value
    return value


__all__ = ["STDOUT", "add_json_option", "dumps", "emit", "json_on_stdout", "json_target_error", "progress_printer"]
