"""The run's cost table (``tables/cost.parquet`` + CSV): tokens and USD per condition and per run.

Read straight from the session files' token columns with pyarrow (a handful of numeric columns;
no Ray Data groupby needed). Every session counts, failed ones included: they were paid for.
``cost_usd`` is the sum of the sessions' costs; it is empty (NaN) for a group where some session
used a model without a price, and ``priced_sessions`` says how many were priced.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ray_knowsim.model.results import ROLES

TOKEN_COLUMNS: tuple[str, ...] = tuple(f"{kind}_{role}" for role in ROLES for kind in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens"))
READ = ("task", "condition", "status", "llm_calls", *TOKEN_COLUMNS, "cost_usd")
ALL = "all"


def read_cost_columns(session_files: Sequence[str]) -> pd.DataFrame:
    frames = []
    for f in session_files:
        names = set(pq.read_schema(f).names)
        frames.append(pq.read_table(f, columns=[c for c in READ if c in names]).to_pandas())
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(READ))
    for c in READ:
        if c not in df.columns:
            df[c] = np.nan if c == "cost_usd" else 0
    return df


def _summary(g: pd.DataFrame) -> dict:
    row: dict = {"n_sessions": int(len(g)), "n_ok": int((g["status"] == "ok").sum()), "requests": int(g["llm_calls"].sum())}
    for kind in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens"):
        row[kind] = int(sum(g[f"{kind}_{r}"].sum() for r in ROLES))
    for c in TOKEN_COLUMNS:
        row[c] = int(g[c].sum())
    cost = pd.to_numeric(g["cost_usd"], errors="coerce")
    row["priced_sessions"] = int(cost.notna().sum())
    row["cost_usd"] = float(cost.sum()) if len(g) and cost.notna().all() else float("nan")
    row["cost_usd_per_session"] = row["cost_usd"] / len(g) if len(g) else float("nan")
    return row


def cost_table(sessions: pd.DataFrame) -> pd.DataFrame:
    """Rows per (task, condition), then one per task (condition "all"), then the run (all, all)."""
    rows = []
    for (task, cond), g in sessions.groupby(["task", "condition"], sort=True):
        rows.append({"task": task, "condition": cond, **_summary(g)})
    if sessions["task"].nunique() > 1:
        for task, g in sessions.groupby("task", sort=True):
            rows.append({"task": task, "condition": ALL, **_summary(g)})
    rows.append({"task": ALL, "condition": ALL, **_summary(sessions)})
    return pd.DataFrame(rows)


def cost_tables(session_files: Sequence[str]) -> dict[str, pd.DataFrame]:
    return {"cost": cost_table(read_cost_columns(session_files))}


__all__ = ["cost_table", "cost_tables", "read_cost_columns"]
