"""Atomic writes for the sweep's output folder (the same commit discipline as io/commits.py).

Why: resume trusts that a file under its final name is complete. Every file is written under
``<folder>/.tmp/`` (same filesystem), fsynced and renamed into place, so a sweep killed mid-write
leaves at worst a stray temp file (removed at the next start), never a truncated piece. Text goes
through the engine's ``atomic_write_text``; the engine has no public Parquet writer, so the
Parquet variant lives here, written the engine's way (zstd, fsync, rename).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ray_knowsim.io.parquet import atomic_write_text

TMP = ".tmp"


def _tmp_dir(path: Path) -> Path:
    """Temp files of ``path`` live in ``.tmp/`` of its sweep folder (one level up for pieces)."""
    parent = path.parent
    return (parent.parent if parent.name in ("rows", "partials", "report") else parent) / TMP


def write_parquet_atomic(table: pa.Table, path: Path, **kwargs: Any) -> Path:
    tmp_dir = _tmp_dir(path)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / f"{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression="zstd", **kwargs)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(text: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, _tmp_dir(path))
    return path


def write_json_atomic(obj: Any, path: Path) -> Path:
    return write_text_atomic(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def remove_stale_tmp(folder: Path) -> None:
    """Delete leftovers of interrupted writes (``folder/.tmp``)."""
    shutil.rmtree(folder / TMP, ignore_errors=True)


__all__ = ["TMP", "read_json", "remove_stale_tmp", "write_json_atomic", "write_parquet_atomic", "write_text_atomic"]
