"""The terminal result of a finished run, read from its run directory (the I/O around
:mod:`ray_knowsim.report.terminal`, which only formats).

It reads what the report reads, with the report's functions, so the two never disagree: the
manifest's caveat (:func:`ray_knowsim.report.banner.manifest_banner`) and the verdicts
(:func:`ray_knowsim.report.decisions.run_verdicts`, worded by
:func:`ray_knowsim.report.verdicts.verdict_texts`) and the cost per decision
(:func:`ray_knowsim.report.per_decision.run_per_decision` over the report's cost table).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ray_knowsim.io.rundir import RunDirError, RunReader
from ray_knowsim.report.banner import manifest_banner
from ray_knowsim.report.metrics import metric_specs
from ray_knowsim.report.per_decision import run_per_decision
from ray_knowsim.report.terminal import WIDTH, caveat_block, next_line, terminal_result
from ray_knowsim.report.verdicts import verdict_texts
from ray_knowsim.schema.states import level_order
from ray_knowsim.tables.cost import run_cost_table
from ray_knowsim.tables.outcome_tables import audit_text

log = logging.getLogger(__name__)


def result_lines(run_dir: str | Path, tables: dict[str, Any], width: int = WIDTH) -> list[str]:
    """The result's body for the run at ``run_dir`` whose tables are ``tables`` (the run's
    ``write_run_tables``): means per task, condition and level, the verdicts, the caveat."""
    from ray_knowsim.report.decisions import run_verdicts

    try:
        reader: RunReader | None = RunReader.open(run_dir)
    except (RunDirError, OSError):
        reader = None
    manifest = reader.manifest if reader is not None else None
    verdicts = run_verdicts(run_dir, reader=reader) if reader is not None else None
    per = run_per_decision(verdicts, _cost_row(reader)) if verdicts is not None else None
    lm = tables.get("level_means")
    levels = level_order(lm["knowledge_level"].astype(str)) if lm is not None and not lm.empty else []
    specs = metric_specs(present=set(lm.columns) if lm is not None else ())
    return terminal_result(tables, specs, levels, verdict_texts(verdicts) if verdicts is not None else None,
                           manifest_banner(manifest) if manifest else None, audit_text(tables), width,
                           per.line if per is not None else None)


def _cost_row(reader: RunReader | None) -> dict[str, Any] | None:
    """The run's (all, all) row of THE cost table (the report's, :func:`ray_knowsim.tables.cost.run_cost_table`,
    the judge's spend and the spend journals included); None when it cannot be read."""
    from ray_knowsim.score.spend import spend_of_run
    from ray_knowsim.score.store import RunScores

    if reader is None or not reader.sessions.files:
        return None
    try:
        scores = RunScores.load(reader.root, reader)
        return run_cost_table(reader, scores.attach if scores.sets else None, spend_of_run(reader)).iloc[-1].to_dict()
    except (RunDirError, OSError, ValueError) as exc:  # the terminal shows the rest; the report says why
        log.warning("cost per decision of %s not computed (%s: %s)", reader.root, type(exc).__name__, exc)
        return None


def shown_dir(run_dir: str | Path) -> str:
    """The run directory as the next commands name it: relative to the working directory when
    it lies below it (``runs/demo``), else absolute."""
    path = Path(run_dir).resolve()
    try:
        return str(path.relative_to(Path(os.getcwd()).resolve())) or "."
    except ValueError:
        return str(path)


def caveat_lines(run_dir: str | Path, width: int = WIDTH) -> list[str]:
    """The test double's caveat of the run at ``run_dir``, as the result body words it, for an
    output that prints no result body (an adaptive run's decisions); none for a real-model run."""
    try:
        banner = manifest_banner(RunReader.open(run_dir).manifest or {})
    except (RunDirError, OSError):
        return []
    return caveat_block(banner, width)


def closing_lines(run_dir: str | Path, width: int = WIDTH) -> list[str]:
    """The ``next:`` line(s) naming ``ray-knowsim view`` and ``ray-knowsim report`` of this run."""
    return next_line(shown_dir(run_dir), width)


__all__ = ["caveat_lines", "closing_lines", "result_lines", "shown_dir"]
