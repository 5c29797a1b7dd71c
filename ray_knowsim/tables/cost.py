"""The run's cost table (``tables/cost.parquet`` + CSV): tokens and USD per condition and per run.

Per (task, condition): read from the run's counted session rows (io/rundir.py), token columns
only, with pyarrow (a handful of numeric columns; no Ray Data groupby needed). Every session
counts, failed ones included: they were paid for. ``cost_usd`` is the sum of the sessions' costs;
it is empty (NaN) for a group where some session used a model without a price, and
``priced_sessions`` says how many were priced.

What no counted row holds — sessions cut off by an interrupt or a killed process before their
commit, attempts superseded by a rerun, score sets the tables do not show — is read from the
run's spend journals (io/spend.py) and shown apart, one row each under task ``all`` (condition
``uncommitted``, ``superseded``, ``other_score_sets``, when not empty); the run's ``all, all``
row is the WHOLE spend over all invocations: the rows' plus what is apart.
``unanswered_requests``: requests sent whose answer never came (the process died waiting; a
provider may have billed them, their tokens are unknown).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from ray_knowsim.io.rundir import CommittedTable, RunReader
from ray_knowsim.io.spend import RunSpend, Spend
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


def _apart_row(spend: Spend) -> dict:
    """A cost-table row of journaled spend no counted row holds (see the module docstring)."""
    row: dict = {"n_sessions": len(spend.sessions - {""}), "n_ok": 0, "requests": spend.requests,
                 "prompt_tokens": spend.prompt_tokens, "completion_tokens": spend.completion_tokens,
                 "cached_prompt_tokens": spend.cached_prompt_tokens}
    for c in TOKEN_COLUMNS:
        kind, role = _split(c)
        row[c] = int(spend.by_role.get(role, {}).get(kind, 0))
    row["priced_sessions"] = 0
    row["cost_usd"] = float("nan") if spend.cost_usd is None else spend.cost_usd
    row["cost_usd_per_session"] = float("nan")
    return row


def _split(column: str) -> tuple[str, str]:
    for role in ROLES:
        if column.endswith(f"_{role}"):
            return column[: -len(role) - 1], role
    raise ValueError(column)


def _with(whole: dict, part: dict) -> dict:
    """``whole`` with ``part``'s counts and cost added (a NaN cost stays unknown)."""
    out = dict(whole)
    for c in ("requests", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", *TOKEN_COLUMNS, "unanswered_requests"):
        out[c] = int(out.get(c, 0)) + int(part.get(c, 0))
    out["cost_usd"] = whole["cost_usd"] + part["cost_usd"]
    return out


def cost_table(sessions: pd.DataFrame, spend: RunSpend | None = None) -> pd.DataFrame:
    """Rows per (task, condition), then one per task (condition "all"), then the journaled spend
    no row holds (``spend``: the run's, io/spend.py; None: a run without journals), then the run
    (all, all): the whole spend."""
    rows = []
    for (task, cond), g in sessions.groupby(["task", "condition"], sort=True):
        rows.append({"task": task, "condition": cond, **_summary(g)})
    if sessions["task"].nunique() > 1:
        for task, g in sessions.groupby("task", sort=True):
            rows.append({"task": task, "condition": ALL, **_summary(g)})
    whole = {"task": ALL, "condition": ALL, **_summary(sessions), "unanswered_requests": 0}
    if spend is not None:
        for why, part in spend.apart.items():
            if part.empty and not (why == "uncommitted" and spend.in_flight):
                continue
            row = {"task": ALL, "condition": why, **_apart_row(part),
                   "unanswered_requests": spend.in_flight if why == "uncommitted" else 0}
            rows.append(row)
            whole = _with(whole, row)
        whole["cost_usd_per_session"] = whole["cost_usd"] / whole["n_sessions"] if whole["n_sessions"] else float("nan")
    rows.append(whole)
    table = pd.DataFrame(rows)
    table["unanswered_requests"] = table["unanswered_requests"].fillna(0).astype(int)
    return table


def run_cost_table(reader: RunReader, attach: Callable[[pa.Table], pa.Table] | None = None,
                   spend: RunSpend | None = None) -> pd.DataFrame:
    """THE cost table of a run (every reader shows this one): its counted rows (``attach``: the
    run's ``RunScores.attach``, joining the judge's spend) and its spend journals (``spend``:
    score.spend.spend_of_run, which reads the score markers this layer may not)."""
    return cost_table(read_cost_columns(reader.sessions, attach), spend)


def cost_tables(sessions: CommittedTable, attach: Callable[[pa.Table], pa.Table] | None = None,
                spend: RunSpend | None = None) -> dict[str, pd.DataFrame]:
    """``{"cost": ...}`` over counted rows and, when given, the run's journaled spend."""
    return {"cost": cost_table(read_cost_columns(sessions, attach), spend)}


__all__ = ["cost_table", "cost_tables", "read_cost_columns", "run_cost_table"]
