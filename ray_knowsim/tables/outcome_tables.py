"""What failed and whether the simulator works, on the run's final line and the terminal result.

The counts come from :mod:`ray_knowsim.tables.outcomes` (failed sessions by error kind per condition,
truncated answers per role) and the checks from :mod:`ray_knowsim.tables.sanity`: the run's tables
hold them (``tables/failures``, ``tables/truncations``, ``tables/sanity``), this module only says them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ray_knowsim.tables.outcomes import kinds_text
from ray_knowsim.tables.sanity import COMPONENT_HEADING, SanityReport

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


def audit_text(tables: dict[str, Any]) -> str | None:
    """How many ok sessions the simulator audit flagged, and where each flag is (None: no audit
    table): the count the terminal gives (docs/audit.md); the flags themselves are the report's."""
    audit = tables.get("audit")
    if audit is None or audit.empty:
        return None
    n, flagged = int(audit["n_sessions"].sum()), int(audit["n_flagged"].sum())
    return (f"simulator audit: {flagged:,} of {n:,} ok sessions flagged ({int(audit['n_learner_flagged'].sum()):,} learner, "
            f"{int(audit['n_extractor_flagged'].sum()):,} extractor); per condition and level in tables/audit, each flag "
            "with its evidence in tables/audit_flags")


__all__ = ["audit_text", "final_line_parts", "sanity_table", "severe_text"]
