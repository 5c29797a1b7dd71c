"""The run's cost table (``tables/cost.parquet`` + CSV): tokens and USD per condition and per run.

Read from the run's counted session rows (io/rundir.py), token columns only, with pyarrow (a handful of numeric columns;
no Ray Data groupby needed). Every session counts, failed ones included: they were paid for.
``cost_usd`` is the sum of the sessions' costs; it is empty (NaN) for a group where some session
used a model without a price, and ``priced_sessions`` says how many were priced.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from ray_knowsim.io.rundir import CommittedTable
from ray_knowsim.schema.results import ROLES

TOKEN_COLUMNS: tuple[str, ...] = tuple(f"{kind}_{role}" for role in ROLES for kind in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens"))
READ = ("task", "condition", "status", "llm_calls", *TOKEN_COLUMNS, "cost_usd")
#: what the scoring stage adds per session (the judge's calls and cost live in scores/, not sessions/)
JUDGE_COLUMNS = ("judge_calls", "judge_cost_usd")
ALL = "all"


def read_cost_columns(sessions: CommittedTable, attach: Callable[[pa.Table], pa.Table] | None = None) -> pd.DataFrame:
    """The cost columns of every counted session (``sessions``: a run's
    :attr:`~ray_knowsim.io.rundir.RunReader.sessions`); ``attach`` (the run's ``RunScores.attach``)
    joins the judge's tokens, calls and cost from the scoring stage, which count like the session's own."""
    frames = []
    for batch in sessions.scan(["session_id", *READ]):
        table = pa.Table.from_batches([batch])
        if attach is not None:
            table = attach(table)
        frames.append(table.to_pandas())
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(READ))
    for c in READ:
        if c not in df.columns:
            df[c] = np.nan if c == "cost_usd" else 0
    if "judge_calls" in df.columns:  # the judge's work belongs to the session it judged
        df["llm_calls"] = df["llm_calls"] + pd.to_numeric(df["judge_calls"], errors="coerce").fillna(0).astype(int)
        judge_cost = pd.to_numeric(df["judge_cost_usd"], errors="coerce")
        spent = (df["prompt_tokens_judge"] + df["completion_tokens_judge"]) > 0
        df["cost_usd"] = pd.to_numeric(df["cost_usd"], errors="coerce") + judge_cost.where(spent, 0.0)
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


def cost_tables(sessions: CommittedTable, attach: Callable[[pa.Table], pa.Table] | None = None) -> dict[str, pd.DataFrame]:
    return {"cost": cost_table(read_cost_columns(sessions, attach))}


__all__ = ["cost_table", "cost_tables", "read_cost_columns"]
