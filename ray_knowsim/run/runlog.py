"""The run's log file, ``RUN_DIR/run.log``: diagnostics that change nothing the user must do.

Why: a terminal that shows "progress board not reachable (GetTimeoutError ...)" or Ray's
"Failed to kill actor ... Socket closed" at shutdown makes a newcomer think the run broke, and
the line asks nothing of them. Such lines are kept (a maintainer may need them) in the run's own
log, not on the terminal. What the user must act on (a shard that did not finish, a stop, a
preflight warning) stays on the terminal.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

RUN_LOG = "run.log"
#: the driver's diagnostics: a logger that writes to the run log while a run holds it (run_log)
DIAGNOSTICS = logging.getLogger("ray_knowsim.run.diagnostics")
DIAGNOSTICS.propagate = False
#: lines Ray forwards to the driver that only say the cluster is going away or the display lags
NOISE = (
    re.compile(r"Failed to kill actor .*Socket closed"),  # the GCS, at shutdown: the worker is gone already
    re.compile(r"progress report of \S+ not sent .*the display may lag"),  # a worker's (run/progress.py)
)


def is_noise(line: str) -> bool:
    """Whether a line Ray forwarded belongs in the run log rather than on the terminal."""
    return any(p.search(line) for p in NOISE)


class _RunLogHandler(logging.Handler):
    """Appends to ``root/run.log``; before the run directory exists (a run the checks refused
    writes nothing) the line goes to stderr instead, so it is never lost."""

    def __init__(self, root: Path) -> None:
        super().__init__(logging.INFO)
        self.path = Path(root) / RUN_LOG

    def emit(self, record: logging.LogRecord) -> None:
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {record.levelname.lower()}: {record.getMessage()}\n"
        try:
            if not self.path.parent.is_dir():
                sys.stderr.write(line)
                return
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line)
        except OSError:
            self.handleError(record)


@contextmanager
def run_log(root: str | Path) -> Iterator[Path]:
    """For the ``with``: :data:`DIAGNOSTICS` writes to ``root/run.log`` (yielded)."""
    handler = _RunLogHandler(Path(root))
    DIAGNOSTICS.addHandler(handler)
    DIAGNOSTICS.setLevel(logging.INFO)
    try:
        yield handler.path
    finally:
        DIAGNOSTICS.removeHandler(handler)


def to_run_log(line: str) -> None:
    """A forwarded line for the run log (:func:`ray_knowsim.cluster.ray_session.divert_forwarded_lines`)."""
    DIAGNOSTICS.info("%s", line)


__all__ = ["DIAGNOSTICS", "NOISE", "RUN_LOG", "is_noise", "run_log", "to_run_log"]
