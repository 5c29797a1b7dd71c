"""Every file the viewer reads is read here: the one module of ``ray_knowsim.view`` that touches disk.

Why one module:

* **Containment.** The viewer serves only what lies under the folders it was given. Every path is
  resolved (symlinks followed) and checked against those folders right before it is opened, so
  neither a request's path nor a file's content (a commit marker naming ``../x``, a symlink
  pointing out) reaches anything outside them.
* **The one reader.** A run directory is read through the project's run-directory reader
  (:class:`ray_knowsim.io.rundir.RunReader`): only the Parquet files commit markers name, each
  session once (a shard committed twice, a rerun's outranked rows, leftovers of an interrupted
  commit are never counted). Before it opens anything, every marker is checked to lie under the
  roots, and after, every file the markers name; a marker it cannot read leaves the run unread,
  with the reader's message (naming the file) shown.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ray_knowsim.io.commits import COMMITS, SHARDS
from ray_knowsim.io.rundir import CommittedTable, LiveFile, RunDirError, RunReader, RunStatus, has_commit_markers
from ray_knowsim.tables.sanity import JUDGE_SCORES, MAX_TURN_ROWS, TURN_COLUMNS, SanityInputs, SanityReport, SanityWarning, check_batches
from ray_knowsim.score.store import SCORE_SCHEMA, SCORES, RunScores, ScoreMarker, counted_sessions

#: folders never descended into while looking for outputs (big, or internals of a run)
SKIP_DIRS = frozenset({"sessions", "turns", "shards", "commits", "scores", "cache", "rows", "partials", "node_modules", "__pycache__"})
MAX_JSON_BYTES = 8 << 20
MAX_FILE_BYTES = 64 << 20
RESULT_ROWS = 65536  # session rows per step of a run's results reduction


class OutsideRoots(PermissionError):
    """A path that does not lie under the viewer's folders (after resolving symlinks)."""


def safe_relative(rel: str) -> bool:
    """Whether a path taken from a URL is a plain relative path: no ``..`` or ``.`` segment, no
    absolute path or drive, no backslash, no NUL, no ``%`` (a second encoding layer), no empty
    segment. Checked before any resolution, so an odd path is refused even where it would land
    inside a root."""
    if not rel or len(rel) > 1024 or any(c in rel for c in "\\\x00%:") or rel.startswith(("/", "~")):
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


@dataclass
class RunFiles:
    """The committed Parquet files of one run directory."""

    sessions: list[Path]
    turns: list[Path | None]  # the turns file of each sessions file (same index); None: none committed
    follows_markers: bool  # False: a plain layout (no markers, no run manifest): files read as found, each session once
    refused: list[str] = field(default_factory=list)  # markers / marker-named files outside the roots, not read
    drops: list[frozenset[str]] = field(default_factory=list)  # per sessions file: its sessions another commit outranks
    error: str | None = None  # the reader refused the run (an unreadable marker): nothing of it was read
    counted: dict[str, set[str]] | None = None  # commit -> its counted sessions (which scores count)
    status: RunStatus | None = None  # the reader's status of the run (n of N planned, and why not all)
    # the reader's tables over the files above only (resolved, checked paths): every read goes through them
    session_table: CommittedTable | None = None  # its files in the order of ``sessions`` (a row's _part)
    turn_table: CommittedTable | None = None  # the turns files read (committed: those paired with ``sessions``)
    turn_parts: list[LiveFile | None] = field(default_factory=list)  # committed: the turns file of each sessions file

    def part(self, k: int) -> CommittedTable | None:
        """The counted rows of the ``k``-th sessions file."""
        if self.session_table is None or not 0 <= k < len(self.session_table.files):
            return None
        return self.session_table.only([self.session_table.files[k]])

    def turns_of(self, k: int, session_id: str) -> list[dict[str, Any]]:
        """One session's turn rows in turn order: from the turns file committed with its sessions
        file (committed layout), or from the run's turns table (plain: ``turns/``, hive partitions
        or ``turns.parquet``)."""
        if self.turn_table is None:
            return []
        if self.follows_markers:
            paired = self.turn_parts[k] if k < len(self.turn_parts) else None
            if paired is None:
                return []
            table = self.turn_table.only([paired])
        else:
            table = self.turn_table
        return sorted(table.rows_of([session_id]), key=lambda r: r["turn"])

    def drop(self, part: int) -> frozenset[str]:
        return self.drops[part] if part < len(self.drops) else frozenset()

    def signature(self) -> tuple:
        out = []
        for path in self.sessions:
            st = path.stat()
            out.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(out)


class Files:
    """Read access to what lies under ``roots``, and nothing else."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]], cache_runs: int = 8) -> None:
        resolved = []
        for root in roots:
            path = Path(os.path.realpath(root))
            if not path.is_dir():
                raise FileNotFoundError(f"not a folder: {root}")
            resolved.append(path)
        self.roots: tuple[Path, ...] = tuple(dict.fromkeys(resolved))
        self._cache: OrderedDict[str, tuple[tuple, Any]] = OrderedDict()  # session tables, the cache_runs last used
        self._cache_size = cache_runs
        self._small: dict[str, tuple[tuple, Any]] = {}  # per run: its cost row, its sanity report (small; one each)
        self._lock = threading.Lock()

    # ---- containment -----------------------------------------------------------------------

    def contained(self, path: str | os.PathLike[str]) -> Path | None:
        """The resolved path when it lies under a root (symlinks followed), else None."""
        real = Path(os.path.realpath(path))
        return real if any(real == r or real.is_relative_to(r) for r in self.roots) else None

    def require(self, path: str | os.PathLike[str]) -> Path:
        real = self.contained(path)
        if real is None:
            raise OutsideRoots(f"{path} lies outside the viewer's folders")
        return real

    def child(self, base: Path, rel: str) -> Path | None:
        """``base/rel`` for a URL-supplied ``rel``, or None when ``rel`` is not a plain relative
        path or the result (resolved) leaves ``base`` or the roots."""
        if not safe_relative(rel):
            return None
        base_real = self.contained(base)
        target = self.contained(Path(base) / rel)
        if base_real is None or target is None or not (target == base_real or target.is_relative_to(base_real)):
            return None
        return target

    def root_label(self, path: Path) -> str:
        """``path`` relative to the root it lies under, prefixed by that root's folder name."""
        real = self.require(path)
        for root in self.roots:
            if real == root or real.is_relative_to(root):
                rel = real.relative_to(root).as_posix()
                return root.name if rel == "." else f"{root.name}/{rel}"
        raise OutsideRoots(str(path))  # pragma: no cover - require() already checked

    # ---- plain files -----------------------------------------------------------------------

    def folders(self, descend: Callable[[set[str]], bool], max_depth: int = 4, max_folders: int = 20000) -> Iterator[tuple[Path, set[str]]]:
        """(folder, names in it) for every folder under the roots, breadth first. Symlinked
        folders are not followed; hidden folders and run internals are skipped; a folder whose
        names make ``descend`` false (a run directory) is reported but not entered."""
        seen = 0
        for root in self.roots:
            queue = [(root, 0)]
            while queue:
                folder, depth = queue.pop(0)
                try:
                    entries = list(os.scandir(folder))
                except OSError:
                    continue
                names = {entry.name for entry in entries}
                yield folder, names
                seen += 1
                if seen >= max_folders or depth >= max_depth or not descend(names):
                    continue
                for entry in sorted(entries, key=lambda en: en.name):
                    if entry.name.startswith(".") or entry.name in SKIP_DIRS:
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            queue.append((Path(entry.path), depth + 1))
                    except OSError:
                        continue

    def is_file(self, path: Path) -> bool:
        real = self.contained(path)
        return real is not None and real.is_file()

    def list_files(self, folder: Path, suffixes: Iterable[str]) -> list[Path]:
        """Files directly in ``folder`` with one of ``suffixes``, sorted by name (contained only)."""
        real = self.contained(folder)
        if real is None or not real.is_dir():
            return []
        ends = tuple(suffixes)
        return sorted(p for p in real.iterdir() if p.name.endswith(ends) and self.is_file(p))

    def read_json(self, path: Path) -> Any | None:
        """The JSON at ``path``, or None when it is missing, too large or not JSON."""
        real = self.contained(path)
        if real is None or not real.is_file() or real.stat().st_size > MAX_JSON_BYTES:
            return None
        try:
            return json.loads(real.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def read_bytes(self, path: Path) -> bytes:
        real = self.require(path)
        if not real.is_file():
            raise FileNotFoundError(str(path))
        if real.stat().st_size > MAX_FILE_BYTES:
            raise OSError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
        return real.read_bytes()

    def read_table(self, path: Path, max_rows: int = 500) -> tuple[pa.Table, int]:
        """A small result table (Parquet or CSV) and its full row count; the first ``max_rows``."""
        real = self.require(path)
        if real.suffix == ".parquet":
            pf = pq.ParquetFile(real)
            n = pf.metadata.num_rows
            table = pa.Table.from_batches(list(_take(pf.iter_batches(batch_size=max(1, max_rows)), max_rows)), schema=pf.schema_arrow)
        else:
            table = pacsv.read_csv(real)
            n = table.num_rows
        return table.slice(0, max_rows), n

    # ---- run directories -------------------------------------------------------------------

    def _json_files(self, folder: Path, pattern: str) -> Iterator[tuple[Path, Any]]:
        """(path, parsed JSON) of each ``pattern`` file in ``folder`` that lies under the roots
        (a marker symlinked out is never opened); unreadable ones are left out."""
        real = self.contained(folder)
        if real is None or not real.is_dir():
            return
        for path in sorted(real.glob(pattern)):
            data = self.read_json(path)
            if data is not None:
                yield path, data

    def run_files(self, run_dir: Path, config_hash: str | None = None) -> RunFiles:
        """The counted files of ``run_dir``, as the run-directory reader counts them (of
        ``config_hash`` when given), each checked to lie under the roots. No marker is opened
        through a link that leaves the roots: a run with such a marker is not read at all."""
        root = self.require(run_dir)
        markers = [p for folder in (root / COMMITS, root / SHARDS) if folder.is_dir() for p in sorted(folder.glob("*.json"))]
        outside = [p.name for p in markers if self.contained(p) is None]
        if outside:
            return RunFiles([], [], True, refused=outside,
                            error=f"commit marker(s) {', '.join(outside)} lie outside the viewer's folders (linked in?): "
                                  "the run is not read")
        try:
            reader = RunReader.open(root, config_hash)
        except RunDirError as exc:
            return RunFiles([], [], has_commit_markers(root), error=str(exc))
        out = RunFiles([], [], reader.layout == "committed")
        turn_files = reader.turns.files if reader.turns is not None else []
        turns = {Path(f.path).name: f for f in turn_files}
        live: list[LiveFile] = []
        for f in reader.sessions.files:
            s = self.contained(f.path)
            paired = turns.get(Path(f.path).name) if out.follows_markers else None
            t = self.contained(paired.path) if paired is not None else None
            if s is None or (out.follows_markers and t is None):
                out.refused.append(Path(f.path).name)
                continue
            out.sessions.append(s)
            live.append(LiveFile(str(s), f.drop))
            out.drops.append(f.drop)
            if out.follows_markers:
                ok = t is not None and t.is_file()
                out.turns.append(t if ok else None)
                out.turn_parts.append(LiveFile(str(t), paired.drop) if ok else None)
        out.session_table = reader.sessions.only(live)
        if out.follows_markers:
            read_turns = [f for f in out.turn_parts if f is not None]
        else:  # a plain layout: every turns file the reader found (turns/, hive partitions, turns.parquet)
            read_turns = []
            for f in turn_files:
                t = self.contained(f.path)
                if t is None:
                    out.refused.append(Path(f.path).name)
                    continue
                read_turns.append(LiveFile(str(t), f.drop))
            out.turns = [None] * len(out.sessions)  # (no per-file pairing: read through turn_table)
        out.turn_table = reader.turns.only(read_turns) if reader.turns is not None and read_turns else None
        out.counted = counted_sessions(reader)
        out.status = reader.status()
        return out

    def scores(self, run_dir: Path, files: RunFiles | None = None) -> RunScores:
        """The run's score sets (``scores/``), reading only marker-named files under the roots, and
        of them only the scores of sessions the run counts (``files``: the run's, when at hand)."""
        root = self.require(run_dir)
        counted = (files if files is not None else self.run_files(run_dir)).counted
        folder = self.contained(root / SCORES)
        sets = {}
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()) if folder is not None and folder.is_dir() else []:
            if self.contained(sub) is None:
                continue
            parts = []
            for _path, data in self._json_files(sub, "*.json"):
                try:
                    marker = ScoreMarker(**data)
                except TypeError:
                    continue  # judge.json, or not a score marker
                if counted is not None and marker.commit not in counted:
                    continue  # scores of a commit the run no longer counts
                target = self.contained(sub / marker.file)
                if target is not None and target.is_file():
                    table = pq.read_table(target, schema=SCORE_SCHEMA)
                    if counted is not None:
                        keep = pa.array(sorted(counted[marker.commit]), pa.string())
                        table = table.filter(pc.is_in(table.column("session_id"), value_set=keep))
                    parts.append(table)
            sets[sub.name] = pa.concat_tables(parts) if parts else SCORE_SCHEMA.empty_table()
        index = self.read_json(root / SCORES / "index.json")
        primary = index.get("primary") if isinstance(index, dict) else None
        return RunScores(primary if primary in sets else next(iter(sets), None), sets)

    def _scores_signature(self, run_dir: Path) -> tuple:
        """What changes when a score set is committed or switched (its markers, the index)."""
        root = self.contained(run_dir / "scores")
        if root is None or not root.is_dir():
            return ()
        out = []
        for folder in [root, *sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())]:
            for p in sorted(folder.glob("*.json")):
                out.append((str(p), p.stat().st_mtime_ns))
        return tuple(out)

    def sessions(self, run_dir: Path, columns: Sequence[str], config_hash: str | None = None) -> tuple[pa.Table, RunFiles]:
        """The run's committed session rows, projected on ``columns`` (those present), with the
        primary score set joined in and a ``_part`` column (index of the file a row came from).
        Cached per run until its committed files change."""
        files = self.run_files(run_dir, config_hash)
        key = f"{self.require(run_dir)}|{config_hash}|{','.join(columns)}"
        sig = (files.signature(), self._scores_signature(Path(run_dir)))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == sig:
                self._cache.move_to_end(key)
                return hit[1], files
        parts = []
        for k in range(len(files.sessions)):
            table = files.part(k).read(["session_id", *columns])  # the reader's rows: outranked ones left out
            parts.append(table.append_column("_part", pa.array([k] * table.num_rows, pa.int32())))
        table = pa.concat_tables(parts, promote_options="permissive") if parts else pa.table({"session_id": pa.array([], pa.string())})
        scores = self.scores(run_dir, files)
        if scores.sets and table.num_rows:
            table = scores.attach(table)
        with self._lock:
            self._cache[key] = (sig, table)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return table, files

    def _per_commit_state(self, name: str, run_dir: Path, files: RunFiles, compute: Callable[[], Any]) -> Any:
        """``compute()``, cached per run until its committed files or score sets change (kept apart
        from the session tables: a small value per run, replaced when the run's signature changes,
        never pushing a table out nor pushed out by one)."""
        key = f"{name}|{self.require(run_dir)}"
        sig = (files.signature(), self._scores_signature(Path(run_dir)))
        with self._lock:
            hit = self._small.get(key)
            if hit is not None and hit[0] == sig:
                return hit[1]
        value = compute()
        with self._lock:
            self._small[key] = (sig, value)
        return value

    def run_cost(self, run_dir: Path, files: RunFiles) -> dict[str, Any]:
        """The run's (all, all) row of the project's cost table (``io.cost``: every session, failed
        ones included, plus the judge's spend; ``cost_usd`` is NaN unless every session was priced),
        cached until the committed files change."""
        from ray_knowsim.tables.cost import cost_table, read_cost_columns

        if not files.sessions:
            return {"cost_usd": float("nan"), "priced_sessions": 0, "n_sessions": 0}

        def compute() -> dict[str, Any]:
            from ray_knowsim.score.spend import spend_of_run

            scores = self.scores(run_dir, files)
            frame = read_cost_columns(files.session_table, scores.attach if scores.sets else None)
            try:  # the spend no row holds (cut off, superseded: io/spend.py) is the run's too
                spend = spend_of_run(RunReader.open(run_dir)) if files.follows_markers else None
            except RunDirError:
                spend = None
            return cost_table(frame, spend).iloc[-1].to_dict()

        return self._per_commit_state("cost", run_dir, files, compute)

    def run_verdicts(self, run_dir: Path, files: RunFiles) -> Any:
        """The verdicts the run's report shows (:func:`ray_knowsim.report.decisions.run_verdicts`:
        an adaptive run's own, else compare's over the run; None where there are none), cached
        until the committed files change: the run page counts them for its cost per decision."""
        from ray_knowsim.report.decisions import run_verdicts

        if not files.sessions:
            return None
        return self._per_commit_state("verdicts", run_dir, files, lambda: run_verdicts(self.require(run_dir)))

    def sanity(self, run_dir: Path, files: RunFiles) -> SanityReport:
        """The simulator's sanity checks (``io.sanity``) over the run's committed turn rows (at most
        MAX_TURN_ROWS of them) and session rows (a few columns, the judges' scores joined), cached
        until the committed files change: the index shows them beside a run's status, the run page
        on top."""

        def turn_batches() -> Iterator[pa.RecordBatch]:
            if files.turn_table is not None:
                yield from files.turn_table.scan(TURN_COLUMNS, batch_rows=4096)

        def session_batches() -> Iterator[pa.Table]:
            if files.session_table is None:
                return
            scores = self.scores(run_dir, files)
            for batch in files.session_table.scan(["session_id", "condition", *JUDGE_SCORES]):
                table = pa.Table.from_batches([batch])
                yield scores.attach(table) if scores.sets else table

        return self._per_commit_state("sanity", run_dir, files,
                                      lambda: check_batches(turn_batches(), session_batches(), MAX_TURN_ROWS))

    def listed_sanity(self, run_dir: Path, files: RunFiles) -> SanityReport:
        """The sanity warnings for the run list: the run's own ``tables/sanity`` when it was written
        after every committed file and score marker (the run's reduction wrote it from the same
        rows), else :meth:`sanity` (which reads the turn rows: seconds on a large run). The report
        read from the table carries the warnings only, not the counts behind them."""
        table_path = self.contained(Path(run_dir) / "tables" / "sanity.parquet")
        if table_path is not None and table_path.is_file():
            written = table_path.stat().st_mtime_ns
            newest = max([sig[1] for sig in files.signature()] + [sig[1] for sig in self._scores_signature(Path(run_dir))], default=0)
            if written >= newest:
                try:
                    rows = pq.read_table(table_path).to_pylist()
                    fields = {f.name for f in dataclasses.fields(SanityWarning)}
                    warnings = [SanityWarning(**{k: v for k, v in r.items() if k in fields and v is not None}) for r in rows]
                    return SanityReport(warnings, SanityInputs())
                except (OSError, TypeError, ValueError, pa.ArrowException):
                    pass  # an unreadable or older table: compute the checks
        return self.sanity(run_dir, files)

    def results(self, run_dir: Path, files: RunFiles, metric_columns: Sequence[str]) -> dict[str | None, Any]:
        """Each task's :class:`ray_knowsim.report.aggregate.RunSummary` of the run's counted
        sessions (scores joined), the report's own reduction, so the run page's tables are the
        report's (and the run's ``tables/``); cached until the committed files change."""
        from ray_knowsim.report.aggregate import RunSummary
        from ray_knowsim.report.aggregate import task_summaries

        if files.session_table is None or not files.sessions:
            return {}

        def batches() -> Iterator[pa.Table]:
            # one reduction step per ~64k rows, not per committed file (a run's files are small and
            # many; each step has a fixed cost per cell and item)
            scores = self.scores(run_dir, files)
            held: list[pa.RecordBatch] = []
            for batch in files.session_table.scan(RunSummary(tuple(metric_columns)).columns()):
                held.append(batch)
                if sum(b.num_rows for b in held) >= RESULT_ROWS:
                    yield _joined(held, scores)
                    held = []
            if held:
                yield _joined(held, scores)

        return self._per_commit_state(f"results:{','.join(metric_columns)}", run_dir, files,
                                      lambda: task_summaries(batches(), metric_columns))

    def audit(self, run_dir: Path, files: RunFiles) -> Any:
        """The run's simulator audit (``audit.run.audit_run``: every committed ok session), cached
        until the committed files change."""
        from ray_knowsim.audit.run import audit_run
        from ray_knowsim.io.rundir import RunReader

        return self._per_commit_state("audit", run_dir, files, lambda: audit_run(RunReader.open(self.require(run_dir))))

    def review_findings(self, run_dir: Path, files: RunFiles) -> dict[str, list[tuple[str, list[dict[str, Any]]]]]:
        """Session id -> [(score set, the LLM review's findings)] over every score set that holds a
        simulator review (score/judges.py), cached until the committed files or score sets change."""
        def compute() -> dict[str, list[tuple[str, list[dict[str, Any]]]]]:
            import json

            from ray_knowsim.io.rundir import RunReader
            from ray_knowsim.score.review import review_sets
            from ray_knowsim.score.store import ScoreDir, counted_sessions

            root = self.require(run_dir)
            sets = review_sets(root)
            out: dict[str, list[tuple[str, list[dict[str, Any]]]]] = {}
            if not sets:
                return out
            counted = counted_sessions(RunReader.open(root))
            for name in sets:
                table = ScoreDir(root, name).read(counted).select(["session_id", "extra_json"])
                for sid, extra in zip(table.column("session_id").to_pylist(), table.column("extra_json").to_pylist()):
                    found = json.loads(extra).get("review_findings") if extra else None
                    if found is not None:
                        out.setdefault(sid, []).append((name, found))
            return out

        return self._per_commit_state("review", run_dir, files, compute)

    def session_row(self, run_dir: Path, files: RunFiles, part: int, session_id: str) -> dict[str, Any] | None:
        """Every column of one session (scores joined), read from the file that holds it."""
        one = files.part(part)
        table = one.read(None, pc.field("session_id") == session_id) if one is not None else None
        if table is None or table.num_rows == 0:
            return None
        table = table.slice(0, 1)
        scores = self.scores(run_dir, files)
        if scores.sets:
            table = scores.attach(table)
        return table.to_pylist()[0]

    def turn_rows(self, files: RunFiles, part: int, session_id: str) -> list[dict[str, Any]]:
        """The turn rows of one session, in turn order (:meth:`RunFiles.turns_of`)."""
        if session_id in files.drop(part):
            return []
        return files.turns_of(part, session_id)


def _joined(batches: list[pa.RecordBatch], scores: RunScores) -> pa.Table:
    """Session batches as one table (one schema: files of one run may differ in a column's type),
    with the run's scores joined in."""
    table = pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="permissive")
    return scores.attach(table) if scores.sets else table


def _take(batches: Iterator[pa.RecordBatch], n: int) -> Iterator[pa.RecordBatch]:
    got = 0
    for batch in batches:
        if got >= n:
            return
        yield batch
        got += batch.num_rows


def column_or_null(table: pa.Table, name: str) -> pa.ChunkedArray | pa.Array:
    """``table[name]``, or an all-null column when the run has no such column."""
    return table.column(name) if name in table.column_names else pa.nulls(table.num_rows)


__all__ = ["Files", "OutsideRoots", "RunFiles", "column_or_null", "safe_relative"]
