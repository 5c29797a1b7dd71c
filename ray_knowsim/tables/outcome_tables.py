"""What failed, what was cut and whether the simulator works, on the terminal and the final line.

The counts come from :mod:`ray_knowsim.tables.outcomes` (failed sessions by error kind per condition,
truncated answers per role) and the checks from :mod:`ray_knowsim.tables.sanity`: the run's tables
hold them (``tables/failures``, ``tables/truncations``, ``tables/sanity``), this module only says them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ray_knowsim.tables.outcomes import TRUNCATION_COLUMNS, kinds_text, truncations_by_role
from ray_knowsim.tables.sanity import COMPONENT_HEADING, SanityReport
from ray_knowsim.schema.results import TRUNCATION_ROLES

SANITY_COLUMNS = ("check", "severe", "scope", "text", "short", "component")


def sanity_table(report: SanityReport) -> pd.DataFrame:
    """The run's sanity warnings as ``tables/sanity`` (one row per warning; none: no row)."""
    return pd.DataFrame([{"check": w.check, "severe": w.severe, "scope": w.scope, "text": w.text, "short": w.short,
                          "component": w.component} for w in report.warnings], columns=list(SANITY_COLUMNS))


def _component(sanity: pd.DataFrame) -> list[str]:
    """Each warning's component (a table written before the column: the simulator's)."""
    return [str(c) for c in sanity["component"]] if "component" in sanity.columns else ["simulator"] * len(sanity)


def severe_text(tables: dict[str, Any], heading: str | None = None) -> str:
    """The severe sanity warnings of a run's tables on one line ("" when none); ``heading``: only
    those whose component is named so on the final line ("SIMULATOR", "TUTOR")."""
    sanity = tables.get("sanity")
    if sanity is None or sanity.empty:
        return ""
    keep = [bool(sv) and (heading is None or COMPONENT_HEADING.get(c, "SIMULATOR") == heading)
            for sv, c in zip(sanity["severe"], _component(sanity))]
    severe = sanity[keep]
    return "; ".join(str(short or text) for short, text in zip(severe["short"], severe["text"]))


def final_line_parts(tables: dict[str, Any]) -> list[str]:
    """What the run's final line adds: the failed sessions by error kind and condition, the severe
    sanity warnings under the component their evidence points at ("SIMULATOR NOT WORKING?",
    "TUTOR NOT WORKING?"), and the other sanity warnings (small runs' warnings among them)."""
    parts = []
    kinds = kinds_text(tables.get("failures"))
    if kinds:
        parts.append(f"failed by kind: {kinds}")
    for heading in dict.fromkeys(COMPONENT_HEADING.values()):
        severe = severe_text(tables, heading)
        if severe:
            parts.append(f"{heading} NOT WORKING? {severe}")
    sanity = tables.get("sanity")
    if sanity is not None and not sanity.empty:
        mild = sanity[~sanity["severe"].astype(bool)]
        if not mild.empty:
            parts.append("sanity: " + "; ".join(str(short or text) for short, text in zip(mild["short"], mild["text"])))
    return parts


def print_outcomes(tables: dict[str, Any], console: Any = None) -> None:
    """After the metric tables: failed sessions by error kind per condition, truncated answers per
    role and condition (when any), and every sanity warning."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    failures = tables.get("failures")
    if failures is not None and not failures.empty:
        per = failures.groupby(["task", "condition", "error_kind"], as_index=False, sort=False).agg(
            n_failed=("n_failed", "sum"), example=("example", lambda v: next((x for x in v if x), "")))
        table = Table(title="failed sessions by error kind (tables/failures.csv: per level, with the failure class)", title_justify="left")
        for name, justify, wrap in (("task", "left", False), ("condition", "left", False), ("error kind", "left", False),
                                    ("sessions", "right", False), ("reason (first seen)", "left", True)):
            table.add_column(name, justify=justify, overflow="fold", no_wrap=not wrap)
        for _, r in per.sort_values(["task", "condition", "n_failed"], ascending=[True, True, False], kind="stable").iterrows():
            table.add_row(str(r["task"]), str(r["condition"]), str(r["error_kind"]), f"{int(r['n_failed']):,}", str(r["example"] or "–"))
        console.print(table)
    truncations = tables.get("truncations")
    if truncations is not None and not truncations.empty and int(truncations["llm_truncations"].sum()):
        per = truncations_by_role(truncations)
        table = Table(title="truncated answers (cut at max_tokens) per role", title_justify="left")
        table.add_column("task")
        table.add_column("condition")
        for role in TRUNCATION_ROLES:
            table.add_column(role, justify="right")
        if int(per["unattributed"].sum()):
            table.add_column("role not recorded", justify="right")
        for _, r in per.iterrows():
            cells = [f"{int(r[c]):,}" for c in TRUNCATION_COLUMNS]
            if int(per["unattributed"].sum()):
                cells.append(f"{int(r['unattributed']):,}")
            table.add_row(str(r["task"]), str(r["condition"]), *cells)
        console.print(table)
    audit = tables.get("audit")
    if audit is not None and not audit.empty:
        from rich.text import Text

        n, flagged = int(audit["n_sessions"].sum()), int(audit["n_flagged"].sum())
        console.print(Text(f"simulator audit: {flagged:,} of {n:,} ok sessions flagged ({int(audit['n_learner_flagged'].sum()):,} "
                           f"learner, {int(audit['n_extractor_flagged'].sum()):,} extractor); per condition and level in "
                           "tables/audit, each flag with its evidence in tables/audit_flags"))
    sanity = tables.get("sanity")
    if sanity is not None and not sanity.empty:
        from rich.text import Text

        for _, w in sanity.iterrows():  # model and condition names stay text (no markup)
            head = ("SIMULATOR CHECK", "bold red") if bool(w["severe"]) else ("simulator check", "yellow")
            console.print(Text.assemble(head, f" ({w['check']}): {w['text']}"))


__all__ = ["final_line_parts", "print_outcomes", "sanity_table", "severe_text"]
