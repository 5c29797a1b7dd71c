"""Shard outputs on disk: explicit Arrow schemas, atomic commits, and what counts as committed.

Layout of a run directory::

    sessions/<shard>.<token>.parquet   one SessionRow per session of the shard
    turns/<shard>.<token>.parquet      its TurnRows
    shards/<shard>.json                the commit marker: which files, which sessions, the config hash
    .tmp/                              files being written (never read)

A worker writes both Parquet files under ``.tmp/``, fsyncs them, renames them into place, then
writes the marker the same way. The marker's rename is the commit: files no marker names are
leftovers of an interrupted commit and are deleted at the next start. A rerun of a shard (its
failed sessions) writes a new token's files and a new marker, then deletes the old files, so
readers that follow markers never see a session twice.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ray_knowsim.io.parquet import arrow_schema, atomic_write_text, fsync_dir, rows_table, write_parquet
from ray_knowsim.model.results import SessionRow, TurnRow

MARKER_FORMAT = 1
TABLES = ("sessions", "turns")


# ----------------------------------------------------------------------------- schemas

SESSION_SCHEMA = arrow_schema(SessionRow)
TURN_SCHEMA = arrow_schema(TurnRow)


# ----------------------------------------------------------------------------- markers


@dataclass
class Marker:
    """A committed shard (the JSON in ``shards/<shard>.json``)."""

    shard_id: str
    config_hash: str
    token: str
    session_ids: list[str]  # every session of the shard (plan order)
    failed: dict[str, str] = field(default_factory=dict)  # session id -> error
    turns: int = 0
    committed_at: float = 0.0
    attempt: int = 1  # 1 + number of reruns of failed sessions
    summary: dict[str, Any] = field(default_factory=dict)
    format: int = MARKER_FORMAT

    def files(self) -> dict[str, str]:
        return {t: f"{t}/{self.shard_id}.{self.token}.parquet" for t in TABLES}

    @property
    def n_ok(self) -> int:
        return len(self.session_ids) - len(self.failed)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Marker":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    @classmethod
    def from_json(cls, text: str) -> "Marker":
        return cls.from_dict(json.loads(text))


class RunDir:
    """Paths and commit/read operations of one run directory."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def tmp(self) -> Path:
        return self.root / ".tmp"

    @property
    def shards(self) -> Path:
        return self.root / "shards"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    def table_dir(self, name: str) -> Path:
        return self.root / name

    def create(self) -> None:
        for d in (self.root, self.tmp, self.shards, *(self.table_dir(t) for t in TABLES)):
            d.mkdir(parents=True, exist_ok=True)

    # ---- reading ------------------------------------------------------------------------

    def marker_path(self, shard_id: str) -> Path:
        return self.shards / f"{shard_id}.json"

    def read_marker(self, shard_id: str) -> Marker | None:
        try:
            return Marker.from_json(self.marker_path(shard_id).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def markers(self, config_hash: str | None = None) -> dict[str, Marker]:
        """Committed shards (of ``config_hash`` when given) whose files all exist."""
        out: dict[str, Marker] = {}
        if not self.shards.is_dir():
            return out
        for path in sorted(self.shards.glob("*.json")):
            try:
                marker = Marker.from_json(path.read_text(encoding="utf-8"))
            except (ValueError, TypeError, OSError):
                continue  # unreadable: treated as not committed, the shard is redone
            if config_hash is not None and marker.config_hash != config_hash:
                continue
            if all((self.root / f).is_file() for f in marker.files().values()):
                out[marker.shard_id] = marker
        return out

    def data_files(self, table: str, markers: Iterable[Marker] | None = None) -> list[str]:
        """The committed Parquet files of ``table`` ("sessions" or "turns"), shard order."""
        ms = sorted(markers if markers is not None else self.markers().values(), key=lambda m: m.shard_id)
        return [str(self.root / m.files()[table]) for m in ms]

    def collect_garbage(self, keep: Iterable[Marker]) -> int:
        """Delete files no committed marker names (interrupted commits) and the temp folder."""
        wanted = {str((self.root / f).resolve()) for m in keep for f in m.files().values()}
        removed = 0
        for table in TABLES:
            d = self.table_dir(table)
            if not d.is_dir():
                continue
            for path in d.glob("*.parquet"):
                if str(path.resolve()) not in wanted:
                    path.unlink(missing_ok=True)
                    removed += 1
        if self.tmp.is_dir():
            for path in self.tmp.iterdir():
                if path.is_file():
                    path.unlink(missing_ok=True)
        return removed

    # ---- committing ---------------------------------------------------------------------

    def commit_shard(
        self,
        shard_id: str,
        config_hash: str,
        session_ids: list[str],
        sessions: pa.Table,
        turns: pa.Table,
        summary: dict[str, Any],
        previous: Marker | None = None,
    ) -> Marker:
        """Write a shard's two tables and its marker atomically (see the module docstring)."""
        self.create()
        token = f"{int(time.time())}{secrets.token_hex(4)}"
        status = sessions.column("status").to_pylist()
        errors = sessions.column("error").to_pylist()
        ids = sessions.column("session_id").to_pylist()
        marker = Marker(
            shard_id=shard_id,
            config_hash=config_hash,
            token=token,
            session_ids=list(session_ids),
            failed={sid: (err or "failed") for sid, st, err in zip(ids, status, errors) if st != "ok"},
            turns=turns.num_rows,
            committed_at=time.time(),
            attempt=(previous.attempt + 1) if previous else 1,
            summary=summary,
        )
        staged = []
        for name, table in (("sessions", sessions), ("turns", turns)):
            tmp = self.tmp / f"{shard_id}.{token}.{name}.parquet"
            write_parquet(table, tmp)
            staged.append((tmp, self.root / marker.files()[name]))
        for tmp, final in staged:
            os.replace(tmp, final)
        for table in TABLES:
            fsync_dir(self.table_dir(table))
        atomic_write_text(self.marker_path(shard_id), marker.to_json(), self.tmp)
        if previous is not None and previous.token != token:
            for f in previous.files().values():
                (self.root / f).unlink(missing_ok=True)
        return marker

    def read_shard_tables(self, marker: Marker, session_columns: list[str] | None = None,
                          turn_columns: list[str] | None = None) -> tuple[pa.Table, pa.Table]:
        """A committed shard's sessions and turns (all columns, or only the ones named)."""
        files = marker.files()
        return (
            pq.read_table(self.root / files["sessions"], schema=SESSION_SCHEMA, columns=session_columns),
            pq.read_table(self.root / files["turns"], schema=TURN_SCHEMA, columns=turn_columns),
        )


def open_dataset(run_dir: str | os.PathLike[str], table: str = "sessions", config_hash: str | None = None):
    """The committed rows of ``table`` as a Ray Dataset (only files named by commit markers, so
    leftovers of interrupted commits are never read). Ray must be initialised."""
    import ray.data

    files = RunDir(run_dir).data_files(table, RunDir(run_dir).markers(config_hash).values())
    if not files:
        raise FileNotFoundError(f"no committed {table} rows under {run_dir}")
    return ray.data.read_parquet(files)


def merge_rerun(
    old_sessions: pa.Table, old_turns: pa.Table, new_sessions: pa.Table, new_turns: pa.Table, order: list[str]
) -> tuple[pa.Table, pa.Table]:
    """A shard's tables after rerunning some sessions: old rows of rerun sessions replaced."""
    rerun = set(new_sessions.column("session_id").to_pylist())
    keep_s = [sid not in rerun for sid in old_sessions.column("session_id").to_pylist()]
    keep_t = [sid not in rerun for sid in old_turns.column("session_id").to_pylist()]
    sessions = pa.concat_tables([old_sessions.filter(pa.array(keep_s, pa.bool_())), new_sessions])
    turns = pa.concat_tables([old_turns.filter(pa.array(keep_t, pa.bool_())), new_turns])
    return sort_tables(sessions, turns, order)


def sort_tables(sessions: pa.Table, turns: pa.Table, order: list[str]) -> tuple[pa.Table, pa.Table]:
    """Sessions in plan order, turns by (plan order, turn): files are byte-for-byte reproducible."""
    rank = {sid: k for k, sid in enumerate(order)}
    s_sid = sessions.column("session_id").to_pylist()
    s_idx = sorted(range(sessions.num_rows), key=lambda i: rank[s_sid[i]])
    t_sid = turns.column("session_id").to_pylist()
    t_turn = turns.column("turn").to_pylist()
    t_idx = sorted(range(turns.num_rows), key=lambda i: (rank[t_sid[i]], t_turn[i]))
    return sessions.take(pa.array(s_idx, pa.int64())), turns.take(pa.array(t_idx, pa.int64()))


__all__ = [
    "Marker",
    "RunDir",
    "SESSION_SCHEMA",
    "TURN_SCHEMA",
    "arrow_schema",
    "atomic_write_text",
    "merge_rerun",
    "open_dataset",
    "rows_table",
    "sort_tables",
]
