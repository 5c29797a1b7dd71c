"""A sweep's committed pieces on disk: tasks write their own rows; readers follow commit markers.

Layout (inside the sweep folder)::

    rows/<piece>.<token>.parquet       the piece's rows (sweep.rescore.row_schema)
    partials/<piece>.<token>.parquet   its partial sums (sweep.aggregate.partials)
    committed/<piece>.json             the commit marker: block, settings range, token, fingerprint
    .tmp/                              files being written (never read)

Why this discipline (every committed dataset's, io/committed.py: temp file, fsync, rename, then the marker): the task
that re-scored a piece writes it, so no single process has to receive and write every row, and
the marker's rename is the one moment a piece becomes committed. A task killed before it leaves
files that no marker names; they are deleted at the next start. A piece committed twice (a Ray
retry of a task whose node died after committing, or the same work committed again under another
piece layout) is read once: readers take each (block, setting) from exactly one marker
(``pieces.assign``) and filter a file's rows to the settings it supplies. A marker that cannot be
parsed, or belongs to another sweep, is an error naming the file -- never skipped quietly.

``<piece>`` is ``Piece.name`` (block and settings range), so the same work has the same name in
every layout, and a re-commit of a piece replaces its marker.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ray_knowsim.cluster.bounded_fan_out import SharedDirError, require_visible
from ray_knowsim.io.committed import CommittedDataset, new_token, read_json_marker
from ray_knowsim.sweep.pieces import Piece, Range, assign, union
from ray_knowsim.sweep.store import read_json

MARKER_FORMAT = 1
TABLES = ("rows", "partials")
MARKERS = "committed"
MANIFEST = "sweep.json"
#: what the garbage collection may delete in the table folders: any Parquet file no marker names
#: (also an earlier layout's pieces); it runs only while no task of the sweep runs
_DATA_FILE = re.compile(r"^.+\.parquet$")


def dataset(out_dir: Path) -> CommittedDataset:
    """A sweep folder as a committed dataset (io/committed.py)."""
    return CommittedDataset(Path(out_dir), TABLES, _DATA_FILE)


class SweepCommitError(RuntimeError):
    """A sweep folder whose commits cannot be trusted (unreadable marker, another sweep's marker,
    an output folder a worker node cannot see); the message names the file or node."""


@dataclass
class Marker:
    """One committed piece (the JSON in ``committed/<piece>.json``)."""

    block: int
    start: int
    stop: int
    token: str
    fingerprint: str
    rows: int
    committed_at: float = 0.0
    node: str = ""  # where the piece was written: host name, and Ray node id inside a Ray task
    pid: int = 0  # and its process id
    seconds: float = 0.0  # re-scoring and partial sums
    write_seconds: float = 0.0
    format: int = MARKER_FORMAT

    @property
    def piece(self) -> Piece:
        return Piece(self.block, self.start, self.stop)

    def files(self) -> dict[str, str]:
        return {t: f"{t}/{self.piece.name}.{self.token}.parquet" for t in TABLES}


def check_visible(out_dir: Path, fingerprint: str) -> None:
    """Refuse to write where the driver cannot read (:func:`ray_knowsim.cluster.bounded_fan_out.require_visible`,
    the one task-side check): a worker node that does not mount the sweep folder would otherwise
    create a private copy of it and its rows would never be seen."""
    try:
        require_visible(out_dir / MANIFEST, "fingerprint", fingerprint, what="the sweep's output folder",
                        doc="docs/sweep.md")
    except SharedDirError as exc:
        raise SweepCommitError(f"{exc} (or the folder belongs to another sweep)") from exc


def commit_piece(out_dir: Path, fingerprint: str, piece: Piece, rows: pa.Table, partials: pa.Table, *,
                 seconds: float = 0.0, node: str | None = None) -> Marker:
    """Write a piece's two tables, then its marker (the commit). Called by the task that re-scored
    it; ``node`` names where (default: the host name)."""
    t0 = time.perf_counter()
    marker = Marker(piece.block, piece.start, piece.stop, new_token(), fingerprint, rows.num_rows,
                    node=node or socket.gethostname(), pid=os.getpid(), seconds=round(seconds, 4))  # fmt: skip
    files = marker.files()

    def text() -> str:  # once the tables are in place: the marker records how long they took
        marker.write_seconds = round(time.perf_counter() - t0, 4)
        marker.committed_at = time.time()
        return _to_json(marker)

    dataset(out_dir).commit([(files["partials"], partials), (files["rows"], rows)], f"{MARKERS}/{piece.name}.json", text)
    return marker


def _to_json(marker: Marker) -> str:
    return json.dumps(asdict(marker), sort_keys=True, indent=1)


@dataclass
class Commits:
    """What a sweep folder holds: valid markers, and markers whose files are gone."""

    markers: list[Marker]
    broken: list[Marker]

    def covered(self) -> dict[int, list[Range]]:
        out: dict[int, list[Range]] = {}
        for m in self.markers:
            out.setdefault(m.block, []).append((m.start, m.stop))
        return {b: union(r) for b, r in out.items()}

    def sources(self) -> list[tuple[Marker, list[Range]]]:
        """(marker, the settings ranges to read from its files), for markers that supply any."""
        by_name = {m.piece.name: m for m in self.markers}
        supply = assign([(m.piece.name, m.block, (m.start, m.stop)) for m in self.markers])
        return [(by_name[name], ranges) for name, ranges in sorted(supply.items()) if ranges]


def read_commits(out_dir: Path, fingerprint: str | None = None) -> Commits:
    """Every marker of the folder (``fingerprint``: the sweep's; default: the manifest's)."""
    out_dir = Path(out_dir)
    if fingerprint is None:
        fingerprint = read_json(out_dir / MANIFEST).get("fingerprint")
    markers, broken = [], []
    folder = out_dir / MARKERS
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            marker = Marker(**read_json_marker(path, _unreadable))
        except TypeError as exc:
            raise _unreadable(path, f"is not a piece marker ({exc})") from exc
        if marker.fingerprint != fingerprint:
            raise SweepCommitError(f"commit marker {path} belongs to another sweep (fingerprint {marker.fingerprint}, "
                                   f"this sweep {fingerprint}); rerun with --fresh or choose another output")  # fmt: skip
        if path.stem != marker.piece.name:
            raise SweepCommitError(f"commit marker {path} names piece {marker.piece.name}")
        (broken if dataset(out_dir).missing(marker.files().values()) else markers).append(marker)
    return Commits(markers, broken)


def _unreadable(path: Path, why: str) -> SweepCommitError:
    return SweepCommitError(f"commit marker {path} {why}; move it away to redo that piece")


def drop_broken(out_dir: Path, commits: Commits) -> list[str]:
    """Remove markers whose files are gone (their pieces are redone); returns their names, which
    the caller records in the manifest."""
    names = []
    for m in commits.broken:
        dataset(out_dir).remove(Path(out_dir) / MARKERS / f"{m.piece.name}.json")
        names.append(m.piece.name)
    commits.broken = []
    return names


def collect_garbage(out_dir: Path, commits: Commits) -> int:
    """Delete table files no marker names (interrupted or superseded commits) and the temp folder.
    Only while no task of this sweep runs (the driver calls it before submitting and after the last)."""
    named = [f for m in commits.markers + commits.broken for f in m.files().values()]
    return dataset(out_dir).collect_garbage(named, min_age_s=0.0).leftover_files


def _in_ranges(ranges: list[Range]) -> ds.Expression:
    expr = None
    for a, b in ranges:
        part = (pc.field("setting") >= a) & (pc.field("setting") < b)
        expr = part if expr is None else expr | part
    return expr


def read_table(out_dir: Path, table: str, *, columns: list[str] | None = None, settings: list[int] | None = None,
               fingerprint: str | None = None) -> pa.Table | None:
    """The committed ``table`` ("rows" or "partials"): each (block, setting) once, whatever the
    pieces and however often they were committed (None: nothing committed). ``settings`` keeps
    only those settings."""
    out_dir = Path(out_dir)
    commits = read_commits(out_dir, fingerprint)
    whole, parts = [], []
    for marker, ranges in commits.sources():
        path = str(out_dir / marker.files()[table])
        if ranges == [(marker.start, marker.stop)]:
            whole.append(path)
        else:
            parts.append((path, _in_ranges(ranges)))
    wanted = ds.field("setting").isin(settings) if settings is not None else None
    tables = []
    for files, flt in [(whole, None)] + [([p], f) for p, f in parts]:
        if not files:
            continue
        both = flt if wanted is None else (wanted if flt is None else flt & wanted)
        tables.append(ds.dataset(files, format="parquet").to_table(columns=columns, filter=both))
    if not tables:
        return None
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")


__all__ = [
    "MANIFEST",
    "MARKERS",
    "Commits",
    "Marker",
    "SweepCommitError",
    "check_visible",
    "collect_garbage",
    "commit_piece",
    "drop_broken",
    "read_commits",
    "read_table",
]
