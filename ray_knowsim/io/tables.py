"""The one writer of derived tables: a DataFrame as Parquet and CSV, each replaced atomically and durably.

Derived tables (a run's ``tables/``, compare's, validate's, the review agreement, a sweep's
report) are rewritten in place: ``score --primary`` and a resume re-reduce a run, a compare or a
validation is run again into the same folder, while a viewer, a report or a user's notebook may be
reading. So every file is written under a hidden temporary name in its own folder, fsynced, renamed
over the old one, and the folder fsynced: a reader sees the old table or the new one, never a
truncated file, and a crash (or a lost node) after the call returns cannot undo it.

Why this level, of the three there were (in-place writes; rename without fsync; fsync and rename):
the tables are small (a handful of files, kilobytes to megabytes), so the fsyncs cost milliseconds
against the seconds of the reduction that made them, while a table silently truncated by a crash
would be read as a result. They need no commit marker: each file is whole by itself and can be
made again from the committed rows (io/committed.py keeps those).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from ray_knowsim.io.parquet import replace_durably

FORMATS = ("parquet", "csv")


def write_table(df: pd.DataFrame, folder: str | os.PathLike[str], name: str, formats: Sequence[str] = FORMATS) -> list[Path]:
    """``df`` as ``<folder>/<name>.<format>`` for each of ``formats`` ("parquet", "csv"), without
    its index; returns the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    writers = {"parquet": lambda fh: df.to_parquet(fh, index=False),
               "csv": lambda fh: fh.write(df.to_csv(index=False).encode("utf-8"))}
    bad = [fmt for fmt in formats if fmt not in writers]
    if bad:
        raise ValueError(f"table format {bad[0]!r}: use one of {FORMATS}")
    # each file by the one durable replacement (io/parquet.py): a hidden temp file beside it, fsync, rename, fsync of the folder
    return [replace_durably(folder / f"{name}.{fmt}", writers[fmt]) for fmt in formats]


def write_tables(tables: Mapping[str, pd.DataFrame], folder: str | os.PathLike[str], formats: Sequence[str] = FORMATS) -> list[Path]:
    """Every table of ``tables`` (name -> DataFrame) by :func:`write_table`."""
    return [p for name, df in tables.items() for p in write_table(df, folder, name, formats)]


__all__ = ["FORMATS", "write_table", "write_tables"]
