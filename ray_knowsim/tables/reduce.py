"""The run's tables: ONE Ray Data groupby over the committed session rows, then the statistics
module (:mod:`ray_knowsim.stats.tables`) on the few rows it returns.

Ray Data does the part that scales with the number of sessions: per (task, condition, level,
item) counts, sums and sums of squares per metric, failure-mode and drift sums, in a single
groupby with many aggregations (each groupby costs seconds of fixed overhead). Per item, because
sessions cluster by item and the intervals treat items as the unit. Everything after works on
those rows:

* ``level_means``: per (task, condition, level) n, mean, sd, items and the item-clustered 95 % CI
  per metric (sessions with ``status="ok"`` only; failed ones are counted in ``n_failed``);
* ``marginal``: per (task, condition) the unweighted mean of the level means (spec §11's
  recommendation) with its item-clustered 95 % CI;
* ``ranks``: per (task, scope) with scope = each level and "marginal", the rank of each condition
  per metric and the mean rank over the paper's headline metrics (``mean_rank``: KG, DC, CO, IQ;
  ``mean_rank_es`` at the virtual early stop) -- the definitions are in :mod:`ray_knowsim.stats.ranks`;
* ``failure_modes``: per (task, condition, level) the count and share of each failure mode
  (plus task "all" when a run has several tasks).

``level_means`` and ``marginal`` carry, next to the metrics, how many sessions failed and why:
``n_failed_infra`` / ``n_failed_model`` (schema/failures.py), ``failure_rate`` and
``infra_failure_rate`` / ``model_failure_rate`` (shares of the cell's sessions), and ``n_rerun``
(sessions whose counted row is a 2nd or later attempt). A mean over ok sessions of a condition
that fails often is a mean over its easier cases: read it with its failure rate.

``level_means`` and ``marginal`` also carry how often the models drifted, summed over all sessions
of the cell (failed ones included): ``extractor_repairs`` (harmless drift normalised, e.g. ``iu1``
for ``IU1``), ``extractor_refusals`` (answers refused and re-asked or failed),
``llm_truncations`` (answers cut by max_tokens) and the primary score set's ``judge_repairs``,
``judge_refusals`` and ``judge_warnings`` (e.g. "7/10" read as 0.7; a 7 on a 0–1 scale refused).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ray_knowsim.io.datafiles import format_of, read_table
from ray_knowsim.io.rundir import LiveFile
from ray_knowsim.schema.failures import FAILURE_CLASSES, MODEL, failure_class
from ray_knowsim.schema.results import DRIFT_COLUMNS, FAILURE_MODES, RUN_METRICS
from ray_knowsim.schema.states import KNOWLEDGE_LEVELS
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS, MEAN_RANK_METRICS_ES
from ray_knowsim.stats.tables import level_table, marginal_table, rank_table

KEYS = ("task", "condition", "knowledge_level")
ITEM_KEYS = (*KEYS, "item_id")
METRICS: tuple[str, ...] = RUN_METRICS
RANK_METRICS: tuple[str, ...] = ("kg", "nkg", "dc", "ic", "co", "po", "engagement", "iq")
RANK_METRICS_ES: tuple[str, ...] = ("kg_es", "nkg_es", "dc_es", "ic_es", "co_es", "po_es", "engagement_es")
FM_COLUMNS: tuple[str, ...] = tuple(f"fm_{m}" for m in FAILURE_MODES)
# DRIFT_COLUMNS (schema/results.py): per-session counts of how often the models drifted, summed over
# every session, failed ones too: a session that failed on its extractor is exactly where the drift was
MEAN_RANKS = {"mean_rank": MEAN_RANK_METRICS, "mean_rank_es": MEAN_RANK_METRICS_ES}
TABLE_NAMES = ("level_means", "marginal", "ranks", "failure_modes")


# ----------------------------------------------------------------------------- Ray Data part


def partial_moments(batch: pa.Table) -> pa.Table:
    """One block reduced to per-(cell, item) partial sums (count, sum, sum of squares per metric
    over ok sessions; failure-mode, failure-class, rerun and drift sums; session counts), so the
    shuffle moves cells, not sessions."""
    ok = pc.equal(batch.column("status"), "ok")
    cols: dict[str, pa.Array] = {k: batch.column(k) for k in ITEM_KEYS}
    cols["n_sessions"] = pa.array([1] * batch.num_rows, pa.int64())
    cols["n_ok"] = pc.cast(ok, pa.int64())
    cols["n_failed"] = pc.cast(pc.invert(ok), pa.int64())
    zero_f = pa.scalar(0.0, pa.float64())
    for m in METRICS:
        value = pc.cast(batch.column(m), pa.float64())
        have = pc.and_(ok, pc.is_valid(value))
        v = pc.if_else(have, value, zero_f)
        cols[f"{m}__n"] = pc.cast(have, pa.int64())
        cols[f"{m}__s1"] = v
        cols[f"{m}__s2"] = pc.multiply(v, v)
    for f in FM_COLUMNS:
        cols[f] = pc.if_else(ok, pc.cast(batch.column(f), pa.int64()), pa.scalar(0, pa.int64()))
    for d in DRIFT_COLUMNS:  # runs written before these columns existed read as 0
        cols[d] = (pc.fill_null(pc.cast(batch.column(d), pa.int64()), 0) if d in batch.column_names
                   else pa.array([0] * batch.num_rows, pa.int64()))
    classes = failure_classes(batch)
    for cls in FAILURE_CLASSES:
        cols[f"n_failed_{cls}"] = pc.cast(pc.fill_null(pc.equal(classes, cls), False), pa.int64())
    attempt = (pc.fill_null(pc.cast(batch.column("attempt"), pa.int64()), 1) if "attempt" in batch.column_names
               else pa.array([1] * batch.num_rows, pa.int64()))
    cols["n_rerun"] = pc.cast(pc.greater(attempt, 1), pa.int64())
    table = pa.table(cols)
    sums = [c for c in table.column_names if c not in ITEM_KEYS]
    grouped = table.group_by(list(ITEM_KEYS)).aggregate([(c, "sum") for c in sums])
    return grouped.rename_columns([c[:-4] if c.endswith("_sum") else c for c in grouped.column_names])


def failure_classes(batch: pa.Table) -> pa.Array:
    """Per row: "infra" / "model" for a failed session, null for an ok one. Rows written before
    the ``failure_class`` column get theirs from their error (the one rule, schema/failures.py)."""
    ok = pc.equal(batch.column("status"), "ok")
    recorded = batch.column("failure_class") if "failure_class" in batch.column_names else pa.nulls(batch.num_rows, pa.string())
    recorded = pc.cast(recorded, pa.string())
    if pc.all(pc.or_(ok, pc.is_valid(recorded))).as_py() is not False:
        return pc.if_else(ok, pa.scalar(None, pa.string()), recorded)
    errors = pc.cast(batch.column("error"), pa.string()) if "error" in batch.column_names else pa.nulls(batch.num_rows, pa.string())
    codes = pc.unique(errors).to_pylist()
    derived = pc.take(pa.array([failure_class(c) or MODEL for c in codes], pa.string()),
                      pc.index_in(errors, value_set=pa.array(codes, pa.string())))
    return pc.if_else(ok, pa.scalar(None, pa.string()), pc.coalesce(recorded, derived))


#: failures per class and reruns, summed per cell beside ``n_failed``
FAILURE_COLUMNS: tuple[str, ...] = (*(f"n_failed_{c}" for c in FAILURE_CLASSES), "n_rerun")
SUM_COLUMNS: tuple[str, ...] = (
    "n_sessions", "n_ok", "n_failed", *FAILURE_COLUMNS, *(f"{m}__{p}" for m in METRICS for p in ("n", "s1", "s2")),
    *FM_COLUMNS, *DRIFT_COLUMNS,
)
#: columns of the session rows the reduction reads besides the metrics (absent ones read as null)
READ_COLUMNS: tuple[str, ...] = ("session_id", *ITEM_KEYS, "status", "error", "failure_class", "attempt")


def aggregate_item_sums(session_files: Sequence[Any], num_partitions: int | None = None, scores: Any = None) -> pd.DataFrame:
    """One row per (task, condition, level, item): n_sessions, n_ok, n_failed (and per failure
    class), n_rerun, ``<m>__n/__s1/__s2`` per metric and ``fm_*`` / drift sums. ``session_files``:
    the counted files (:attr:`ray_knowsim.io.rundir.CommittedTable.files`; their superseded rows
    are dropped here) or plain paths. ONE Ray Data groupby (over per-block partial sums, with the
    sort-based shuffle: the hash shuffle's 200 aggregator partitions cost minutes on small
    machines). ``scores`` (a :class:`~ray_knowsim.score.store.RunScores`) joins the judges'
    columns (``iq`` & co.) onto the session rows first. Ray must be initialised."""
    import ray
    import ray.data
    from ray.data import DataContext
    from ray.data.aggregate import Sum
    from ray.data.context import ShuffleStrategy

    files = [LiveFile(str(f)) if isinstance(f, (str, Path)) else f for f in session_files]
    if num_partitions is None:
        num_partitions = max(1, min(len(files), int(ray.cluster_resources().get("CPU", 1))))
    ctx = DataContext.get_current()
    saved = ctx._shuffle_strategy
    ctx._shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    try:
        ds = counted_dataset(files, [*READ_COLUMNS, *METRICS, *FM_COLUMNS, *DRIFT_COLUMNS])
        if scores is not None and scores.sets:
            ds = ds.map_batches(scores.attach, batch_format="pyarrow")
        ds = ds.map_batches(partial_moments, batch_format="pyarrow")
        grouped = ds.groupby(list(ITEM_KEYS), num_partitions=num_partitions)
        sums = grouped.aggregate(*(Sum(c, alias_name=c) for c in SUM_COLUMNS)).to_pandas()
    finally:
        ctx._shuffle_strategy = saved
    return normalise_sums(sums)


def counted_dataset(files: Sequence[LiveFile], columns: Sequence[str] | None = None, table: str = "sessions") -> Any:
    """The counted rows of ``files`` (a :class:`~ray_knowsim.io.rundir.CommittedTable`'s) as a Ray
    Dataset, read with the row model's schema (columns a file lacks read as null) and without the
    rows another commit outranks. Ray must be initialised."""
    import ray.data

    from ray_knowsim.io.commits import SCHEMAS

    if not files:
        raise FileNotFoundError(f"no committed {table} rows")
    schema = SCHEMAS[table]
    cols = [c for c in (columns or schema.names) if c in schema.names]
    parquet = [f for f in files if format_of(f.path) == "parquet"]
    steps = [f for f in files if format_of(f.path) != "parquet"]
    out = None
    if parquet:
        drops = {Path(f.path).name: f.drop for f in parquet if f.drop}
        out = ray.data.read_parquet([str(f.path) for f in parquet], schema=schema, include_paths=bool(drops))
        out = out.select_columns([*cols, *(["path"] if drops else [])])  # pushed down into the read
        if drops:  # rows outranked by another commit's row of the same session (io/commits.py)
            out = out.map_batches(functools.partial(drop_superseded, drops=drops), batch_format="pyarrow")
    if steps:
        # a shard's step commits (Arrow IPC; only in a run whose shards did not all end, io/datafiles.py):
        # a few sessions each, read here and handed to Ray Data as they are, outranked rows left out
        parts = [_without(read_table(f.path, schema=schema, columns=[*cols, *(["session_id"] if "session_id" not in cols else [])]),
                          f.drop).select(cols) for f in steps]
        more = ray.data.from_arrow(parts)
        out = more if out is None else out.union(more)
    return out


def _without(rows: pa.Table, dropped: frozenset[str]) -> pa.Table:
    """``rows`` without the sessions in ``dropped``."""
    if not dropped:
        return rows
    return rows.filter(pc.invert(pc.is_in(rows.column("session_id"), value_set=pa.array(sorted(dropped), pa.string()))))


def open_dataset(run_dir: str | Path, table: str = "sessions", config_hash: str | None = None) -> Any:
    """A run directory's counted rows of ``table`` as a Ray Dataset (io/rundir.py decides what counts)."""
    from ray_knowsim.io.rundir import RunReader

    reader = RunReader.open(run_dir, config_hash)
    part = reader.sessions if table == "sessions" else reader.turns
    return counted_dataset(part.files if part is not None else [], None, table)


def drop_superseded(batch: pa.Table, drops: dict[str, frozenset[str]]) -> pa.Table:
    """``batch`` (read with its file path) without the rows its file's commit no longer counts."""
    paths = pc.unique(batch.column("path")).to_pylist()
    keep = None
    for path in paths:
        dropped = drops.get(Path(path).name)
        if not dropped:
            continue  # most files lose nothing: no per-row work for them
        hit = pc.and_(pc.equal(batch.column("path"), path), pc.is_in(batch.column("session_id"), pa.array(sorted(dropped))))
        keep = pc.invert(hit) if keep is None else pc.and_(keep, pc.invert(hit))
    return (batch if keep is None else batch.filter(keep)).drop_columns(["path"])


def normalise_sums(sums: pd.DataFrame) -> pd.DataFrame:
    """Consistent dtypes and order of per-item sums (columns a run predating them lacks are 0)."""
    sums = sums.copy()
    for c in (*DRIFT_COLUMNS, *FAILURE_COLUMNS):
        if c not in sums:
            sums[c] = 0
    for c in ("n_sessions", "n_ok", "n_failed", *FAILURE_COLUMNS, *FM_COLUMNS, *DRIFT_COLUMNS, *(f"{m}__n" for m in METRICS)):
        sums[c] = pd.to_numeric(sums[c]).fillna(0).astype("int64")
    for m in METRICS:
        for p in ("s1", "s2"):
            sums[f"{m}__{p}"] = pd.to_numeric(sums[f"{m}__{p}"], errors="coerce").astype(float).fillna(0.0)
    sums["item_id"] = sums["item_id"].astype(str)
    return sort_cells(sums).sort_values([*KEYS, "item_id"], key=lambda c: c.map(level_rank) if c.name == "knowledge_level" else c,
                                        kind="stable").reset_index(drop=True)


def level_rank(level: str) -> int:
    return KNOWLEDGE_LEVELS.index(level) if level in KNOWLEDGE_LEVELS else len(KNOWLEDGE_LEVELS)


def sort_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Rows by task, condition, then level in the paper's order."""
    cols = [c for c in ("task", "condition") if c in df.columns]
    if "knowledge_level" in df.columns:
        df = df.assign(_lr=df["knowledge_level"].map(level_rank))
        df = df.sort_values(cols + ["_lr", "knowledge_level"]).drop(columns="_lr")
    else:
        df = df.sort_values(cols)
    return df.reset_index(drop=True)


# ----------------------------------------------------------------------------- pandas part


COUNT_COLUMNS: tuple[str, ...] = ("n_sessions", "n_ok", "n_failed", *FAILURE_COLUMNS, *DRIFT_COLUMNS)
#: shares of a cell's sessions that failed, overall and per class (:func:`failure_rates`)
RATE_COLUMNS: tuple[str, ...] = ("failure_rate", *(f"{c}_failure_rate" for c in FAILURE_CLASSES))


def cell_counts(item_sums: pd.DataFrame) -> pd.DataFrame:
    """Per (task, condition, level): session counts (failed per class, reruns), failure-mode and drift sums."""
    return sort_cells(item_sums.groupby(list(KEYS), as_index=False, sort=False)[[*COUNT_COLUMNS, *FM_COLUMNS]].sum())


def failure_rates(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (with n_sessions, n_failed and n_failed_<class>) with the shares of sessions that
    failed, overall and per class: next to the metrics, a reader sees what the means leave out."""
    n = df["n_sessions"].where(df["n_sessions"] > 0)
    out = df.copy()
    for rate, failed in zip(RATE_COLUMNS, ("n_failed", *(f"n_failed_{c}" for c in FAILURE_CLASSES))):
        out[rate] = (df[failed] / n).astype(float)
    return out


def level_means(item_sums: pd.DataFrame) -> pd.DataFrame:
    counts = failure_rates(cell_counts(item_sums)[[*KEYS, *COUNT_COLUMNS]])
    return sort_cells(counts.merge(level_table(item_sums, METRICS), on=list(KEYS), how="left"))


def marginal(item_sums: pd.DataFrame) -> pd.DataFrame:
    counts = item_sums.groupby(["task", "condition"], as_index=False)[list(COUNT_COLUMNS)].sum()
    means = marginal_table(item_sums, METRICS)
    merged = failure_rates(counts).merge(means, on=["task", "condition"], how="left")
    return merged[["task", "condition", "n_levels", *COUNT_COLUMNS, *RATE_COLUMNS, *means.columns[3:]]]


def ranks(level_table_: pd.DataFrame, marginal_table_: pd.DataFrame) -> pd.DataFrame:
    return rank_table(level_table_, marginal_table_, (*RANK_METRICS, *RANK_METRICS_ES), MEAN_RANKS)


def failure_modes(item_sums: pd.DataFrame) -> pd.DataFrame:
    cells = cell_counts(item_sums)
    parts = [cells[[*KEYS, "n_ok", *FM_COLUMNS]].copy()]
    if cells["task"].nunique() > 1:
        allt = cells.groupby(["condition", "knowledge_level"], as_index=False)[["n_ok", *FM_COLUMNS]].sum()
        allt.insert(0, "task", "all")
        parts.append(allt)
    df = pd.concat(parts, ignore_index=True)
    total = df[list(FM_COLUMNS)].sum(axis=1)
    out = df[[*KEYS, "n_ok"]].copy()
    out["fm_total"] = total
    for f in FM_COLUMNS:
        out[f] = df[f]
        out[f"{f}_share"] = (df[f] / total.where(total > 0)).astype(float)
    return sort_cells(out)


def build_tables(item_sums: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The four tables from :func:`aggregate_item_sums`'s per-item sums."""
    lm = level_means(item_sums)
    mg = marginal(item_sums)
    return {"level_means": lm, "marginal": mg, "ranks": ranks(lm, mg), "failure_modes": failure_modes(item_sums)}



__all__ = [
    "FAILURE_COLUMNS", "ITEM_KEYS", "KEYS", "METRICS", "RANK_METRICS", "RANK_METRICS_ES", "TABLE_NAMES",
    "aggregate_item_sums", "build_tables", "counted_dataset", "drop_superseded", "failure_classes", "failure_modes",
    "failure_rates", "level_means", "marginal", "normalise_sums", "open_dataset", "partial_moments", "ranks",
]
