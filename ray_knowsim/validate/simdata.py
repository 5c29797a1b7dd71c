"""Streaming reads of a run's tables (``RUN_DIR/sessions``, ``RUN_DIR/turns``), through the one
run-directory reader (:mod:`ray_knowsim.io.rundir`: only committed rows, each session once).

Validation needs only a few small columns per session plus, for concept coverage, one IU graph
per item and the turn texts. Everything is read batch by batch through ``pyarrow.dataset`` with
the column list pushed down, and reduced to per-group sums as it streams, so a 10,000-session
run never sits in memory as a whole (the test keeps the peak under 1 GB).
"""

from __future__ import annotations

import json
from typing import Any
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ray_knowsim.io.rundir import CommittedTable, RunDirError, RunReader

#: the session columns that identify a sim cell before arm mapping
KEY_COLUMNS: tuple[str, ...] = ("simulator", "task", "knowledge_level", "condition", "assistant_model", "assistant_strategy")
_BATCH = 16_384
_SMALL_BATCH = 512  # for wide string columns (graph_json, messages)


class SimDataError(ValueError):
    """A run folder whose tables cannot be used; the message names the path and column."""


def open_sim(run_dir: Path, name: str = "sessions") -> RunReader:
    """``RUN_DIR`` opened through the run-directory reader (:class:`SimDataError` when it cannot be)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SimDataError(f"{run_dir}: no '{name}' table (expected {run_dir / name}/ with Parquet files)")
    try:
        return RunReader.open(run_dir)
    except RunDirError as exc:  # the message names the folder or file
        raise SimDataError(str(exc)) from exc


def open_table(run_dir: Path, name: str, *, required: bool = True, run: RunReader | None = None) -> CommittedTable | None:
    """The counted rows of ``RUN_DIR/<name>`` (a run directory, or a plain Parquet folder /
    ``RUN_DIR/<name>.parquet`` holding each session once). ``run``: the run's reader when the
    caller has it open (:func:`open_sim`)."""
    run_dir = Path(run_dir)
    if run is None:
        run = open_sim(run_dir, name)
    table = run.sessions if name == "sessions" else run.turns
    if table is None or (run.layout == "plain" and not table.files):
        if required:
            raise SimDataError(f"{run_dir}: no '{name}' table (expected {run_dir / name}/ with Parquet files)")
        return None
    return table


def _need(dataset: CommittedTable, columns: list[str], what: str) -> None:
    have = set(dataset.names)
    missing = [c for c in columns if c not in have]
    if missing:
        raise SimDataError(f"{what}: missing column(s) {', '.join(missing)}")


def aggregate_metrics(dataset: CommittedTable, columns: list[str], scores: Any = None) -> pd.DataFrame:
    """Per (KEY_COLUMNS, column): n, sum, sum of squares over finished sessions (status 'ok').
    ``scores`` (a ``ray_knowsim.score.store.RunScores``) joins the judges' columns (``iq``) in.

    Returns a long frame with columns KEY_COLUMNS + [column, n, sum, sumsq]; nulls are skipped.
    """
    cols = list(dict.fromkeys(columns))
    joined = scores is not None and bool(scores.sets)
    _need(dataset, [*KEY_COLUMNS, "status", *cols] + (["session_id"] if joined else []), "sessions table")
    parts: list[pd.DataFrame] = []
    for batch in dataset.scan([*KEY_COLUMNS, *cols] + (["session_id"] if joined else []), pc.field("status") == "ok", _BATCH):
        if batch.num_rows == 0:
            continue
        if joined:
            batch = scores.attach(batch)
        # reduce in Arrow (C++): string keys never become Python objects per row
        tbl = (batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])).select(list(KEY_COLUMNS))
        aggs = []
        for i, c in enumerate(cols):
            try:
                v = pc.cast(batch.column(c), pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SimDataError(f"sessions table: column {c!r} is not numeric ({exc})") from None
            tbl = tbl.append_column(f"v{i}", v).append_column(f"q{i}", pc.multiply(v, v))
            aggs += [(f"v{i}", "count"), (f"v{i}", "sum"), (f"q{i}", "sum")]
        g = tbl.group_by(list(KEY_COLUMNS), use_threads=False).aggregate(aggs).to_pandas()
        for i, c in enumerate(cols):
            part = g[list(KEY_COLUMNS)].assign(n=g[f"v{i}_count"], sum=g[f"v{i}_sum"], sumsq=g[f"q{i}_sum"], column=c)
            parts.append(part[part["n"] > 0])
    if not parts:
        return pd.DataFrame(columns=[*KEY_COLUMNS, "column", "n", "sum", "sumsq"])
    out = pd.concat(parts, ignore_index=True)
    return out.groupby([*KEY_COLUMNS, "column"], dropna=False, as_index=False)[["n", "sum", "sumsq"]].sum()


def session_index(dataset: CommittedTable) -> pd.DataFrame:
    """session_id + item identity + KEY_COLUMNS of every finished session (small columns only)."""
    cols = ["session_id", "item_id", *KEY_COLUMNS]
    _need(dataset, [*cols, "status"], "sessions table")
    parts = [
        b.to_pandas()
        for b in dataset.scan(cols, pc.field("status") == "ok", _BATCH)
        if b.num_rows
    ]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def item_graphs(dataset: CommittedTable, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(task, item_id) -> [(IU id, concept), ...] from the first session carrying each graph."""
    _need(dataset, ["task", "item_id", "graph_json"], "sessions table")
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for batch in dataset.scan(["task", "item_id", "graph_json"], batch_rows=_SMALL_BATCH):
        tasks, items = batch.column("task").to_pylist(), batch.column("item_id").to_pylist()
        graphs = batch.column("graph_json")
        for i, key in enumerate(zip(tasks, items)):
            if key in wanted and key not in out:
                raw = json.loads(graphs[i].as_py() or "{}")
                out[key] = [(str(n.get("id", "")), str(n.get("concept", ""))) for n in raw.get("nodes", [])]
        if len(out) == len(wanted):
            break
    return out


def iter_turn_texts(dataset: CommittedTable) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """Batches of (session_id, user_message, assistant_message) lists from the turns table."""
    cols = ["session_id", "user_message", "assistant_message"]
    _need(dataset, cols, "turns table")
    for batch in dataset.scan(cols, batch_rows=_SMALL_BATCH * 4):
        yield (
            batch.column("session_id").to_pylist(),
            batch.column("user_message").to_pylist(),
            batch.column("assistant_message").to_pylist(),
        )
