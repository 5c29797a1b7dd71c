"""What ``ray-knowsim run`` prints at the end of a run, in at most :data:`WIDTH` columns (pure).

Why a module of its own: the terminal is a newcomer's first look at a run (``scripts/demo.sh``), and
a 230-column table wraps into noise on an ordinary terminal. So the terminal says only what a
reader needs to decide what to open next -- per task, condition and level the report's metrics
(:func:`ray_knowsim.report.metrics.metric_specs`, its one column order) with their intervals, the
verdicts in the report's words (:func:`ray_knowsim.report.verdicts.verdict_texts`), the report's
and the viewer's offline-double caveat (:func:`ray_knowsim.report.banner.manifest_banner`) -- and
one line sends the reader to the report for everything else. No I/O here: the caller reads the run
(:mod:`ray_knowsim.report.run_result`) and prints the lines.
"""

from __future__ import annotations

import math
import shlex
import textwrap
from typing import Any, Sequence

import pandas as pd

from ray_knowsim.report.banner import BANNER_HEADING
from ray_knowsim.report.metrics import MetricSpec
from ray_knowsim.report.per_decision import LABEL as PER_DECISION

#: the most columns any line of the terminal result takes (a run directory longer than this aside)
WIDTH = 100
#: the verdicts printed before "and N more in the report"
MAX_VERDICTS = 8
ALL_LEVELS_ROW = "all levels"
#: what the terminal leaves out, said once
MORE_LINE = "more in the report: other metrics, the paper's mean rank, failures, truncations, audit flags, cost"


def wrap(text: str, width: int = WIDTH, indent: str = "  ", first: str = "") -> list[str]:
    """``text`` folded at spaces into lines of at most ``width`` columns (words are never cut,
    so a path or a name longer than the width stays whole)."""
    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [first.rstrip()]


def pack(head: str, parts: Sequence[str], width: int = WIDTH, sep: str = ", ", indent: str = "  ") -> list[str]:
    """``head`` then ``parts`` joined by ``sep``, a new line (indented) where the next part would
    pass ``width``: a part is never split, so "assistant 28 calls" stays greppable."""
    lines, line = [], head
    for k, part in enumerate(parts):
        piece = part + (sep.rstrip() if k < len(parts) - 1 else "")
        joined = f"{line}{piece}" if line in (head, indent) else f"{line} {piece}"
        if len(joined) > width and line not in (head, indent):
            lines.append(line)
            line = indent + piece
        else:
            line = joined
    return lines + [line]


def _cell(row: Any, column: str, decimals: int) -> str:
    """``mean ±h``: h the half-width of the item-clustered 95 % CI; the mean alone without an
    interval (fewer than 2 items); "–" without a value."""
    value = row.get(column) if hasattr(row, "get") else None
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    low, high = row.get(f"{column}_ci_low"), row.get(f"{column}_ci_high")
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"{value:.{decimals}f}"
    return f"{value:.{decimals}f} ±{(high - low) / 2:.{decimals}f}"


def legend(specs: Sequence[MetricSpec], width: int = WIDTH) -> list[str]:
    """The abbreviations, said once: each metric's name (its catalogue description up to the
    colon), the direction where lower is better, and what a cell holds."""
    names = [f"{s.label} {s.description.split(':')[0].split(',')[0]}" + (" (lower is better)" if s.lower_is_better else "")
             for s in specs]
    return wrap(", ".join(names) + ". Each cell: mean ±half-width of its 95 % CI, items as the unit; "
                f"n: ok sessions; {ALL_LEVELS_ROW}: the unweighted mean of the level means.", width, indent="")


def _task_rows(level_means: pd.DataFrame, marginal: pd.DataFrame, task: str, levels: Sequence[str]) -> list[tuple[str, list]]:
    """(condition, [(row label, row)]) in the run's condition order: its levels, then all levels."""
    lm = level_means[level_means["task"] == task]
    mg = marginal[marginal["task"] == task].set_index("condition") if marginal is not None and not marginal.empty else None
    out = []
    for cond in dict.fromkeys(lm["condition"]):
        here = lm[lm["condition"] == cond].set_index("knowledge_level")
        rows = [(lv, here.loc[lv]) for lv in levels if lv in here.index]
        if mg is not None and cond in mg.index:
            rows.append((ALL_LEVELS_ROW, mg.loc[cond]))
        out.append((str(cond), rows))
    return out


def metric_block(tables: dict[str, Any], specs: Sequence[MetricSpec], task: str, levels: Sequence[str],
                 width: int = WIDTH) -> list[str]:
    """One task's means: a line per condition, its levels and its level-marginal row beneath it,
    a column per metric that fits ``width`` (the others are named as left to the report)."""
    lm, mg = tables["level_means"], tables.get("marginal")
    groups = _task_rows(lm, mg, task, levels)
    label_w = max([len(ALL_LEVELS_ROW), *(len(lv) for _, rows in groups for lv, _ in rows)]) + 2
    cols, used = [], label_w + 5  # the n column
    for s in specs:
        cells = [_cell(r, s.column, s.decimals) for _, rows in groups for _, r in rows]
        w = max(len(s.label), *(len(c) for c in cells)) if cells else len(s.label)
        if used + w + 2 > width:
            break
        cols.append((s, w))
        used += w + 2
    items = max((int(v) for s, _ in cols for v in lm.loc[lm["task"] == task, f"{s.column}_items"].dropna()
                 if f"{s.column}_items" in lm.columns), default=0)
    left = [s.label for s in specs if s not in {c for c, _ in cols}]
    head = f"{task}: {items} item{'s' if items != 1 else ''}" + (f" ({', '.join(left)} in the report)" if left else "")
    lines = [*wrap(head, width, indent=""), "condition / level".ljust(label_w) + "".join(f"  {s.label:>{w}}" for s, w in cols) + f"{'n':>5}"]
    for cond, rows in groups:
        lines.append(cond)
        for label, r in rows:
            n = r.get("n_ok")
            lines.append(f"  {label}".ljust(label_w) + "".join(f"  {_cell(r, s.column, s.decimals):>{w}}" for s, w in cols)
                         + f"{'' if n is None or n != n else int(n):>5}")
    return lines


def verdict_block(texts: Sequence[str] | None, width: int = WIDTH, limit: int = MAX_VERDICTS) -> list[str]:
    """The verdicts in the report's words (``texts``: :func:`~ray_knowsim.report.verdicts.verdict_texts`),
    at most ``limit`` of them; None: none were computed (one condition, a run compare cannot read)."""
    if texts is None:
        return ["verdicts: none computed for this run (one condition, or no ok session)"]
    lines = ["verdicts:"]
    for text in texts[:limit]:
        lines += wrap(text, width, indent="    ", first="  - ")
    if len(texts) > limit:
        lines.append(f"  ... and {len(texts) - limit} more in the report")
    return lines


def next_line(run_dir: str, width: int = WIDTH) -> list[str]:
    """The closing ``next:`` line: the two commands that open the run, with its directory."""
    where = shlex.quote(run_dir)
    one = f"next: ray-knowsim view {where}   |   ray-knowsim report {where}"
    return [one] if len(one) <= width else [f"next: ray-knowsim view {where}", f"      ray-knowsim report {where}"]


def terminal_result(tables: dict[str, Any], specs: Sequence[MetricSpec], levels: Sequence[str],
                    verdicts: Sequence[str] | None, banner: str | None, audit: str | None = None,
                    width: int = WIDTH, per_decision: str | None = None) -> list[str]:
    """The result's body, before the run's final line: the legend, each task's means, the
    verdicts and what each cost (``per_decision``: the report's sentence,
    :func:`ray_knowsim.report.per_decision.run_per_decision`), the simulator audit's count, the
    caveat of a test double (``banner``), and the one line naming what only the report has."""
    lines = ["", *legend(specs, width)]
    lm = tables.get("level_means")
    for task in sorted(lm["task"].unique()) if lm is not None and not lm.empty else []:
        lines += ["", *metric_block(tables, specs, str(task), levels, width)]
    lines += ["", *verdict_block(verdicts, width)]
    if per_decision:
        lines += wrap(f"{PER_DECISION}: {per_decision}", width)
    if audit:
        lines += wrap(audit, width)
    lines += caveat_block(banner, width)
    return lines + ["", *wrap(MORE_LINE, width)]


def caveat_block(banner: str | None, width: int = WIDTH) -> list[str]:
    """The test double's caveat (the report's and viewer's banner, under their heading), after a
    blank line; nothing for a real-model run (``banner`` None)."""
    return ["", *wrap(f"{BANNER_HEADING.upper()} {banner}", width, indent="")] if banner else []


__all__ = ["ALL_LEVELS_ROW", "MAX_VERDICTS", "MORE_LINE", "WIDTH", "caveat_block", "legend", "metric_block", "next_line", "pack",
           "terminal_result", "verdict_block", "wrap"]
