"""Atomic writes into a sweep's output folder, through the run directory's writers (io/parquet.py).

Why: resume and every reader trust that a file under its final name is complete. Each file is
written under ``<sweep folder>/.tmp/`` (same filesystem), fsynced and renamed into place, so a
sweep killed mid-write leaves at worst a stray temp file (removed at the next start), never a
truncated table.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa

from ray_knowsim.io.parquet import atomic_write_parquet, atomic_write_text

TMP = ".tmp"
#: sub-folders of a sweep folder whose temp files live one level up, in the sweep's .tmp/
_NESTED = ("rows", "partials", "committed", "report")


def tmp_dir(path: Path) -> Path:
    """The temp folder for writing ``path``: ``.tmp/`` of its sweep folder."""
    parent = path.parent
    return (parent.parent if parent.name in _NESTED else parent) / TMP


def write_parquet_atomic(table: pa.Table, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(table, path, tmp_dir(path))
    return path


def write_text_atomic(text: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, tmp_dir(path))
    return path


def write_json_atomic(obj: Any, path: Path) -> Path:
    return write_text_atomic(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def remove_stale_tmp(folder: Path) -> None:
    """Delete leftovers of interrupted writes (``folder/.tmp``)."""
    shutil.rmtree(folder / TMP, ignore_errors=True)


__all__ = ["TMP", "read_json", "remove_stale_tmp", "tmp_dir", "write_json_atomic", "write_parquet_atomic", "write_text_atomic"]
