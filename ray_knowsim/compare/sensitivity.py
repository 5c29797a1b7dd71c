"""How much each verdict depends on the simulator: the same verdicts without the audit's flagged sessions.

A verdict that holds only because of conversations where the learner or the extractor
contradicted its own state rests on the simulator's errors, not on the tutors. So every paired
verdict is computed twice by compare's one verdict procedure (:func:`ray_knowsim.compare.paired.analyse`,
never a second one): over all ok sessions, and over the sessions the audit did not flag
(``party``: only the learner's or the extractor's flags, or both). A row says what each reading
concludes and whether the verdict changed: a winner appears, disappears or flips. Pure:
pandas in, pandas out.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd

KEY = ("task", "knowledge_level", "metric", "condition_a", "condition_b")
COLUMNS = (*KEY, "verdict_all", "verdict_unflagged", "changed", "n_items_all", "n_items_unflagged",
           "n_excluded_a", "n_excluded_b")  # fmt: skip


def verdict_text(row: pd.Series | dict) -> str:
    """"<winner> better" for a significant row, "equivalent" for a shown equivalence, else "no verdict"."""
    if bool(row.get("significant")) and row.get("better"):
        return f"{row['better']} better"
    equivalent = row.get("equivalent")
    return "equivalent" if equivalent is not None and not pd.isna(equivalent) and bool(equivalent) else "no verdict"


def verdict_sensitivity(sessions: pd.DataFrame, conditions: Sequence[str], flagged: Iterable[str],
                        options=None, key: str = "session_id") -> pd.DataFrame:  # noqa: ANN001 - compare's CompareOptions
    """Per paired row (task, level, metric, pair): the verdict over all of ``sessions`` and over
    those whose ``key`` column (default ``session_id``; across runs, one that names the run too)
    is not in ``flagged``, and whether it changed."""
    from ray_knowsim.compare.paired import ALL_LEVELS, analyse

    flagged = set(flagged)
    keep = ~sessions[key].isin(flagged)
    every = analyse(sessions, conditions, options)["paired"]
    clean = analyse(sessions[keep], conditions, options)["paired"] if keep.any() else every.iloc[0:0]
    left_out = sessions[~keep]
    excluded = left_out.groupby(["task", "knowledge_level", "condition"]).size().to_dict()
    excluded |= {(t, ALL_LEVELS, c): n for (t, c), n in left_out.groupby(["task", "condition"]).size().items()}
    merged = every.merge(clean, on=list(KEY), how="left", suffixes=("", "_unflagged"))
    rows = []
    for _, r in merged.iterrows():
        after = {"significant": r.get("significant_unflagged"), "better": r.get("better_unflagged"),
                 "equivalent": r.get("equivalent_unflagged")}
        before_text, after_text = verdict_text(r), verdict_text(after) if pd.notna(r.get("n_items_unflagged")) else "no items left"
        rows.append({
            **{k: r[k] for k in KEY}, "verdict_all": before_text, "verdict_unflagged": after_text,
            # a verdict that appears, disappears or flips (no verdict before and no item after: nothing changed)
            "changed": before_text != after_text and not (before_text == "no verdict" and after_text == "no items left"), "n_items_all": int(r["n_items"]),
            "n_items_unflagged": int(r["n_items_unflagged"]) if pd.notna(r.get("n_items_unflagged")) else 0,
            "n_excluded_a": int(excluded.get((r["task"], r["knowledge_level"], r["condition_a"]), 0)),
            "n_excluded_b": int(excluded.get((r["task"], r["knowledge_level"], r["condition_b"]), 0)),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS))


def changed_lines(table: pd.DataFrame, limit: int = 12) -> list[str]:
    """One sentence per verdict that changes without the flagged sessions."""
    out = []
    for _, r in table[table["changed"]].head(limit).iterrows():
        out.append(f"{r['task']}, level {r['knowledge_level']}, {r['metric']}: {r['condition_a']} vs {r['condition_b']}: "
                   f"{r['verdict_all']} with every session, {r['verdict_unflagged']} without the flagged ones "
                   f"({r['n_excluded_a']} + {r['n_excluded_b']} sessions left out)")
    more = int(table["changed"].sum()) - len(out)
    if more > 0:
        out.append(f"... and {more} more (table audit_sensitivity)")
    return out


__all__ = ["COLUMNS", "KEY", "changed_lines", "verdict_sensitivity", "verdict_text"]
