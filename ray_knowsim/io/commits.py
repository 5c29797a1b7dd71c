"""The commit protocol of a run directory: what a worker writes, and what counts as committed.

Layout::

    manifest.json                          what ran (run/manifest.py)
    sessions/<shard>.<token>.parquet       the SessionRows of one commit (.arrow: a step, see below)
    turns/<shard>.<token>.parquet          their TurnRows (.arrow likewise)
    commits/<shard>.<token>.json           the commit marker (format 2, or 3 for a step): one per commit
    shards/<shard>.json                    a format-1 marker (releases before streamed commits; read, never written)
    .tmp/                                  files being written (never read)

**A commit** is a few finished sessions of one shard: a worker writes both Parquet files under
``.tmp/``, fsyncs them, renames them into place, then writes the marker the same way. The
marker's rename is the commit (the discipline of every committed dataset: io/committed.py). A shard commits in small steps while it runs (a crash loses only
the sessions in flight), and folds its steps into one commit when it ends (:func:`fold_commits`).
The steps a fold rewrites are written as Arrow IPC files (``.arrow``, io/datafiles.py: a
fraction of Parquet's CPU), everything that is kept as Parquet; every reader reads both.

**Marker format 2** (``commits/<shard>.<token>.json``)::

    {"format": 2, "shard_id": "shard-000003", "token": "17330000001234ab12cd",
     "config_hash": "…", "plan": "<plan fingerprint>", "committed_at": 1733000000.12,
     "rows": {"sessions": 2, "turns": 6},
     "sessions": {"<session id>": {"status": "ok", "attempt": 1, "error": null,
                                   "failure_class": null, "previous_errors": []}, …},
     "summary": {…}}

**Format 3** is format 2 with ``"files": "arrow"``: the commit's data files are Arrow IPC
(``<table>/<shard>.<token>.arrow``). Only a step is written so; a marker says format 2 whenever
its files are Parquet, so a release that predates format 3 reads every finished run directory and
refuses, by name, an interrupted one holding steps.

It names its sessions with what resume needs (status, attempt, error and its class), so the
driver plans a resume from markers alone, without opening a Parquet file. The files are named by
``<shard>.<token>``; the file name of the marker must agree with its content.

**Format 1** (``shards/<shard>.json``, one per shard, rewritten by reruns) is still read, so run
directories of earlier releases load and resume; it recorded no attempts, so its sessions read as
attempt 1. A marker of a format this release does not know is refused (a newer release wrote it).

**Which row counts** (:class:`CommitIndex`): a session named by several commits (a shard
committed twice by a Ray retry after its commit, a rerun of a failed session, a fold) counts once,
from the commit with the highest ``(attempt, committed_at, token)``; the other commits' rows of
it are superseded and no reader sees them. Files no marker names are never read.

**Nothing is deleted on doubt**: a marker that cannot be read (bad JSON, a missing field, an
unknown format, a name that disagrees with its content, a file it names missing) raises
:class:`MarkerError` naming the file, and stops every reader and the run before anything is
cleaned up. :func:`collect_garbage` runs only over a fully read directory, and removes only the
leftovers of interrupted commits (files in our naming that no marker names, older than a few
minutes: a worker of a driver just killed may still be committing), commits whose every session
is superseded, and the temp folder; files of any other layout are left alone.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ray_knowsim.io.committed import CommittedDataset, Garbage, new_token, read_json_marker
from ray_knowsim.io.datafiles import SUFFIXES, FileFormat, read_schema, read_table
from ray_knowsim.io.parquet import arrow_schema
from ray_knowsim.schema.failures import failure_class
from ray_knowsim.schema.results import SessionRow, TurnRow, session_row_model

MARKER_FORMAT = 2
#: the marker format of a commit whose data files are Arrow IPC (a step; see the module docstring)
ARROW_MARKER_FORMAT = 3
READABLE_FORMATS = (1, 2, 3)
TABLES = ("sessions", "turns")
COMMITS = "commits"
SHARDS = "shards"  # format-1 markers
SESSION_SCHEMA = arrow_schema(SessionRow)
TURN_SCHEMA = arrow_schema(TurnRow)
SCHEMAS = {"sessions": SESSION_SCHEMA, "turns": TURN_SCHEMA}


def session_schema(file_schema: pa.Schema | None = None) -> pa.Schema:
    """The session table's schema: :data:`SESSION_SCHEMA` plus one float column per outside metric
    (``docs/extending.md``, "Adding a metric") -- the ones this process registered and the ones
    ``file_schema`` (a written file's) already holds, so a reader or a fold keeps a plugin's column
    without importing the plugin. Without outside metrics it is SESSION_SCHEMA, unchanged."""
    model = session_row_model()
    schema = SESSION_SCHEMA if model is SessionRow else arrow_schema(model)
    if file_schema is not None:
        for f in file_schema:
            if f.name not in schema.names and pa.types.is_floating(f.type):
                schema = schema.append(pa.field(f.name, pa.float64(), nullable=True))
    return schema


def conform_sessions(table: pa.Table) -> pa.Table:
    """Session rows in :func:`session_schema`'s column order and types (a column it lacks: nulls)."""
    target = session_schema(table.schema)
    for f in target:
        if f.name not in table.column_names:
            table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
    return table.select(target.names).cast(target)
#: what a shard id and a token may hold (they name files)
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
#: a data file written by a commit: ``<shard>.<token>.parquet`` or ``.arrow`` (tokens are hex digits)
COMMIT_FILE = re.compile(r"^(?P<shard>[A-Za-z0-9_-]+)\.(?P<token>[0-9a-f]{8,})\.(?:parquet|arrow)$")
#: the data files of a shard's step commits, which its fold rewrites as Parquet (io/datafiles.py)
STEP_FILES: FileFormat = "arrow"


class RunDirError(ValueError):
    """The folder is not a readable run directory; the message says what is wrong and where."""


class MarkerError(RunDirError):
    """A commit marker that cannot be read. Nothing is read or deleted past it: fix or move the
    file named in the message, then run again."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = Path(path)
        super().__init__(f"commit marker {self.path}: {why}. Nothing was read or deleted; repair or move this "
                         "file (a commit that cannot be read cannot be counted, and its files are kept)")


class RunDir:
    """The paths of one run directory (the files are written by :func:`write_commit`, read by
    :class:`ray_knowsim.io.rundir.RunReader`)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def tmp(self) -> Path:
        return self.root / ".tmp"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    def create(self) -> None:
        for d in (self.root, self.tmp, self.root / COMMITS, *(self.root / t for t in TABLES)):
            d.mkdir(parents=True, exist_ok=True)


# ----------------------------------------------------------------------------- marker models


class SessionEntry(BaseModel):
    """One session as a marker names it."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    status: Literal["ok", "failed"]
    attempt: int = Field(1, ge=1)
    error: str | None = None
    failure_class: Literal["infra", "model"] | None = None
    previous_errors: tuple[str, ...] = ()


class MarkerV2(BaseModel):
    """Formats 2 and 3 (3: format 2 naming Arrow IPC data files in ``files``)."""

    model_config = ConfigDict(extra="ignore")
    format: Literal[2, 3]
    files: Literal["parquet", "arrow"] = "parquet"
    shard_id: str
    token: str
    config_hash: str
    plan: str = ""
    committed_at: float
    rows: dict[str, int]
    sessions: dict[str, SessionEntry]
    summary: dict[str, Any] = Field(default_factory=dict)


class MarkerV1(BaseModel):
    model_config = ConfigDict(extra="ignore")
    format: Literal[1] = 1
    shard_id: str
    config_hash: str
    token: str
    session_ids: list[str]
    failed: dict[str, str] = Field(default_factory=dict)
    turns: int = 0
    committed_at: float = 0.0
    attempt: int = 1
    summary: dict[str, Any] = Field(default_factory=dict)


@dataclass
class Commit:
    """A committed set of sessions of one shard, read from its marker."""

    shard_id: str
    token: str
    config_hash: str
    committed_at: float
    sessions: dict[str, SessionEntry]  # row order of its files
    marker: Path  # the marker file
    plan: str = ""
    rows: dict[str, int] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    format: int = MARKER_FORMAT
    file_format: FileFormat = "parquet"  # the data files' (io/datafiles.py)

    @property
    def name(self) -> str:
        """``<shard>.<token>``: unique per commit; names its files."""
        return f"{self.shard_id}.{self.token}"

    def files(self) -> dict[str, str]:
        """Table -> file path relative to the run directory."""
        suffix = SUFFIXES[self.file_format]
        return {t: f"{t}/{self.name}{suffix}" for t in TABLES}

    def rank(self, session_id: str) -> tuple[int, float, str]:
        """Which commit's row of a session counts: the highest rank (see the module docstring)."""
        return (self.sessions[session_id].attempt, self.committed_at, self.token)

    @property
    def n_ok(self) -> int:
        return sum(e.status == "ok" for e in self.sessions.values())

    def to_json(self) -> str:
        """The marker: format 2 for Parquet files (as every release before format 3 wrote it),
        format 3 naming Arrow IPC ones."""
        arrow = self.file_format == "arrow"
        data = MarkerV2(format=ARROW_MARKER_FORMAT if arrow else MARKER_FORMAT, files=self.file_format, shard_id=self.shard_id,
                        token=self.token, config_hash=self.config_hash, plan=self.plan, committed_at=self.committed_at,
                        rows=self.rows, sessions=self.sessions, summary=self.summary)
        return json.dumps(data.model_dump(mode="json", exclude=None if arrow else {"files"}), indent=1)


def dataset(root: Path) -> CommittedDataset:
    """A run directory as a committed dataset: its two tables' folders, our naming of their files."""
    return CommittedDataset(Path(root), TABLES, COMMIT_FILE)


def read_marker(path: Path) -> Commit:
    """The commit a marker file describes; :class:`MarkerError` naming the file when it cannot be read."""
    data = read_json_marker(path, MarkerError)
    fmt = data.get("format", 1)
    if fmt not in READABLE_FORMATS:
        raise MarkerError(path, f"has format {fmt!r}; this release reads formats {list(READABLE_FORMATS)} "
                                "(was it written by a newer release?)")
    try:
        model = MarkerV1.model_validate(data) if fmt == 1 else MarkerV2.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(object)"
        raise MarkerError(path, f"{where}: {first['msg']}") from exc
    for what, value in (("shard_id", model.shard_id), ("token", model.token)):
        if not _NAME.match(value):
            raise MarkerError(path, f"{what} {value!r} is not a file-name-safe name")
    if isinstance(model, MarkerV2):
        expected = f"{model.shard_id}.{model.token}.json"
        named = "files" in data
        if (model.format == ARROW_MARKER_FORMAT) != (named and model.files == "arrow"):
            raise MarkerError(path, f"format {model.format} with files {data.get('files', '(not named)')!r}: format 3 "
                                    "names Arrow IPC files (\"files\": \"arrow\"), format 2 Parquet ones")
        sessions = dict(model.sessions)
        commit = Commit(model.shard_id, model.token, model.config_hash, model.committed_at, sessions, path, model.plan,
                        dict(model.rows), dict(model.summary), model.format, model.files)
    else:
        expected = f"{model.shard_id}.json"
        sessions = {sid: SessionEntry(status="failed" if sid in model.failed else "ok", error=model.failed.get(sid),
                                      failure_class=failure_class(model.failed[sid]) if sid in model.failed else None)
                    for sid in model.session_ids}
        commit = Commit(model.shard_id, model.token, model.config_hash, model.committed_at, sessions, path, "",
                        {"sessions": len(model.session_ids), "turns": model.turns}, dict(model.summary), 1)
    if path.name != expected:
        raise MarkerError(path, f"describes commit {commit.name} of {model.shard_id}; its file should be named {expected}")
    return commit


def read_markers(root: Path) -> list[Commit]:
    """Every commit of a run directory (any config), format-1 and format-2 markers, in name order;
    every file a marker names must exist."""
    out: list[Commit] = []
    data = dataset(root)
    for folder in (root / SHARDS, root / COMMITS):
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            commit = read_marker(path)
            for rel in data.missing(commit.files().values()):
                raise MarkerError(path, f"names {rel}, which does not exist (deleted or not yet copied?)")
            out.append(commit)
    return out


def shard_markers(root: Path, shard_id: str) -> list[Commit]:
    """The format-2 commits of one shard id (what a shard task checks before it runs)."""
    folder = root / COMMITS
    if not folder.is_dir():
        return []
    return [read_marker(p) for p in sorted(folder.glob(f"{shard_id}.*.json")) if p.name.split(".")[0] == shard_id]


# ----------------------------------------------------------------------------- which rows count


class CommitIndex:
    """Per session, the commit whose row counts; per commit, its superseded sessions."""

    def __init__(self, commits: Iterable[Commit]) -> None:
        self.commits: list[Commit] = sorted(commits, key=lambda c: c.name)
        best: dict[str, Commit] = {}
        for c in self.commits:
            for sid in c.sessions:
                held = best.get(sid)
                if held is None or c.rank(sid) > held.rank(sid):
                    best[sid] = c
        self._best = best
        self.superseded: dict[str, frozenset[str]] = {
            c.name: frozenset(sid for sid in c.sessions if best[sid] is not c) for c in self.commits
        }

    def entries(self) -> dict[str, SessionEntry]:
        """Session id -> the entry that counts."""
        return {sid: c.sessions[sid] for sid, c in self._best.items()}

    def counting_commits(self) -> dict[str, Commit]:
        """Session id -> the commit whose row counts (its summary names the spend journal the
        row was spent in: io/spend.py)."""
        return dict(self._best)

    def live(self) -> list[Commit]:
        """Commits holding at least one counted row."""
        return [c for c in self.commits if len(self.superseded[c.name]) < len(c.sessions)]

    def dead(self) -> list[Commit]:
        """Commits whose every row is superseded by another commit's."""
        return [c for c in self.commits if c.sessions and len(self.superseded[c.name]) == len(c.sessions)]

    def __len__(self) -> int:
        return len(self._best)


# ----------------------------------------------------------------------------- writing


def _entries(sessions: pa.Table) -> dict[str, SessionEntry]:
    cols = set(sessions.column_names)
    ids = sessions.column("session_id").to_pylist()
    status = sessions.column("status").to_pylist()
    errors = sessions.column("error").to_pylist()
    attempts = sessions.column("attempt").to_pylist() if "attempt" in cols else [1] * len(ids)
    classes = sessions.column("failure_class").to_pylist() if "failure_class" in cols else [None] * len(ids)
    previous = sessions.column("previous_errors").to_pylist() if "previous_errors" in cols else ["[]"] * len(ids)
    out: dict[str, SessionEntry] = {}
    for sid, st, err, att, cls, prev in zip(ids, status, errors, attempts, classes, previous):
        if sid in out:
            raise ValueError(f"a commit may hold each session once; {sid} is there twice")
        failed = st != "ok"
        out[sid] = SessionEntry(status="failed" if failed else "ok", attempt=att or 1, error=err,
                                failure_class=(cls or failure_class(err) or "model") if failed else None,
                                previous_errors=tuple(json.loads(prev or "[]")))
    return out


def write_commit(root: Path, *, shard_id: str, config_hash: str, sessions: pa.Table, turns: pa.Table,
                 plan: str = "", summary: dict[str, Any] | None = None, not_before: float = 0.0,
                 file_format: FileFormat = "parquet", compression: str = "zstd") -> Commit:
    """Commit ``sessions`` (with their ``turns``) of one shard: files, then the marker (see the
    module docstring). ``not_before``: a floor for ``committed_at`` (a fold must outrank what it
    folds); ``file_format``: the data files' (:data:`STEP_FILES` for steps a fold rewrites);
    ``compression``: a Parquet file's."""
    if not _NAME.match(shard_id):
        raise ValueError(f"shard id {shard_id!r} is not a file-name-safe name")
    commit = Commit(shard_id=shard_id, token=new_token(), config_hash=config_hash,
                    committed_at=max(time.time(), not_before), sessions=_entries(sessions),
                    marker=root / COMMITS / "", plan=plan, rows={"sessions": sessions.num_rows, "turns": turns.num_rows},
                    summary=dict(summary or {}), file_format=file_format,
                    format=ARROW_MARKER_FORMAT if file_format == "arrow" else MARKER_FORMAT)
    files = commit.files()
    commit.marker = dataset(root).commit([(files["sessions"], sessions), (files["turns"], turns)],
                                         f"{COMMITS}/{commit.name}.json", commit.to_json(), compression=compression)
    return commit


def read_commit_tables(root: Path, commit: Commit, drop: Iterable[str] = (),
                       session_columns: Sequence[str] | None = None,
                       turn_columns: Sequence[str] | None = None) -> tuple[pa.Table, pa.Table]:
    """A commit's sessions and turns (all columns, or the ones named), without the sessions in
    ``drop``; the same tables whichever format its files are in."""
    import pyarrow.compute as pc

    files = commit.files()
    out = []
    for table, cols in (("sessions", session_columns), ("turns", turn_columns)):
        path = root / files[table]
        schema = session_schema(read_schema(path)) if table == "sessions" else SCHEMAS[table]
        data = read_table(path, schema=schema, columns=cols)
        dropped = list(drop)
        if dropped and "session_id" in data.column_names:
            data = data.filter(pc.invert(pc.is_in(data.column("session_id"), value_set=pa.array(dropped, pa.string()))))
        out.append(data)
    return out[0], out[1]


def remove_commit(root: Path, commit: Commit) -> None:
    """Delete a commit: its marker first (from then on its files are unnamed leftovers), then its files."""
    dataset(root).remove(commit.marker, commit.files().values())


def fold_commits(root: Path, commits: Sequence[Commit], order: Sequence[str], plan: str = "",
                 summary: dict[str, Any] | None = None,
                 tables: Sequence[tuple[pa.Table, pa.Table]] | None = None) -> Commit | None:
    """One Parquet commit holding the rows of ``commits`` (all of one shard, all counted), sessions
    in ``order``; the folded ones are removed after it is committed. None when there is nothing to
    fold (no commit, or one that is Parquet already: a lone Arrow step is rewritten).
    ``tables``: the (sessions, turns) each commit wrote, when the caller still holds them (the shard
    worker that wrote them): the fold then does not read them back, and writes the same bytes; or
    each commit's rows without those another commit outranks (they go with the commit)."""
    if not commits or (len(commits) == 1 and commits[0].file_format == "parquet"):
        return None
    shard_ids = {c.shard_id for c in commits}
    if len(shard_ids) != 1:
        raise ValueError(f"fold_commits folds commits of one shard, not {sorted(shard_ids)}")
    if tables is not None and len(tables) != len(commits):
        raise ValueError(f"fold_commits: {len(tables)} table pairs for {len(commits)} commits")
    parts = list(tables) if tables is not None else [read_commit_tables(root, c) for c in commits]
    sessions, turns = sort_tables(pa.concat_tables([p[0] for p in parts], promote_options="default"),
                                  pa.concat_tables([p[1] for p in parts], promote_options="default"), order)
    folded = write_commit(root, shard_id=commits[0].shard_id, config_hash=commits[0].config_hash, plan=plan,
                          sessions=conform_sessions(sessions), turns=turns.cast(TURN_SCHEMA),
                          summary={**(summary or {}), "folded": [c.name for c in commits]},
                          not_before=max(c.committed_at for c in commits) + 1e-3)
    for c in commits:
        remove_commit(root, c)
    return folded


def sort_tables(sessions: pa.Table, turns: pa.Table, order: Sequence[str]) -> tuple[pa.Table, pa.Table]:
    """Sessions in plan order, turns by (plan order, turn): files are byte-for-byte reproducible."""
    s_idx, t_idx = _plan_order(order, sessions.column("session_id").to_pylist(), turns.column("session_id").to_pylist(),
                               turns.column("turn").to_pylist())
    return sessions.take(pa.array(s_idx, pa.int64())), turns.take(pa.array(t_idx, pa.int64()))


def sort_rows(sessions: Sequence[Any], turns: Sequence[Any], order: Sequence[str]) -> tuple[list[Any], list[Any]]:
    """Session and turn rows (objects with ``session_id`` / ``turn``) in :func:`sort_tables`'s
    order, before they become tables: a step commit sorts its few rows here rather than taking
    every column of its tables (~1 ms of CPU a step on ~85 columns)."""
    s_idx, t_idx = _plan_order(order, [r.session_id for r in sessions], [t.session_id for t in turns], [t.turn for t in turns])
    return [sessions[i] for i in s_idx], [turns[i] for i in t_idx]


def _plan_order(order: Sequence[str], session_ids: Sequence[str], turn_session_ids: Sequence[str],
                turn_numbers: Sequence[int]) -> tuple[list[int], list[int]]:
    """THE row order of a commit's files: sessions by their place in ``order`` (unplanned ones
    last, as they came), turns by (that place, turn number); stable."""
    rank = {sid: k for k, sid in enumerate(order)}
    last = len(rank)
    s_idx = sorted(range(len(session_ids)), key=lambda i: rank.get(session_ids[i], last))
    t_idx = sorted(range(len(turn_numbers)), key=lambda i: (rank.get(turn_session_ids[i], last), turn_numbers[i]))
    return s_idx, t_idx


#: leftovers younger than this are left for the next clean-up: a worker of a driver that was just
#: killed can still be between renaming its files into place and writing their marker
LEFTOVER_MIN_AGE_S = 300.0


def collect_garbage(root: Path, commits: Sequence[Commit], index: CommitIndex,
                    min_age_s: float = LEFTOVER_MIN_AGE_S) -> Garbage:
    """Clean a run directory whose every marker was read (``commits``: all of them, every config;
    ``index``: the index of the run's own config). See the module docstring for what goes;
    unnamed files younger than ``min_age_s`` stay (see :data:`LEFTOVER_MIN_AGE_S`)."""
    dead = index.dead()
    for c in dead:
        remove_commit(root, c)
    gone = {c.name for c in dead}
    named = [rel for c in commits if c.name not in gone for rel in c.files().values()]
    out = dataset(root).collect_garbage(named, min_age_s)
    out.superseded_commits = len(dead)
    return out


__all__ = [
    "ARROW_MARKER_FORMAT", "COMMITS", "COMMIT_FILE", "LEFTOVER_MIN_AGE_S", "Commit", "CommitIndex", "Garbage", "MARKER_FORMAT", "MarkerError", "READABLE_FORMATS",
    "RunDir", "RunDirError", "SCHEMAS", "SESSION_SCHEMA", "SHARDS", "STEP_FILES", "SessionEntry", "TABLES", "TURN_SCHEMA", "collect_garbage", "conform_sessions", "dataset", "session_schema",
    "fold_commits", "new_token", "read_commit_tables", "read_marker", "read_markers", "remove_commit", "shard_markers",
    "sort_rows", "sort_tables", "write_commit",
]
