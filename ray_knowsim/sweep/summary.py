"""What `ray-knowsim sweep` prints at the end (issue 51): the headline first -- mean Kendall tau
vs the default setting and the most influential parameter -- then the identity check, the work
done, and where the report is. Pure: the headline is the dict
:func:`ray_knowsim.sweep.report.headline` made for index.md (report/headline.json), so the terminal
and the report say the same numbers.
"""

from __future__ import annotations

from typing import Any

from ray_knowsim.text import fit


def sweep_record(result: Any, headline: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON record of a :class:`~ray_knowsim.sweep.runner.SweepResult` and its report's headline."""
    report = str(result.out_dir / result.report_files[0]) if result.report_files else None
    return {"name": result.plan.cfg.name, "output": str(result.out_dir), "report": report, "headline": headline,
            "identity": result.identity, "pieces_run": result.pieces_run, "pieces_skipped": result.pieces_skipped,
            "pairs_run": result.pairs_run, "pairs_skipped": result.pairs_skipped, "seconds": round(result.seconds, 2)}


def headline_lines(h: dict[str, Any] | None) -> list[str]:
    """The headline in two or three short lines (none without a report)."""
    if h is None:
        return []
    if h["mean_tau"] is None:
        lines = [f"  ranking by {h['ranking_metric']}: fewer than two conditions per group, so no Kendall tau"]
    else:
        lines = [f"  mean Kendall tau vs the default {h['mean_tau']:.3f} (min {h['min_tau']:.3f}) over {h['settings']} "
                 f"settings, ranking by {h['ranking_metric']}",
                 f"  top-1 condition kept in {h['top1_kept_share']:.0%} of (setting, group) pairs"]
    if h["influential"]:
        first, rest = h["influential"][0], h["influential"][1:]
        lines.append(f"  most influential parameter: {first['param']} (tau range {first['tau_range']:.3f})"
                     + (f"; then {', '.join(p['param'] for p in rest)}" if rest else ""))
    return lines


def identity_line(ident: dict[str, Any] | None) -> str:
    """Whether the default setting reproduced the source's recorded metrics."""
    ident = ident or {}
    if not ident.get("checked"):
        return f"  default-setting identity not checked: {ident.get('why', '?')}"
    bad = ident.get("mismatching_conversations", 0)
    return (f"  default setting vs recorded metrics: {ident['conversations'] - bad}/{ident['conversations']} conversations "
            f"reproduced ({ident['values_compared']} values){'' if not bad else ' -- see identity.csv'}")


def sweep_lines(record: dict[str, Any], record_file: str | None = None) -> list[str]:
    """The summary of :func:`sweep_record`: headline, identity, work done, report and record."""
    lines = [f"sweep '{record['name']}':", *headline_lines(record["headline"]), identity_line(record["identity"]),
             f"  {record['pieces_run']} pieces run, {record['pieces_skipped']} skipped, in {record['seconds']:.1f} s"]
    lines.append(f"report: {record['report']}" if record["report"] else f"output: {record['output']} (no report)")
    if record_file:
        lines.append(f"record: {record_file}")
    return [fit(line) for line in lines]


__all__ = ["headline_lines", "identity_line", "sweep_lines", "sweep_record"]
