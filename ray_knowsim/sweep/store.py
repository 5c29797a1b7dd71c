"""Atomic writes for the sweep's output folder.

Why: resume trusts that a file under its final name is complete. Every file is written under a
temporary name in the same folder and renamed into place (``os.replace`` is atomic on POSIX), so
a sweep killed mid-write leaves at worst a stray ``.tmp-*`` file, never a truncated piece.
(The run engine needs the same; until it has a shared helper this module is the sweep's own.)
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def write_parquet_atomic(table: pa.Table, path: Path, **kwargs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    try:
        pq.write_table(table, tmp, **kwargs)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(text: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_json_atomic(obj: Any, path: Path) -> Path:
    return write_text_atomic(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def remove_stale_tmp(folder: Path) -> int:
    """Delete leftovers of interrupted writes (``.NAME.tmp-*``) in ``folder``."""
    n = 0
    if folder.is_dir():
        for p in folder.glob(".*.tmp-*"):
            p.unlink(missing_ok=True)
            n += 1
    return n


__all__ = ["read_json", "remove_stale_tmp", "write_json_atomic", "write_parquet_atomic", "write_text_atomic"]
