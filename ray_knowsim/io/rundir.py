"""Streaming access to a run directory's Parquet tables (``RUN_DIR/sessions/``, ``RUN_DIR/turns/``).

Why: the turns table holds every message of every conversation (hundreds of MB for 10,000
conversations). The report only ever reads projected columns batch by batch, and reads whole
turn rows just for the few conversations it shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

BATCH_ROWS = 8192


class RunDirError(ValueError):
    """The folder is not a readable run directory; the message says what is missing."""


@dataclass
class RunTables:
    run_dir: Path
    sessions: ds.Dataset
    turns: ds.Dataset | None  # None: the run wrote no turns table


def _dataset(path: Path) -> ds.Dataset | None:
    if not path.exists():
        return None
    try:
        dataset = ds.dataset(path, format="parquet", partitioning="hive", exclude_invalid_files=False)
    except (pa.ArrowInvalid, OSError) as exc:
        raise RunDirError(f"cannot read Parquet under {path}: {exc}") from exc
    return dataset if dataset.files else None


def open_run(run_dir: str | Path) -> RunTables:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run directory {run_dir} does not exist")
    sessions = _dataset(run_dir / "sessions")
    if sessions is None:
        raise RunDirError(f"{run_dir} has no Parquet files under sessions/ (is it a run directory?)")
    missing = {"session_id", "condition", "knowledge_level", "status"} - set(sessions.schema.names)
    if missing:
        raise RunDirError(f"{run_dir}/sessions lacks required columns: {', '.join(sorted(missing))}")
    return RunTables(run_dir, sessions, _dataset(run_dir / "turns"))


def _present(dataset: ds.Dataset, columns: Iterable[str]) -> list[str]:
    names = set(dataset.schema.names)
    return [c for c in columns if c in names]


def scan(dataset: ds.Dataset, columns: Iterable[str], filter: ds.Expression | None = None) -> Iterator[pa.RecordBatch]:
    """Projected batches, little read-ahead (memory is bounded by a few batches, not the table)."""
    scanner = dataset.scanner(
        columns=_present(dataset, columns),
        filter=filter,
        batch_size=BATCH_ROWS,
        batch_readahead=1,
        fragment_readahead=1,
    )
    yield from scanner.to_batches()


def read_rows(dataset: ds.Dataset, session_ids: Sequence[str], columns: Iterable[str] | None = None) -> list[dict]:
    """Rows of the given sessions only (streamed and filtered; row groups pruned by statistics)."""
    if not session_ids:
        return []
    cols = _present(dataset, columns) if columns is not None else dataset.schema.names
    id_type = dataset.schema.field("session_id").type
    if pa.types.is_dictionary(id_type):
        id_type = id_type.value_type
    wanted = pa.array(sorted(set(session_ids)), type=id_type)
    expr = pc.field("session_id").isin(wanted)
    out: list[dict] = []
    for fragment in dataset.get_fragments(filter=expr):
        pieces = fragment.split_by_row_group(expr, schema=dataset.schema) if isinstance(fragment, ds.ParquetFileFragment) else [fragment]
        for piece in pieces:
            # Two steps: the id column alone says whether this row group holds a wanted session,
            # so the (large) message columns are decoded only where they are needed.
            ids = piece.to_table(schema=dataset.schema, columns=["session_id"]).column("session_id")
            if not pc.any(pc.is_in(ids, value_set=wanted)).as_py():
                continue
            for batch in piece.to_batches(schema=dataset.schema, columns=cols, filter=expr, batch_size=BATCH_ROWS):
                out.extend(batch.to_pylist())
    return out
