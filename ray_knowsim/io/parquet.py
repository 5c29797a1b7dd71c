"""Parquet and Arrow helpers shared by every writer of a run directory (engine, score).

* :func:`arrow_schema` — the ONE derivation of an Arrow schema from a pydantic row model;
* :func:`rows_table` — rows of such a model as an Arrow table of that schema;
* :func:`replace_durably` — THE durable replacement of one file (temp file, fsync, rename, fsync
  of the folder), which :func:`atomic_write_text`, :func:`atomic_write_parquet` and the table
  writer (:mod:`ray_knowsim.io.tables`) all go through;
"""

from __future__ import annotations

import os
import secrets
import types
import typing
from pathlib import Path
from typing import IO, Any, Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of a pydantic field annotation of the result rows."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {annotation}")
        return _arrow_type(args[0])[0], True
    if origin is list:
        (inner,) = typing.get_args(annotation)
        return pa.list_(_arrow_type(inner)[0]), False
    simple = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    if annotation in simple:
        return simple[annotation], False
    raise TypeError(f"no Arrow type for {annotation}")


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """The Parquet schema of a row model, field for field, in declaration order."""
    fields = []
    for name, info in model.model_fields.items():
        typ, nullable = _arrow_type(info.annotation)
        fields.append(pa.field(name, typ, nullable=nullable))
    return pa.schema(fields, metadata={b"ray_knowsim.row": model.__name__.encode()})


def rows_table(rows: Sequence[BaseModel], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([r.model_dump() for r in rows], schema=schema)


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def replace_durably(path: Path, write: Callable[[IO[bytes]], None], tmp_dir: Path | None = None) -> Path:
    """Make ``path`` hold what ``write(fh)`` writes, so that readers see the old file or the whole
    new one, never a part, and a crash after the return cannot undo it: a temporary file
    (``tmp_dir/<name>.<random>.tmp``, or ``.<name>.<random>.tmp`` beside ``path`` when ``tmp_dir`` is
    None; same filesystem either way), fsynced, renamed over ``path``, then ``path``'s folder
    fsynced. The temporary file is gone afterwards, whatever ``write`` raised."""
    if tmp_dir is None:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    else:
        tmp_dir.mkdir(parents=True, exist_ok=True)
        tmp = tmp_dir / f"{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return path


def atomic_write_text(path: Path, text: str, tmp_dir: Path) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the whole new one, never half."""
    replace_durably(path, lambda fh: fh.write(text.encode("utf-8")), tmp_dir)


def atomic_write_parquet(table: pa.Table, path: Path, tmp_dir: Path, compression: str = "zstd") -> None:
    """Write ``table`` to ``path`` through a temporary file in ``tmp_dir`` and a rename."""
    replace_durably(path, lambda fh: pq.write_table(table, fh, compression=compression), tmp_dir)


__all__ = ["arrow_schema", "atomic_write_parquet", "atomic_write_text", "fsync_dir", "replace_durably", "rows_table"]
