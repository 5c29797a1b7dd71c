"""Per-setting aggregates: partial sums per task, reduced once at the end.

Why partial sums: a sweep of 10,000 settings x 10,000 conversations has 10^8 rows; re-reading
them to average would cost more than the re-scoring. Each task reduces its own rows to sums per
(setting, cell), where a cell is the finest grouping any report uses (task, level, condition,
assistant model, strategy); any coarser grouping is a sum of cells. Sums run in row order inside
a task and in chunk order across tasks, so aggregates do not depend on how settings were split
into tasks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ray_knowsim.sweep.metrics import FLOAT_COLUMNS, FM_COLUMNS

CELL_COLUMNS: tuple[str, ...] = ("task", "knowledge_level", "condition", "assistant_model", "assistant_strategy")
#: columns averaged per setting and cell (every float metric plus the count-like integers)
AGG_METRICS: tuple[str, ...] = FLOAT_COLUMNS + ("turns", "overloaded_turns", "raw_state_progress", "new_ius", "disallowed") + FM_COLUMNS
#: early-stop counts per cell
STOP_COUNTS: tuple[str, ...] = ("n_stopped", "n_stop_mastery", "n_stop_overload", "stop_turn_sum")


def _group_codes(rows: pa.Table) -> tuple[np.ndarray, int, dict[str, np.ndarray]]:
    """(group code per row, number of groups, key columns per group) for (setting, *CELL_COLUMNS).

    Works on the dictionary indices of the cell columns (rows come from ``rescore.to_table``), so
    it costs a few array passes, not a Python loop over rows. Groups are ordered by key."""
    parts: list[np.ndarray] = [rows.column("setting").to_numpy().astype(np.int64)]
    values: list[np.ndarray] = [np.arange(int(parts[0].max()) + 1)]
    for c in CELL_COLUMNS:
        col = rows.column(c).combine_chunks()
        if pa.types.is_dictionary(col.type):
            parts.append(col.indices.to_numpy(zero_copy_only=False).astype(np.int64))
            values.append(np.asarray(col.dictionary.to_pylist(), dtype=object))
        else:
            codes, uniq = pd.factorize(np.asarray(col.to_pylist(), dtype=object))
            parts.append(codes.astype(np.int64))
            values.append(np.asarray(uniq, dtype=object))
    dims = tuple(max(len(v), 1) for v in values)
    key = np.ravel_multi_index(parts, dims)
    uniq, codes = np.unique(key, return_inverse=True)
    per_key = np.unravel_index(uniq, dims)
    columns = {"setting": per_key[0].astype(np.int32)}
    for c, idx, vals in zip(CELL_COLUMNS, per_key[1:], values[1:]):
        columns[c] = vals[idx]
    return codes.reshape(-1), len(uniq), columns


def partials(rows: pa.Table, chunk: int) -> pa.Table:
    """Sums per (setting, cell) of one task's rows (the row order fixes the summation order)."""
    if rows.num_rows == 0:
        return pa.table({"chunk": pa.array([], pa.int32())})
    codes, n_groups, keys = _group_codes(rows)
    out: dict[str, np.ndarray] = {"chunk": np.full(n_groups, chunk, dtype=np.int32), **keys}
    out["n"] = np.bincount(codes, minlength=n_groups).astype(np.int64)
    for m in AGG_METRICS:
        x = rows.column(m).to_numpy().astype(np.float64)
        out[f"{m}_sum"] = np.bincount(codes, weights=x, minlength=n_groups)
        out[f"{m}_sumsq"] = np.bincount(codes, weights=x * x, minlength=n_groups)
    stop = rows.column("early_stop_turn").fill_null(0).to_numpy()
    reason = rows.column("early_stop_reason").combine_chunks()
    reason_idx = reason.indices.fill_null(-1).to_numpy()
    names = reason.dictionary.to_pylist()
    for col, name in (("n_stop_mastery", "mastery"), ("n_stop_overload", "cognitive_overload")):
        hit = reason_idx == names.index(name) if name in names else np.zeros(len(reason_idx), bool)
        out[col] = np.bincount(codes, weights=hit, minlength=n_groups).astype(np.int64)
    out["n_stopped"] = np.bincount(codes, weights=(stop > 0), minlength=n_groups).astype(np.int64)
    out["stop_turn_sum"] = np.bincount(codes, weights=stop.astype(np.float64), minlength=n_groups)
    return pa.table(out)


def reduce(parts: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Means, standard deviations and early-stop rates per (setting, *by) from partial sums."""
    if parts.empty:
        return pd.DataFrame(columns=["setting", *by, "n"])
    parts = parts.sort_values(["chunk", "setting", *CELL_COLUMNS], kind="stable")
    sum_cols = ["n", *STOP_COUNTS] + [f"{m}_{k}" for m in AGG_METRICS for k in ("sum", "sumsq")]
    g = parts.groupby(["setting", *by], sort=True, observed=True)[sum_cols].sum().reset_index()
    n = g["n"].to_numpy(dtype=np.float64)
    out = g[["setting", *by, "n"]].copy()
    cols: dict[str, np.ndarray] = {}
    for m in AGG_METRICS:
        mean = g[f"{m}_sum"].to_numpy() / n
        var = np.maximum(0.0, g[f"{m}_sumsq"].to_numpy() / n - mean * mean)
        cols[f"{m}_mean"] = mean
        cols[f"{m}_std"] = np.sqrt(var)
    cols["early_stop_rate"] = g["n_stopped"].to_numpy() / n
    cols["mastery_stop_rate"] = g["n_stop_mastery"].to_numpy() / n
    cols["overload_stop_rate"] = g["n_stop_overload"].to_numpy() / n
    with np.errstate(invalid="ignore", divide="ignore"):
        cols["mean_stop_turn"] = np.where(g["n_stopped"] > 0, g["stop_turn_sum"] / g["n_stopped"].replace(0, 1), np.nan)
    return pd.concat([out, pd.DataFrame(cols, index=out.index)], axis=1)


__all__ = ["AGG_METRICS", "CELL_COLUMNS", "STOP_COUNTS", "partials", "reduce"]
