"""The ``scores/`` dataset of a run directory and the join that shows scores beside sessions.

Layout::

    scores/index.json                                  {"primary": NAME}: the set that fills ``iq`` & co.
    scores/<name>/judge.json                           who judged: model key, model entry, judges
    scores/<name>/<shard>.<token>.parquet              one ScoreRow per finished session of one commit
    scores/<name>/<shard>.<sessions token>.json        the score marker of the simulation commit it judged

The unit of scoring is a simulation commit (``<shard>.<token>``, io/commits.py): its scores are
committed like its rows (file renamed into place, then the marker). A marker with judge errors
is judged again. Markers of earlier releases (``<shard>.json``, one per shard) are still read:
they name the commit they judged by its token. Only the scores of sessions the run's reader
counts from that commit are joined (:meth:`RunScores.load`): a session rerun since, in another
commit, is judged there. Session and turn files are never rewritten: re-judging leaves the
simulation byte-identical. A score set is a committed dataset (io/committed.py): the score file is
written, fsynced and renamed, then the marker; the file it replaces goes after; score files no
marker names are collected (:meth:`ScoreDir.collect_garbage`).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from ray_knowsim.io.commits import LEFTOVER_MIN_AGE_S, MarkerError
from ray_knowsim.io.committed import CommittedDataset, Garbage, new_token, read_json_marker
from ray_knowsim.io.parquet import arrow_schema, atomic_write_text, rows_table
from ray_knowsim.io.rundir import RunReader, has_commit_markers
from ray_knowsim.schema.results import JUDGE_DRIFT, token_columns

SCORES = "scores"
#: a score file: ``<shard>.<token>.parquet`` (tokens are hex digits, or decimal seconds then hex)
SCORE_FILE = re.compile(r"^[A-Za-z0-9_-]+\.[0-9a-f]{8,}\.parquet$")


class ScoreRow(BaseModel):
    """One session's scores from one score set (``name``)."""

    model_config = ConfigDict(extra="forbid")
    session_id: str
    name: str  # the score set, e.g. the judge model key
    judge_model: str
    judges: str  # comma-separated registered judge names applied
    iq: float | None = None
    judge_information_calibration: float | None = None
    judge_perceived_overload: float | None = None
    judge_perceived_learning: float | None = None
    judge_early_stop_turn: int | None = None  # baselines: 1-based turn the termination judge stops at
    judge_early_stop_reason: str | None = None
    judge_error: str | None = None  # "<judge>: <named failure>; ..." (None: every judge answered)
    # the judges' drift, summed over the judges: what was normalised to read accepted answers
    # (e.g. "7/10" read as 0.7), answers refused (each re-asked within the attempts, or failed), and
    # what was accepted but odd (e.g. an ending turn past the last message, read as the last)
    judge_repairs: int = 0
    judge_refusals: int = 0
    judge_warnings: int = 0
    judge_drift_json: str = "{}"  # {judge: {"repairs"|"refusals"|"warnings": [text, ...]}}, non-empty lists only
    judge_calls: int = 0
    tokens_judge: int = 0
    prompt_tokens_judge: int = 0
    completion_tokens_judge: int = 0
    cached_prompt_tokens_judge: int = 0
    judge_cost_usd: float | None = None  # None: the judge model has no price
    judge_prompt_versions: str = "{}"
    extra_json: str | None = None  # values of judges from outside the built-in columns


SCORE_SCHEMA = arrow_schema(ScoreRow)
#: score columns that fill the session columns of the same name for the primary set
FILLED = (
    "iq", "judge_information_calibration", "judge_perceived_overload", "judge_perceived_learning",
    *token_columns("judge").values(), *JUDGE_DRIFT,
)  # fmt: skip
#: columns added per score set: ``<column>`` for the primary, ``<column>@<name>`` for the others
ADDED = ("judge_error", "judge_calls", "judge_cost_usd")


@dataclass
class ScoreMarker:
    shard_id: str
    name: str
    token: str  # of this score file
    sessions_token: str  # of the simulation commit that was judged
    n_sessions: int
    n_errors: int
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def file(self) -> str:
        return f"{self.shard_id}.{self.token}.parquet"

    @property
    def commit(self) -> str:
        """The simulation commit judged (``<shard>.<token>``, io/commits.py)."""
        return f"{self.shard_id}.{self.sessions_token}"


class ScoreDir:
    """``RUN_DIR/scores/<name>/``: commit, resume and read one score set."""

    def __init__(self, run_root: str | Path, name: str) -> None:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"score set name {name!r}: use letters, digits and _ . : + -")
        self.run_root = Path(run_root)
        self.name = name
        self.root = self.run_root / SCORES / name
        self.tmp = self.run_root / ".tmp"
        self.dataset = CommittedDataset(self.root, (".",), SCORE_FILE, self.tmp)

    def _marker_files(self) -> dict[str, list[tuple[Path, ScoreMarker]]]:
        """Commit -> its marker files, each read once (a commit judged by an earlier release may
        also have a ``<shard>.json``; the commit-named marker wins)."""
        out: dict[str, list[tuple[Path, ScoreMarker]]] = {}
        if not self.root.is_dir():
            return out
        for path in sorted(self.root.glob("*.json")):
            if path.name == "judge.json":
                continue
            marker = self._read(path)
            out.setdefault(marker.commit, []).append((path, marker))
        return out

    def _read(self, path: Path) -> ScoreMarker:
        data = read_json_marker(path, _not_a_score_marker)
        try:
            return ScoreMarker(**data)
        except TypeError as exc:
            raise _not_a_score_marker(path, f"{type(exc).__name__}: {exc}") from exc

    def markers(self) -> dict[str, ScoreMarker]:
        """Commit (``<shard>.<token>`` of the simulation) -> its score marker, whose file exists."""
        return self._live(self._marker_files())

    def _live(self, found: dict[str, list[tuple[Path, ScoreMarker]]]) -> dict[str, ScoreMarker]:
        out: dict[str, ScoreMarker] = {}
        for commit, pairs in found.items():
            for path, marker in sorted(pairs, key=lambda pm: pm[0].name == f"{commit}.json"):  # the commit-named one wins
                if (self.root / marker.file).is_file():
                    out[commit] = marker
        return out

    def is_done(self, commit: str, markers: dict[str, ScoreMarker] | None = None) -> bool:
        """``markers``: the set's markers when the caller already read them (one directory read)."""
        m = (self.markers() if markers is None else markers).get(commit)
        return m is not None and m.n_errors == 0

    def write_info(self, info: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.root / "judge.json", json.dumps(info, sort_keys=True, indent=1), self.tmp)
        index = self.run_root / SCORES / "index.json"
        if not index.is_file():  # the first score set of a run is the one its tables show
            atomic_write_text(index, json.dumps({"primary": self.name}), self.tmp)

    def make_primary(self) -> None:
        """This set fills ``iq`` & co. from now on (the tables need re-reducing to show it)."""
        if not self.markers():
            raise ValueError(f"score set {self.name!r} holds no committed scores")
        atomic_write_text(self.run_root / SCORES / "index.json", json.dumps({"primary": self.name}), self.tmp)

    def info(self) -> dict[str, Any]:
        path = self.root / "judge.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def commit(self, shard_id: str, sessions_token: str, rows: list[ScoreRow], summary: dict[str, Any],
               old: ScoreMarker | None = None) -> ScoreMarker:
        """Commit the scores of simulation commit ``<shard_id>.<sessions_token>``; ``old``: its
        previous score marker when the caller already has it (its file is replaced)."""
        commit = f"{shard_id}.{sessions_token}"
        old = old if old is not None else self.markers().get(commit)
        marker = ScoreMarker(
            shard_id=shard_id, name=self.name, token=new_token(),
            sessions_token=sessions_token, n_sessions=len(rows), n_errors=sum(r.judge_error is not None for r in rows),
            summary=summary,
        )  # fmt: skip
        self.dataset.commit([(marker.file, rows_table(rows, SCORE_SCHEMA))], f"{commit}.json",
                            json.dumps(asdict(marker), sort_keys=True, indent=1))
        legacy = self.root / f"{shard_id}.json"  # an earlier release's marker name for the same commit
        if legacy.is_file() and self._read(legacy).commit == commit:
            self.dataset.remove(legacy)
        if old is not None and old.token != marker.token:
            self.dataset.remove(None, [old.file])
        return marker

    def collect_garbage(self, min_age_s: float = LEFTOVER_MIN_AGE_S) -> Garbage:
        """Delete score files no marker names (a commit interrupted before its marker, a replaced
        file a crash left), once ``min_age_s`` old: a scorer may still be committing; and markers
        outranked by their commit's commit-named marker, with their files. Every marker is read
        first (one that cannot be read stops it, deleting nothing). The temp folder is the run's:
        the run's collection cleans it."""
        found = self._marker_files()
        live = self._live(found)
        outranked = [(path, m) for commit, pairs in found.items() if commit in live for path, m in pairs if m is not live[commit]]
        for path, m in outranked:  # an earlier release's marker of a commit judged again (a crash kept it)
            self.dataset.remove(path, [] if m.file == live[m.commit].file else [m.file])
        out = self.dataset.collect_garbage([m.file for m in live.values()], min_age_s, clean_tmp=False)
        out.superseded_commits = len(outranked)
        return out

    def kept_rows(self, commit: str, marker: ScoreMarker | None = None) -> dict[str, ScoreRow]:
        """A commit's scores that need no redo (no judge error), by session id.
        ``marker``: the commit's score marker when the caller already read it."""
        m = marker if marker is not None else self.markers().get(commit)
        if m is None:
            return {}
        rows = pq.read_table(self.root / m.file, schema=SCORE_SCHEMA).to_pylist()
        # a column the file predates reads as null: the row's default stands
        return {r["session_id"]: ScoreRow(**{k: v for k, v in r.items() if v is not None}) for r in rows if r["judge_error"] is None}

    def read(self, counted: Mapping[str, Any] | None = None) -> pa.Table:
        """The set's score rows; with ``counted`` (simulation commit -> the session ids the run
        counts from it), only those: scores of a superseded row of a session are not its scores."""
        parts = []
        for commit, m in self.markers().items():
            if counted is not None and commit not in counted:
                continue
            table = pq.read_table(self.root / m.file, schema=SCORE_SCHEMA)
            if counted is not None:
                keep = pa.array(sorted(counted[commit]), pa.string())
                table = table.filter(pc.is_in(table.column("session_id"), value_set=keep))
            parts.append(table)
        return pa.concat_tables(parts) if parts else SCORE_SCHEMA.empty_table()


def _not_a_score_marker(path: Path, why: str) -> MarkerError:
    return MarkerError(path, f"is not a score marker ({why})")


def counted_sessions(reader: Any) -> dict[str, set[str]] | None:
    """Simulation commit -> the session ids the run counts from it (None: a plain layout, whose
    scores are taken as they are)."""
    if reader.index is None:
        return None
    out: dict[str, set[str]] = {}
    for commit in reader.index.live():
        out[commit.name] = set(commit.sessions) - reader.index.superseded[commit.name]
    return out


def score_names(run_root: str | Path) -> list[str]:
    root = Path(run_root) / SCORES
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def primary_name(run_root: str | Path) -> str | None:
    index = Path(run_root) / SCORES / "index.json"
    return json.loads(index.read_text(encoding="utf-8"))["primary"] if index.is_file() else None


@dataclass
class RunScores:
    """Every score set of a run, ready to join onto session batches."""

    primary: str | None
    sets: dict[str, pa.Table]

    @classmethod
    def load(cls, run_root: str | Path, reader: Any = None) -> "RunScores":
        """Every set's scores of the sessions the run counts (``reader``: the run's
        :class:`~ray_knowsim.io.rundir.RunReader` when the caller has it open)."""
        names = score_names(run_root)
        if not names:
            return cls(primary_name(run_root), {})
        root = Path(run_root)
        if reader is None and ((root / "sessions").exists() or has_commit_markers(root)):
            reader = RunReader.open(root)
        counted = counted_sessions(reader) if reader is not None else None  # a plain layout: scores as they are
        return cls(primary_name(run_root), {n: ScoreDir(run_root, n).read(counted) for n in names})

    def columns(self) -> list[str]:
        """The columns :meth:`attach` adds to (or fills in) a session batch."""
        out = [*FILLED, "early_stop_turn", "early_stop_reason", *ADDED]
        for name in self.sets:
            if name != self.primary:
                out += [f"{c}@{name}" for c in (*FILLED, *ADDED)]
        return out

    def attach(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """``batch`` (session rows with a ``session_id`` column) with the scores joined in: the
        primary set fills ``iq`` & co. (and a baseline's ``early_stop_turn``/``reason`` where the
        simulation left them empty) and adds ``judge_error``; every other set adds
        ``<column>@<name>``. Sessions without a score get nulls."""
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        ids = table.column("session_id")
        for name, scores in self.sets.items():
            idx = pc.index_in(ids, value_set=scores.column("session_id"))
            primary = name == self.primary
            for col in (*FILLED, *ADDED):
                values = scores.column(col).take(idx)
                target = col if primary else f"{col}@{name}"
                table = _put(table, target, values)
            if primary:
                for sim_col, col in (("early_stop_turn", "judge_early_stop_turn"), ("early_stop_reason", "judge_early_stop_reason")):
                    judged = scores.column(col).take(idx)
                    if sim_col in table.column_names and not pa.types.is_null(table.schema.field(sim_col).type):
                        have = table.column(sim_col)
                        judged = pc.if_else(pc.is_valid(have), have, judged.cast(have.type))
                    table = _put(table, sim_col, judged)
        return table


#: count columns: a session without a score spent 0 on them (others stay empty)
COUNTS = frozenset({*token_columns("judge").values(), "judge_calls", *JUDGE_DRIFT})


def _put(table: pa.Table, name: str, values: Any) -> pa.Table:
    if name.split("@")[0] in COUNTS:
        values = pc.fill_null(values, pa.scalar(0, values.type))
    if name in table.column_names:
        i = table.column_names.index(name)
        target = table.schema.field(i)
        if pa.types.is_null(target.type):  # an all-empty column read without a schema: take the scores' type
            return table.set_column(i, name, values)
        values = values.cast(target.type)
        if not target.nullable or pa.types.is_integer(target.type) and name.startswith("tokens_"):
            values = pc.fill_null(values, pa.scalar(0, target.type))  # a count without a score is 0
        return table.set_column(i, name, values)
    return table.append_column(name, values)


__all__ = ["ADDED", "FILLED", "SCORES", "SCORE_SCHEMA", "RunScores", "ScoreDir", "ScoreMarker", "ScoreRow", "counted_sessions", "primary_name", "score_names"]
