"""One committed dataset: data files that count only once a marker names them.

A run's commits (io/commits.py), a run's score sets (score/store.py) and a sweep's pieces
(sweep/commits.py) are three datasets of this kind. Each keeps only what is its own: what its
marker holds and where it lies, which files a marker names, and which of several commits of the
same work counts. The discipline they share is here, once:

**Writing a commit** (:meth:`CommittedDataset.commit`):

1. every data file is written under the dataset's temp folder and fsynced;
2. each is renamed to its final name, then every folder they landed in is fsynced;
3. the marker is written the same way (temp file, fsync, rename, fsync of its folder). Its rename
   is the commit: a crash before it leaves the old commit visible, after it the new one, never a
   part of one (a data file is only read once a marker names it);
4. what the new commit replaces goes after it (:meth:`CommittedDataset.remove`: the marker first,
   then its files), so a crash in between leaves both commits, which the dataset's own rule ranks.

**Reading**: :func:`read_json_marker` reads one marker as a JSON object, or raises the dataset's
own error naming the file (a marker that cannot be read is never skipped: its files would be
collected as garbage); :meth:`CommittedDataset.missing` names what a marker names but is not there.

**Garbage** (:meth:`CommittedDataset.collect_garbage`): given every file a marker names, it deletes
the files of the data folders in the dataset's naming that no marker names, and the temp folder's
files, each once older than ``min_age_s`` (a writer may be between steps 2 and 3); files of another
naming are reported, never deleted. Call it only over a dataset whose every marker was read.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa

from ray_knowsim.io.datafiles import format_of, write_table
from ray_knowsim.io.parquet import atomic_write_text, fsync_dir

#: builds a dataset's own error for a marker that cannot be read: (marker path, why) -> exception
MarkerErrorFactory = Callable[[Path, str], Exception]
TMP = ".tmp"


def new_token() -> str:
    """Milliseconds then 8 random hex digits: unique, and sorted by time within a machine."""
    return f"{int(time.time() * 1000):x}{secrets.token_hex(4)}"


def read_json_marker(path: Path, error: MarkerErrorFactory) -> dict[str, Any]:
    """The JSON object of a marker file; ``error(path, why)`` raised when it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise error(path, f"cannot be read ({type(exc).__name__}: {exc})") from exc
    except ValueError as exc:
        raise error(path, f"is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise error(path, "is not a JSON object")
    return data


def _write_durably(table: pa.Table, part: Path, final: Path, compression: str) -> None:
    """``table`` written to ``part`` in the format of ``final``'s name, and fsynced."""
    fmt = format_of(final)
    with open(part, "wb") as fh:
        write_table(table, fh, fmt, compression)
        fh.flush()
        os.fsync(fh.fileno())


@dataclass
class Garbage:
    """What a garbage collection removed (counts) and left alone (files of another naming)."""

    leftover_files: int = 0  # data files no marker names
    superseded_commits: int = 0  # whole commits outranked by others (removed by the dataset's rule)
    tmp_files: int = 0
    ignored: list[str] = field(default_factory=list)  # files of another naming: never read, never deleted


@dataclass(frozen=True)
class CommittedDataset:
    """The folders of one committed dataset (see the module docstring)."""

    root: Path
    data_folders: tuple[str, ...]  # relative to ``root``; "." for the root itself
    data_file: re.Pattern[str]  # the names of this dataset's data files in those folders
    tmp: Path | None = None  # where files are written before their rename (default: ``root/.tmp``)

    @property
    def tmp_dir(self) -> Path:
        return self.tmp if self.tmp is not None else self.root / TMP

    def commit(self, files: Sequence[tuple[str, pa.Table]], marker: str, text: str | Callable[[], str], *,
               compression: str = "zstd") -> Path:
        """Commit ``files`` (path relative to the root, table) under the marker ``marker`` holding
        ``text`` (a callable: made once the files are in place). Returns the marker's path. Each
        file is written in the format its suffix names (io/datafiles.py); ``compression``: Parquet's."""
        tmp = self.tmp_dir
        tmp.mkdir(parents=True, exist_ok=True)
        staged = []
        for rel, table in files:
            final = self.root / rel
            final.parent.mkdir(parents=True, exist_ok=True)
            part = tmp / f"{final.name}.{secrets.token_hex(4)}.tmp"
            _write_durably(table, part, final, compression)
            staged.append((part, final))
        for part, final in staged:
            os.replace(part, final)
        for folder in dict.fromkeys(final.parent for _, final in staged):
            fsync_dir(folder)
        path = self.root / marker
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text() if callable(text) else text, tmp)
        return path

    def missing(self, files: Iterable[str]) -> list[str]:
        """Those of ``files`` (relative to the root) that are not there."""
        return [rel for rel in files if not (self.root / rel).is_file()]

    def remove(self, marker: Path | None, files: Iterable[str] = ()) -> None:
        """Delete a commit: its marker first (from then on its files are unnamed leftovers), then
        ``files`` (relative to the root)."""
        if marker is not None:
            marker.unlink(missing_ok=True)
            fsync_dir(marker.parent)
        for rel in files:
            (self.root / rel).unlink(missing_ok=True)

    def collect_garbage(self, named: Iterable[str], min_age_s: float, *, clean_tmp: bool = True) -> Garbage:
        """Delete unnamed data files of this dataset's naming and temp files, once ``min_age_s``
        old (``named``: every file a marker names, relative to the root). ``clean_tmp``: False
        where the temp folder is another dataset's too (it cleans it)."""
        out = Garbage()
        keep = {os.path.normpath(rel) for rel in named}
        now = time.time()

        def old_enough(path: Path) -> bool:
            try:
                return now - path.stat().st_mtime >= min_age_s
            except FileNotFoundError:
                return False

        for folder in self.data_folders:
            where = self.root / folder
            if not where.is_dir():
                continue
            for path in sorted(where.iterdir()):
                rel = os.path.normpath(f"{folder}/{path.name}")
                if rel in keep:
                    continue
                if path.is_file() and self.data_file.match(path.name):
                    if old_enough(path):
                        path.unlink(missing_ok=True)
                        out.leftover_files += 1
                else:
                    out.ignored.append(rel)
        tmp = self.tmp_dir
        if clean_tmp and tmp.is_dir():
            for path in tmp.iterdir():
                if path.is_file() and old_enough(path):
                    path.unlink(missing_ok=True)
                    out.tmp_files += 1
        return out


__all__ = ["CommittedDataset", "Garbage", "MarkerErrorFactory", "TMP", "new_token", "read_json_marker"]
