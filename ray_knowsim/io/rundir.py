"""THE reader of a run directory: every reader of results (tables, report, compare, validate,
sweep, score, the viewer) reads sessions and turns through it, so they all see the same rows —
each session once, never a partial one, only what commit markers name
(:mod:`ray_knowsim.io.commits` is the protocol it follows).

Use::

    from ray_knowsim.io.rundir import RunReader

    run = RunReader.open("runs/demo")          # reads manifest + markers; RunDirError / MarkerError
    st = run.status()                           # n of N planned, ok / failed (by class), commits
    print(f"{st.n_committed} of {st.n_planned} sessions, {st.n_failed} failed")

    # sessions, lazily: projected columns, a filter, batches of bounded size
    import pyarrow.compute as pc
    for batch in run.sessions.scan(["session_id", "condition", "kg"], pc.field("status") == "ok"):
        ...
    table = run.sessions.read(["session_id", "condition", "status"])   # the same, as one table

    # one session's turns (in turn order), and a few sessions' rows
    turns = run.turns_of("math/demo_math_01/novice/sim:adaptive/0")
    rows = run.sessions.rows_of(["math/demo_math_01/novice/sim:adaptive/0"])

    # a live run: open again to see the commits made since (markers are small; opening is cheap)

What counts (see :mod:`ray_knowsim.io.commits`): of each session, the row of its highest-ranked
commit; files no marker names are ignored (leftovers of interrupted commits, or another layout's
files lying beside). Commits of another config than the manifest's are never counted (they are
listed in :attr:`RunStatus.foreign_commits`). A marker that cannot be read raises
:class:`MarkerError` naming the file: a reader never guesses past it.

A folder with no marker folder and no run manifest (none, or one without a ``config_hash``: not
written by ``ray-knowsim run``) — a Parquet export, synthetic test data — is read as a **plain** layout: every Parquet file under ``sessions/`` and ``turns/`` (hive partitions allowed,
or ``sessions.parquet``), and a session id found twice is an error naming both files — with no
marker to say which copy counts, none is picked.

No Ray here (the run's Ray Data reduction, ``tables/reduce.py``, takes :meth:`CommittedTable.files`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ray_knowsim.io.commits import (
    COMMITS,
    SCHEMAS,
    SHARDS,
    Commit,
    CommitIndex,
    MarkerError,
    RunDirError,
    SessionEntry,
    read_markers,
    session_schema,
)
from ray_knowsim.io.datafiles import dataset_format, read_schema
from ray_knowsim.io.decisions import DECISIONS_FILE  # an adaptive run's record: its procedure may end it before the plan does
from ray_knowsim.schema.failures import session_failure_class

BATCH_ROWS = 8192
REQUIRED_SESSION_COLUMNS = ("session_id", "condition", "knowledge_level", "status")
Layout = Literal["committed", "plain"]


@dataclass(frozen=True)
class LiveFile:
    """A data file and the sessions in it that do not count (superseded by another commit)."""

    path: str
    drop: frozenset[str] = frozenset()


class CommittedTable:
    """The counted rows of one table ("sessions" or "turns"), read lazily from its files."""

    def __init__(self, name: str, files: Sequence[LiveFile], schema: pa.Schema, *, partitioning: Any = None) -> None:
        self.name = name
        self.files = list(files)
        self.schema = schema
        self._partitioning = partitioning

    @property
    def names(self) -> list[str]:
        return list(self.schema.names)

    def only(self, files: Sequence[LiveFile]) -> "CommittedTable":
        """The same table (schema, partitioning) over ``files`` only: e.g. one commit's file, or
        the files a caller has checked."""
        return CommittedTable(self.name, files, self.schema, partitioning=self._partitioning)

    def __len__(self) -> int:
        return self.count_rows()

    def _dataset(self, paths: Sequence[str]) -> ds.Dataset:
        """The files ``paths``, all of one format (:meth:`_groups` keeps them so): Parquet, or a
        shard's Arrow IPC steps (io/datafiles.py)."""
        try:
            return ds.dataset(list(paths), schema=self.schema, format=dataset_format(paths[0]) if paths else "parquet",
                              partitioning=self._partitioning)
        except (pa.ArrowInvalid, OSError) as exc:
            raise RunDirError(f"cannot read the {self.name} files ({exc})") from exc

    def _groups(self) -> Iterator[tuple[list[str], frozenset[str]]]:
        """Runs of consecutive files with the same drop set and format (in file order: readers that
        sample see the rows in a stable order)."""
        run: list[str] = []
        drop: frozenset[str] = frozenset()
        suffix = ""
        for f in self.files:
            here = Path(f.path).suffix
            if run and (f.drop != drop or here != suffix):
                yield run, drop
                run = []
            run.append(f.path)
            drop, suffix = f.drop, here
        if run:
            yield run, drop

    def id_array(self, session_ids: Iterable[str]) -> pa.Array:
        """Session ids as an array of the table's id type (for ``isin`` filters)."""
        id_type = self.schema.field("session_id").type
        if pa.types.is_dictionary(id_type):
            id_type = id_type.value_type
        return pa.array(sorted(set(session_ids)), type=id_type)

    def present(self, columns: Iterable[str]) -> list[str]:
        names = set(self.schema.names)
        return [c for c in columns if c in names]

    def scan(self, columns: Iterable[str] | None = None, filter: ds.Expression | None = None,
             batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """Projected batches of the counted rows (columns the table lacks are skipped; memory is
        bounded by a few batches, not by the table).

        ``use_threads=False``: Arrow's threaded dataset scan keeps decoding ahead of a consumer
        slower than the read (apache/arrow#39808), whatever the readahead settings say; behind the
        report's per-row Python work its pool grew to ~750 MB on a 10k-session turns table, against
        ~160 MB single-threaded, and a full scan with no consumer work took the same time either
        way (0.29-0.36 s for 150k turn rows)."""
        cols = self.present(columns) if columns is not None else self.names
        for paths, drop in self._groups():
            expr = filter
            if drop:
                keep = pc.invert(pc.field("session_id").isin(self.id_array(drop)))
                expr = keep if expr is None else (expr & keep)
            scanner = self._dataset(paths).scanner(columns=cols, filter=expr, batch_size=batch_rows,
                                                   batch_readahead=1, fragment_readahead=1, use_threads=False)
            try:
                yield from scanner.to_batches()
            except (pa.ArrowInvalid, OSError) as exc:
                raise RunDirError(f"cannot read the {self.name} files ({exc})") from exc

    def read(self, columns: Iterable[str] | None = None, filter: ds.Expression | None = None) -> pa.Table:
        cols = self.present(columns) if columns is not None else self.names
        batches = list(self.scan(cols, filter))
        return pa.Table.from_batches(batches) if batches else self.schema.empty_table().select(cols)

    def count_rows(self, filter: ds.Expression | None = None) -> int:
        return sum(b.num_rows for b in self.scan(["session_id"], filter))

    def rows_of(self, session_ids: Sequence[str], columns: Iterable[str] | None = None) -> list[dict]:
        """Rows of the given sessions only (filtered as they stream; row groups pruned by statistics)."""
        if not session_ids:
            return []
        wanted = self.id_array(session_ids)
        out: list[dict] = []
        for batch in self.scan(columns, pc.field("session_id").isin(wanted)):
            out.extend(batch.to_pylist())
        return out


@dataclass
class RunStatus:
    """Where a run directory stands, from its manifest and markers (no Parquet file opened)."""

    root: Path
    layout: Layout
    config_hash: str | None
    n_planned: int | None  # from the manifest's plan (None: no manifest)
    n_committed: int  # sessions with a counted row
    n_ok: int
    n_failed: int
    failed_by_class: dict[str, int] = field(default_factory=dict)  # "infra" / "model" -> sessions
    rerun: int = 0  # counted sessions on their 2nd or later attempt
    commits: int = 0
    superseded_rows: int = 0  # rows of commits that another commit's row of the session outranks
    foreign_commits: list[str] = field(default_factory=list)  # markers of another config (never counted)
    manifest_status: str | None = None  # the last invocation's status ("running", "ok", ...)
    last_finished: bool | None = None  # whether the last invocation recorded its end (None: no invocation recorded)
    stopped: dict[str, Any] | None = None  # engine.fail_fast's stop of the last invocation (error, failed, finished)
    adaptive: bool = False  # an adaptive run (decisions.json): its procedure may stop before the plan's end
    # an adaptive run's own plan and where its procedure stands (decisions.json: sessions_fixed,
    # status); None for a fixed run or an unreadable record (then the manifest's plan counts)
    adaptive_planned: int | None = None
    adaptive_status: str | None = None
    # seconds since the last invocation's driver last showed it was alive (its heartbeat, else its
    # start); None: unknown. Past HEARTBEAT_STALE_S an unfinished invocation is a dead driver's
    last_seen_s_ago: float | None = None

    def completeness(self) -> "Completeness":
        """Whether every planned session is committed and, when not, why: THE rule every reader
        marks an incomplete run by (report, compare, viewer)."""
        return completeness(self)


#: why an adaptive run ran fewer sessions than its design plans (decisions.json's status)
STOPPED_EARLY_WORDS: dict[str, str] = {"decided": "decided", "curtailed": "curtailed", "budget": "budget reached"}


def sessions_text(n_run: int, n_planned: int | None, adaptive_status: str | None = None) -> str:
    """THE words for how many sessions a run ran of how many it plans -- the run header, the final
    line and the viewer all say this, so an adaptive run never shows two different totals. For an
    adaptive run ``n_planned`` is its design's (decisions.json ``sessions_fixed``), not the config's
    full plan, and a procedure that ended before it says so."""
    if n_planned is None:
        return f"{n_run:,} sessions (no plan recorded)"
    word = STOPPED_EARLY_WORDS.get(adaptive_status or "")
    if word and n_run < n_planned:
        return f"stopped early: {word} after {n_run:,} of {n_planned:,} planned sessions"
    return f"{n_run:,} of {n_planned:,} planned sessions"


def adaptive_facts(root: str | Path) -> dict[str, Any]:
    """What a :class:`RunStatus` takes from an adaptive run's decisions.json (nothing for a fixed
    run): its design's planned sessions and the procedure's status, so every reader counts against
    the design the run actually had, not the config's full plan."""
    from ray_knowsim.io.decisions import read_decisions

    if not (Path(root) / DECISIONS_FILE).is_file():
        return {"adaptive": False}
    try:
        rec = read_decisions(Path(root))
    except ValueError:  # another format or a damaged record: the manifest's plan counts
        return {"adaptive": True}
    if rec is None:
        return {"adaptive": True}
    return {"adaptive": True, "adaptive_planned": rec.sessions_fixed, "adaptive_status": rec.status}


#: why a run holds fewer sessions than planned (see :func:`completeness`)
IncompleteReason = Literal["running", "interrupted", "stopped_on_failures", "failed", "incomplete"]
REASON_TEXT: dict[str, str] = {
    "running": "the last invocation is still running (its driver's heartbeat is fresh)",
    "interrupted": "interrupted (Ctrl-C); the same command resumes it",
    "stopped_on_failures": "stopped by engine.fail_fast",
    "failed": "the last invocation stopped with an error",
    "incomplete": "shards that did not finish; the same command resumes them",
}


#: THE words for where a run stands, by status key: the run command's final line, the report and
#: the viewer all say one of these (the key from :func:`status_key`; the manifest keeps its own
#: codes, ``ok``/``ok_with_failed_sessions``/..., which old run directories carry too)
STATUS_WORDS: dict[str, str] = {
    "complete": "complete",
    "with_failures": "with failures",
    "all_failed": "all sessions failed",
    "running": "running?",
    "interrupted": "interrupted",
    "stopped_on_failures": "stopped on failures",
    "failed": "failed",
    "incomplete": "incomplete",
    "unknown": "unknown",
}


def status_key(reason: "IncompleteReason | None", committed: int, failed: int, *, errored: bool = False) -> str:
    """The key of :data:`STATUS_WORDS` for a run: why it is incomplete when it is (see
    :func:`completeness`), else whether its last invocation stopped with an error, else what its
    committed sessions say (every one failed, some failed, none failed)."""
    if reason is not None:
        return reason
    if errored:
        return "failed"
    if committed and failed == committed:
        return "all_failed"
    return "with_failures" if failed else "complete"


def status_words(manifest: dict[str, Any] | None, comp: "Completeness", committed: int, failed: int) -> tuple[str, str]:
    """(word, one line on why) for a run directory, as the report and the viewer show it."""
    if manifest is None:
        return STATUS_WORDS["unknown"], "no manifest.json: not written by `ray-knowsim run`, or it was removed"
    key = status_key(comp.reason, committed, failed, errored=(manifest.get("status") or "") == "failed")
    detail = {"failed": f"the last invocation stopped with an error after {committed:,} sessions",
              "all_failed": f"every one of the {committed:,} sessions failed",
              "with_failures": f"{failed:,} of {committed:,} sessions failed",
              "complete": f"all {committed:,} planned sessions committed, none failed"}
    if comp.reason is None and key in ("complete", "with_failures") and comp.adaptive_status in STOPPED_EARLY_WORDS \
            and comp.n_planned is not None and committed < comp.n_planned:  # not "all planned": its procedure ended it
        return STATUS_WORDS[key], comp.sessions + (f"; {failed:,} failed" if failed else ", none failed")
    return STATUS_WORDS[key], comp.text if comp.reason is not None else detail[key]


def status_text(word_why: tuple[str, str]) -> str:
    """A run's status in one line, ``word (why)``: the report's status line and the run command's
    final line print this, the viewer the same two parts as a badge and its line."""
    return f"{word_why[0]} ({word_why[1]})"


def run_status_text(root: str | Path) -> str | None:
    """:func:`status_text` of the run directory at ``root``, read as the report and the viewer read
    it (its manifest and commit markers); None when it cannot be read."""
    try:
        reader = RunReader.open(root)
        st = reader.status()
    except (RunDirError, OSError):
        return None
    return status_text(status_words(reader.manifest, st.completeness(), st.n_committed, st.n_failed))


@dataclass(frozen=True)
class Completeness:
    """n of N planned sessions, and why not all (None when complete or when no plan is recorded)."""

    n_committed: int
    n_planned: int | None
    reason: IncompleteReason | None
    text: str  # one line for a page: "64 of 1,008 planned sessions committed: interrupted (Ctrl-C); ..."
    adaptive_status: str | None = None  # decisions.json's status of an adaptive run

    @property
    def sessions(self) -> str:
        """The run's sessions in :func:`sessions_text`'s words."""
        return sessions_text(self.n_committed, self.n_planned, self.adaptive_status)

    @property
    def incomplete(self) -> bool:
        return self.reason is not None

    @property
    def progress(self) -> str:
        return f"{self.n_committed:,} of {self.n_planned:,}" if self.n_planned is not None else f"{self.n_committed:,} (no plan recorded)"


def completeness(st: RunStatus) -> Completeness:
    """A run is incomplete when its manifest plans more sessions than are committed, or its last
    invocation has not ended (a run still writing). The reason, from the last invocation: still
    running (no end recorded), interrupted, stopped on failures, failed, else shards that did not
    finish. An adaptive run that ended normally is complete at fewer sessions (its procedure
    decided); one without a plan (a plain layout) cannot be judged and is not flagged."""
    planned = st.adaptive_planned if st.adaptive_planned is not None else st.n_planned
    if planned is None:
        return Completeness(st.n_committed, None, None, f"{st.n_committed:,} sessions; no plan recorded (not written by `ray-knowsim run`)")
    missing = planned - st.n_committed
    reason: IncompleteReason | None = None
    died = st.last_finished is False and st.last_seen_s_ago is not None and st.last_seen_s_ago > HEARTBEAT_STALE_S
    if st.last_finished is False:
        reason = "interrupted" if died else "running"
    elif missing > 0 and not (st.adaptive and st.manifest_status in ("ok", "ok_with_failed_sessions")):
        status = st.manifest_status
        reason = status if status in ("interrupted", "stopped_on_failures", "failed") else "incomplete"
    progress = f"{st.n_committed:,} of {planned:,} planned sessions committed"
    if reason is None:
        ended = st.adaptive_status if st.adaptive else None
        text = sessions_text(st.n_committed, planned, ended) if ended in STOPPED_EARLY_WORDS and missing > 0 else progress
        return Completeness(st.n_committed, planned, None, text, adaptive_status=ended)
    why = REASON_TEXT[reason]
    if died:
        why = (f"interrupted: the driver stopped without recording its end (no heartbeat for "
               f"{st.last_seen_s_ago / 60:.0f} min: killed, or its machine lost); the same command resumes it")
    if reason == "stopped_on_failures" and st.stopped:
        why += f" ({st.stopped.get('failed', '?')} of {st.stopped.get('finished', '?')} finished sessions failed with {st.stopped.get('error', '?')})"
    return Completeness(st.n_committed, planned, reason, f"{progress}: {why}")


def import_run_plugins(manifest: dict[str, Any] | None) -> list[str]:
    """Import the plugins a run's config names (the way its workers did), so a reader knows the
    run's outside metrics (their labels, which way is better: ray_knowsim.schema.metrics). Best
    effort: a plugin this machine cannot import is returned, not raised -- its metric's column
    stays in the rows (readable by name), only its catalogue entry is missing."""
    from ray_knowsim.registry import PluginImportError, import_plugins

    failed = []
    for module in ((manifest or {}).get("config") or {}).get("plugins") or []:
        try:
            import_plugins([str(module)])
        except PluginImportError:
            failed.append(str(module))
    return failed


def _sessions_schema(files: Sequence[LiveFile]) -> pa.Schema:
    """The session schema, with the outside-metric columns the run's first live file holds (one
    footer read: a run's commits share its config, hence its plugins and their metrics)."""
    if not files:
        return session_schema()
    try:
        return session_schema(read_schema(files[0].path))
    except (pa.ArrowInvalid, OSError):  # the scan that needs the file says what is wrong with it
        return session_schema()


class RunReader:
    """A run directory opened for reading (see the module docstring)."""

    def __init__(self, root: Path, layout: Layout, manifest: dict[str, Any] | None, config_hash: str | None,
                 index: CommitIndex | None, foreign: Sequence[Commit], sessions: CommittedTable,
                 turns: CommittedTable | None, all_commits: Sequence[Commit] = ()) -> None:
        self.root = root
        self.layout = layout
        self.manifest = manifest
        self.config_hash = config_hash
        self.index = index
        self.foreign = list(foreign)
        self.sessions = sessions
        self.turns = turns
        self.all_commits = list(all_commits)

    # ---- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, root: str | Path, config_hash: str | None = None) -> "RunReader":
        """Read the manifest and every marker. ``config_hash``: the config whose commits count
        (default: the manifest's; without a manifest, the one config the markers share)."""
        root = Path(root)
        if not root.is_dir():
            raise RunDirError(f"run directory {root} does not exist")
        manifest = _read_manifest(root)
        if not has_commit_markers(root) and not (manifest or {}).get("config_hash"):
            return cls._open_plain(root)
        commits = read_markers(root)
        wanted = config_hash or (manifest or {}).get("config_hash")
        if wanted is None:
            hashes = sorted({c.config_hash for c in commits})
            if len(hashes) > 1:
                raise RunDirError(f"{root} has commits of {len(hashes)} configs ({', '.join(hashes)}) and no manifest.json "
                                  "to say which is the run's")
            wanted = hashes[0] if hashes else None
        own = [c for c in commits if c.config_hash == wanted]
        foreign = [c for c in commits if c.config_hash != wanted]
        index = CommitIndex(own)
        live = index.live()
        tables = {}
        for name in ("sessions", "turns"):
            files = [LiveFile(str(root / c.files()[name]), index.superseded[c.name]) for c in live]
            tables[name] = CommittedTable(name, files, _sessions_schema(files) if name == "sessions" else SCHEMAS[name])
        return cls(root, "committed", manifest, wanted, index, foreign, tables["sessions"], tables["turns"], commits)

    @classmethod
    def _open_plain(cls, root: Path) -> "RunReader":
        tables: dict[str, CommittedTable | None] = {}
        for name in ("sessions", "turns"):
            tables[name] = _plain_table(root, name)
        sessions = tables["sessions"]
        if sessions is None:
            raise RunDirError(f"{root} has no Parquet files under sessions/ and no manifest.json or commit markers "
                              "(is it a run directory?)")
        missing = [c for c in REQUIRED_SESSION_COLUMNS if c not in sessions.names]
        if missing:
            raise RunDirError(f"{root}/sessions lacks required columns: {', '.join(missing)}")
        _check_unique(sessions)
        return cls(root, "plain", None, None, None, [], sessions, tables["turns"])

    # ---- what is there ----------------------------------------------------------------------

    def entries(self) -> dict[str, SessionEntry]:
        """Session id -> the marker entry that counts (status, attempt, error, failure class);
        empty for a plain layout (it has no markers: read the rows)."""
        return self.index.entries() if self.index is not None else {}

    def status(self) -> RunStatus:
        if self.index is None:  # plain: count the rows
            table = self.sessions.read(["status", *self.sessions.present(["failure_class", "error", "attempt"])])
            status = table.column("status").to_pylist()
            classes = table.column("failure_class").to_pylist() if "failure_class" in table.column_names else [None] * len(status)
            errors = table.column("error").to_pylist() if "error" in table.column_names else [None] * len(status)
            attempts = table.column("attempt").to_pylist() if "attempt" in table.column_names else [1] * len(status)
            # a row without a recorded class gets its error's (rows written before the column existed)
            entries = [(s, c if s == "ok" else session_failure_class(c, e), a or 1)
                       for s, c, e, a in zip(status, classes, errors, attempts)]
        else:
            entries = [(e.status, e.failure_class, e.attempt) for e in self.index.entries().values()]
        by_class: dict[str, int] = {}
        for st, cls, _ in entries:
            if st != "ok":
                by_class[cls or "model"] = by_class.get(cls or "model", 0) + 1
        return RunStatus(
            root=self.root, layout=self.layout, config_hash=self.config_hash, **manifest_facts(self.manifest, self.root),
            n_committed=len(entries), n_ok=sum(st == "ok" for st, _, _ in entries),
            n_failed=sum(st != "ok" for st, _, _ in entries), failed_by_class=by_class,
            rerun=sum(a > 1 for _, _, a in entries), commits=len(self.index.live()) if self.index else 0,
            superseded_rows=sum(len(s) for s in self.index.superseded.values()) if self.index else 0,
            foreign_commits=[c.name for c in self.foreign], **adaptive_facts(self.root),
        )

    def turns_of(self, session_id: str, columns: Iterable[str] | None = None) -> list[dict]:
        """One session's turn rows, in turn order (empty when the run has no turns table)."""
        if self.turns is None:
            return []
        cols = list(columns) if columns is not None else None
        if cols is not None and "turn" not in cols:
            cols.append("turn")
        return sorted(self.turns.rows_of([session_id], cols), key=lambda r: r["turn"])


def manifest_facts(manifest: dict[str, Any] | None, root: str | Path | None = None) -> dict[str, Any]:
    """What a :class:`RunStatus` takes from the run's manifest: the plan's size, the last
    invocation's status, whether it recorded its end, and engine.fail_fast's stop; with the run
    directory ``root``, also how long ago its driver was last seen alive (:func:`last_seen_s_ago`)."""
    manifest = manifest or {}
    invocations = manifest.get("invocations") or []
    last = invocations[-1] if invocations else {}
    return {
        "n_planned": (manifest.get("plan") or {}).get("n_sessions"),
        "manifest_status": last.get("status") or manifest.get("status"),
        "last_finished": (last.get("finished_at") is not None) if invocations else None,
        "stopped": (last.get("totals") or {}).get("stopped") or None,
        "last_seen_s_ago": last_seen_s_ago(root, manifest) if root is not None and invocations else None,
    }


#: the driver's heartbeat (run/manifest.py writes it every HEARTBEAT_EVERY_S while it runs)
HEARTBEAT_FILE = "heartbeat.json"
HEARTBEAT_EVERY_S = 10.0
#: an unfinished invocation whose driver was not seen for this long is a dead driver's (kill -9,
#: a lost machine): the run shows as interrupted, not as running forever
HEARTBEAT_STALE_S = 90.0


def last_seen_s_ago(root: str | Path, manifest: dict[str, Any], now: float | None = None) -> float | None:
    """Seconds since the last invocation's driver last beat (``heartbeat.json`` of that
    invocation), else since the invocation started; None when neither can be read."""
    import time
    from datetime import datetime

    invocations = manifest.get("invocations") or []
    if not invocations:
        return None
    now = time.time() if now is None else now
    seen: float | None = None
    try:
        started = invocations[-1].get("started_at")
        seen = datetime.strptime(started, "%Y-%m-%dT%H:%M:%S%z").timestamp() if started else None
    except (TypeError, ValueError):
        seen = None
    try:
        beat = json.loads((Path(root) / HEARTBEAT_FILE).read_text(encoding="utf-8"))
        if beat.get("invocation") == len(invocations) - 1 and isinstance(beat.get("at"), (int, float)):
            seen = max(seen or 0.0, float(beat["at"]))
    except (OSError, ValueError, AttributeError):
        pass
    return None if seen is None else max(0.0, now - seen)


def has_commit_markers(root: str | Path) -> bool:
    """Whether a folder has the commit layout (marker folders); without them and without a
    manifest, it is read as a plain layout."""
    root = Path(root)
    return (root / COMMITS).is_dir() or (root / SHARDS).is_dir()


def open_run(root: str | Path, config_hash: str | None = None) -> RunReader:
    """:meth:`RunReader.open`, checked to hold at least the columns every reader needs."""
    run = RunReader.open(root, config_hash)
    missing = [c for c in REQUIRED_SESSION_COLUMNS if c not in run.sessions.names]
    if missing:
        raise RunDirError(f"{run.root}/sessions lacks required columns: {', '.join(missing)}")
    return run


def _read_manifest(root: Path) -> dict[str, Any] | None:
    path = root / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path} cannot be read ({exc}); nothing was read") from exc
    if not isinstance(data, dict):
        raise RunDirError(f"{path} is not a JSON object")
    return data


def _plain_table(root: Path, name: str) -> CommittedTable | None:
    for path in (root / name, root / f"{name}.parquet"):
        if not path.exists():
            continue
        try:
            dataset = ds.dataset(path, format="parquet", partitioning="hive", exclude_invalid_files=False)
        except (pa.ArrowInvalid, OSError) as exc:
            raise RunDirError(f"cannot read Parquet under {path}: {exc}") from exc
        if not dataset.files:
            return None
        return CommittedTable(name, [LiveFile(f) for f in dataset.files], dataset.schema, partitioning="hive")
    return None


def _check_unique(sessions: CommittedTable) -> None:
    seen: dict[str, str] = {}
    for f in sessions.files:
        ids = sessions.only([f]).read(["session_id"])
        for sid in ids.column("session_id").to_pylist():
            if sid in seen:
                where = seen[sid] if seen[sid] == f.path else f"{seen[sid]} and {f.path}"
                raise RunDirError(f"session {sid!r} is in the sessions table twice ({where}); a folder without "
                                  "commit markers must hold each session once")
            seen[sid] = f.path


__all__ = ["BATCH_ROWS", "HEARTBEAT_EVERY_S", "HEARTBEAT_FILE", "HEARTBEAT_STALE_S", "STATUS_WORDS", "CommittedTable", "Completeness",
           "LiveFile", "MarkerError", "RunDirError", "RunReader", "RunStatus", "completeness", "has_commit_markers",
           "adaptive_facts", "import_run_plugins", "last_seen_s_ago", "manifest_facts", "open_run", "sessions_text", "status_key",
           "status_words", "status_text", "run_status_text"]
