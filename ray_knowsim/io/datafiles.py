"""The two formats a run directory's commit data files are written in, told apart by their
suffix, and the one place that writes and reads a commit's files in either.

* **Parquet** (``.parquet``, zstd): every commit a reader is meant to keep -- a shard's only commit,
  the fold of its steps. Columnar, compressed, with statistics that prune row groups; what users,
  Ray Data and every other tool read.
* **Arrow IPC** (``.arrow``, the Arrow file format, uncompressed): a shard's *step* commits, which
  the fold at the shard's end rewrites as Parquet. A step is a few sessions of ~85 columns, and
  Parquet encodes every column chunk (dictionaries, statistics, page headers): a step's CPU measured
  1.9 ms as IPC against 5.5-6.0 ms as uncompressed Parquet (scripts/bench/commits.py), ~0.03 ms of
  the client's CPU per request at ~96 requests a step (docs/performance.md, the fifth round). A
  step lives on disk from its commit to the fold, or, when the shard was cut off, until the shard's
  next run folds it (run/worker.fold_leftover_steps); every reader of a run directory reads it
  through :func:`read_table` / :func:`dataset_format`, so an interrupted run reads as a finished one.

No Ray here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Literal, Sequence

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

FileFormat = Literal["parquet", "arrow"]
#: a data file's suffix per format (what tells a reader how to read it)
SUFFIXES: dict[str, str] = {"parquet": ".parquet", "arrow": ".arrow"}
#: pyarrow.dataset's name of each format
_DATASET_FORMATS: dict[str, str] = {"parquet": "parquet", "arrow": "ipc"}


def format_of(path: str | os.PathLike[str]) -> FileFormat:
    """The format of a data file by its suffix: ``.arrow`` is Arrow IPC, anything else Parquet
    (a plain layout's files may carry any name: io/rundir.py reads them as Parquet, as ever)."""
    return "arrow" if Path(path).suffix == SUFFIXES["arrow"] else "parquet"


def dataset_format(path: str | os.PathLike[str]) -> str:
    """``pyarrow.dataset``'s format name for a data file ("parquet" or "ipc")."""
    return _DATASET_FORMATS[format_of(path)]


def write_table(table: pa.Table, fh: IO[bytes], fmt: FileFormat, compression: str = "zstd") -> None:
    """Write ``table`` to the open file ``fh`` in ``fmt`` (``compression``: Parquet's; an IPC file
    is written uncompressed, it is rewritten by the fold). The file is made in Arrow's memory and
    handed to ``fh`` in one write: the writers given a Python file call into Python once per
    buffer (a few per column: a step's 85-column sessions file cost 655 against 411 us here, a
    shard's fold ~15 % more), and the bytes are the same (tests/io/test_datafiles.py)."""
    if fmt not in SUFFIXES:
        raise ValueError(f"unknown data file format {fmt!r} (expected {', '.join(SUFFIXES)})")
    sink = pa.BufferOutputStream()
    if fmt == "parquet":
        pq.write_table(table, sink, compression=compression)
    else:
        with ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    fh.write(sink.getvalue())


def read_schema(path: str | os.PathLike[str]) -> pa.Schema:
    """The schema a data file was written with (a footer read for Parquet, the header for IPC)."""
    if format_of(path) == "parquet":
        return pq.read_schema(path)
    with pa.memory_map(str(path)) as source:
        return ipc.open_file(source).schema


def read_table(path: str | os.PathLike[str], schema: pa.Schema | None = None,
               columns: Sequence[str] | None = None) -> pa.Table:
    """A data file's rows, read with ``schema`` when given (columns the file lacks read as null)
    and ``columns`` only when given; the same table whichever format the file is in."""
    cols = list(columns) if columns is not None else None
    if format_of(path) == "parquet":
        return pq.read_table(path, schema=schema, columns=cols)
    return ds.dataset(str(path), schema=schema, format="ipc").to_table(columns=cols)


__all__ = ["FileFormat", "SUFFIXES", "dataset_format", "format_of", "read_schema", "read_table", "write_table"]
