"""A line per finished test file when the suite runs in several processes (pytest-xdist).

pytest prints a line per file on its own, but with ``-n`` the lines give way to a row of dots with
no file names: a person watching a 4-minute suite, or reading a CI log that stopped, cannot tell
where it is. This prints, in the controlling process, ``tests/x/test_y.py  12 passed  3.4 s
[31/190 files]`` once every test of a file has reported, and turns the dots off (the failures'
tracebacks, the summary and ``--durations`` are pytest's own, unchanged).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

import pytest

#: how a test's reports count: an error in setup or teardown is an error, else the call's outcome
_ORDER = ("failed", "error", "passed", "skipped", "xfailed", "xpassed")


class FileProgress:
    """Counts each file's tests down as their reports arrive from the workers."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.left: dict[str, int] = {}
        self.outcomes: dict[str, Counter[str]] = defaultdict(Counter)
        self.started: dict[str, float] = {}
        self.files_total = 0
        self.files_done = 0

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: Any, config: pytest.Config):
        category, _letter, word = yield
        return category, "", word  # no dots: the file's line says it

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.left:  # every worker collects the same tests
            return
        self.left = Counter(nodeid.split("::")[0] for nodeid in ids)
        self.files_total = len(self.left)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::")[0]
        self.started.setdefault(path, time.monotonic())
        outcome = self._outcome(report)
        if outcome:
            self.outcomes[path][outcome] += 1
        if report.when == "teardown" and path in self.left:
            self.left[path] -= 1
            if self.left[path] == 0:
                self._file_done(path)

    @staticmethod
    def _outcome(report: pytest.TestReport) -> str:
        if report.when != "call":
            return "error" if report.failed else ("skipped" if report.skipped and report.when == "setup" else "")
        if hasattr(report, "wasxfail"):
            return "xfailed" if report.skipped else "xpassed"
        return report.outcome

    def _file_done(self, path: str) -> None:
        self.files_done += 1
        counts = self.outcomes.pop(path, Counter())
        said = ", ".join(f"{counts[k]} {k}" for k in _ORDER if counts[k]) or "no outcome"
        took = time.monotonic() - self.started.pop(path, time.monotonic())
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"{path}  {said}  {took:.1f} s  [{self.files_done}/{self.files_total} files]")


def register_if_distributed(config: pytest.Config) -> None:
    """Only in xdist's controlling process, and only at the default verbosity (``-v`` names each
    test already)."""
    distributed = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if distributed and config.option.verbose <= 0 and config.option.dist != "no":
        config.pluginmanager.register(FileProgress(config), "ray-knowsim-file-progress")
