"""The default-setting identity check: setting 0 must reproduce what the source recorded.

Why built into every sweep: re-scoring is only trustworthy if, under the rules the conversations
were recorded with, it gives back the recorded metrics. Every sweep compares its default rows with
the source's own numbers (our session table, or a reference record's ``metrics`` /
``metrics_at_early_stop`` / virtual early stop) and writes ``identity.csv``; a mismatch is loud.
Skipped (not failed) when initial states are re-sampled for the default setting, or when the
base rules differ from the rules the source was produced with (the check cannot know those, so
it reports the mismatch count and leaves the judgement to the reader).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import pandas as pd

from ray_knowsim.sweep.store import write_text_atomic

TOLERANCE = 1e-9  # the spec's verification tolerance (spec §16)


def _same(recorded: Any, ours: Any) -> bool:
    r_none = recorded is None or (isinstance(recorded, float) and math.isnan(recorded))
    o_none = ours is None or (isinstance(ours, float) and math.isnan(ours)) or ours is pd.NA
    if r_none or o_none:
        return r_none and o_none
    if isinstance(recorded, str) or isinstance(ours, str):
        return str(recorded) == str(ours)
    return abs(float(recorded) - float(ours)) <= TOLERANCE * max(1.0, abs(float(recorded)))


def compare(recorded: dict[str, Any], row: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(column, recorded, re-scored) for every recorded value the default row does not match."""
    return [(k, v, row.get(k)) for k, v in recorded.items() if k in row and not _same(v, row.get(k))]


def check_identity(plan, read_rows: Callable[..., pd.DataFrame]) -> dict[str, Any]:
    """Compare setting 0's rows with the source; writes ``identity.csv``; returns a summary.
    ``read_rows`` is the sweep's reader of its committed rows (``sweep.runner.read_rows``), handed
    in by the runner that calls this, so that this module does not import the runner back."""
    if plan.init.resamples(plan.settings[0].rules):
        return {"checked": False, "why": "initial states are re-sampled for the default setting"}
    rows = read_rows(plan.out_dir, settings=[0])
    by_pos = {int(r["conversation"]): r for r in rows.to_dict("records")}
    lines = ["conversation,session_id,column,recorded,rescored"]
    n_bad = 0
    n_values = 0
    for c in plan.source.conversations:
        row = by_pos.get(c.position)
        if row is None:
            continue
        row = {k: (None if (isinstance(v, float) and math.isnan(v)) else v) for k, v in row.items()}
        n_values += sum(1 for k in c.recorded if k in row)
        bad = compare(c.recorded, row)
        if bad:
            n_bad += 1
            for k, v, o in bad:
                lines.append(f"{c.position},{_csv(c.key)},{k},{v},{o}")
    write_text_atomic("\n".join(lines) + "\n", plan.out_dir / "identity.csv")
    return {
        "checked": True,
        "conversations": len(plan.source.conversations),
        "values_compared": n_values,
        "mismatching_conversations": n_bad,
        "tolerance": TOLERANCE,
    }


def _csv(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if ("," in text or '"' in text) else text


__all__ = ["TOLERANCE", "check_identity", "compare"]
