"""What lies under the viewer's folders: run directories, sweeps and comparisons, and what each run
amounts to (status, n of N planned sessions, models, cost, time).

A folder is a **run** when it holds ``manifest.json`` or ``sessions/``, a **sweep** when it holds
``sweep.json``, a **comparison** when it holds ``compare.json`` or ``leaderboard.parquet``; none of
them is searched further. Entries are named by a short hash of their resolved path, so URLs never
carry a file path.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from ray_knowsim.tables.outcomes import TRUNCATION_COLUMNS
from ray_knowsim.schema.metrics import names as metric_names
from ray_knowsim.schema.results import SESSION_METRICS
from ray_knowsim.io.rundir import Completeness, RunStatus, manifest_facts, status_words
from ray_knowsim.tables.sanity import SanityReport
from ray_knowsim.schema.price import usd_text
from ray_knowsim.view.data import Files, RunFiles

Kind = Literal["run", "sweep", "compare"]
RUN_MARKS = frozenset({"manifest.json", "sessions"})
SWEEP_MARKS = frozenset({"sweep.json"})
COMPARE_MARKS = frozenset({"compare.json", "leaderboard.parquet"})


def classify(names: set[str]) -> Kind | None:
    if names & SWEEP_MARKS:
        return "sweep"
    if names & COMPARE_MARKS:
        return "compare"
    if names & RUN_MARKS:
        return "run"
    return None


def entry_id(path: Path) -> str:
    return hashlib.sha256(str(path).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Entry:
    kind: Kind
    id: str
    path: Path  # resolved
    label: str  # the path relative to its root, prefixed by the root's folder name


def discover(files: Files, max_depth: int = 4) -> list[Entry]:
    """Every run, sweep and comparison under the roots (sorted by kind, then label)."""
    out = []
    for folder, names in files.folders(lambda names: classify(names) is None, max_depth=max_depth):
        kind = classify(names)
        if kind is not None:
            out.append(Entry(kind, entry_id(folder), folder, files.root_label(folder)))
    order = {"run": 0, "sweep": 1, "compare": 2}
    return sorted(out, key=lambda en: (order[en.kind], en.label))


# ----------------------------------------------------------------------------- runs

#: the session columns the viewer reads (those a run lacks are skipped)
SESSION_COLUMNS = (
    "task", "item_id", "knowledge_level", "condition", "assistant_model", "simulator", "trial", "status",
    "error", "error_detail", "failure_class", "attempt", "turns", "stop_reason", "early_stop_turn", "early_stop_reason",
    *SESSION_METRICS, *metric_names(source="judge"),  # the metric catalogue's (ray_knowsim.schema.metrics)
    "llm_calls", "llm_truncations", *TRUNCATION_COLUMNS, "extractor_repairs", "extractor_refusals", "cost_usd",
)  # fmt: skip


@dataclass
class RunInfo:
    entry: Entry
    name: str
    status: str  # complete | with failures | all sessions failed | interrupted | stopped on failures | incomplete | failed | running? | unknown
    status_detail: str
    planned: int | None  # sessions the plan holds (None: no manifest)
    committed: int
    ok: int
    failed: int
    models: list[str]
    conditions: list[str]
    cost_usd: float | None  # None: some session (or its judge) used a model without a price (io.cost's rule)
    priced_sessions: int
    seconds: float | None
    created_at: str | None
    finished_at: str | None
    config_hash: str | None
    manifest: dict[str, Any] = field(default_factory=dict)
    follows_markers: bool = True
    refused_files: list[str] = field(default_factory=list)
    files: RunFiles | None = None  # where each session row came from (the conversation page reads its turns there)
    sanity: SanityReport | None = None  # the simulator's checks (io.sanity) of the committed rows; None: nothing committed
    sessions: str = ""  # n of N planned sessions in io.rundir.sessions_text's words (the run command's own)
    per_decision: str = ""  # the run page's cost per decision (report.per_decision's sentence); "": not computed or none

    @property
    def sanity_flag(self) -> tuple[str, str] | None:
        """(severity, one line) when the simulator's checks warn, in the words of the run's final
        line (``<COMPONENT> NOT WORKING? ...``, then the milder ones); None when no check fired."""
        if self.sanity is None or not self.sanity.warnings:
            return None
        from ray_knowsim.tables.outcome_tables import final_line_parts, sanity_table

        line = " · ".join(final_line_parts({"sanity": sanity_table(self.sanity)}))
        return ("severe" if self.sanity.severe else "warning"), line

    @property
    def cost_text(self) -> str:
        return usd_text(self.cost_usd, self.priced_sessions, self.committed)

    @property
    def progress(self) -> str:
        return f"{self.committed:,} of {self.planned:,}" if self.planned is not None else f"{self.committed:,} (no plan recorded)"


def run_status(manifest: dict[str, Any] | None, completeness: Completeness, committed: int, failed: int) -> tuple[str, str]:
    """(label, one line on why) for a run: io.rundir's one word set (:func:`ray_knowsim.io.rundir.status_words`),
    the same word the run command's final line and the report say."""
    return status_words(manifest, completeness, committed, failed)


def model_names(manifest: dict[str, Any]) -> list[str]:
    """``key (backend model)`` for each model entry of the run's config."""
    out = []
    for key, entry in ((manifest.get("config") or {}).get("models") or {}).items():
        if not isinstance(entry, dict):
            continue
        backend, model = entry.get("backend", "?"), entry.get("model") or entry.get("path") or ""
        out.append(f"{key} ({backend}{' ' + str(model) if model and model != key else ''})")
    return out


def _manifest(files: Files, entry: Entry) -> tuple[dict[str, Any] | None, str | None]:
    manifest = files.read_json(entry.path / "manifest.json")
    manifest = manifest if isinstance(manifest, dict) else None
    return manifest, (manifest.get("config_hash") if manifest else None)


def run_info(files: Files, entry: Entry) -> tuple[RunInfo, pa.Table]:
    """The run's summary and its projected session table (see :data:`SESSION_COLUMNS`)."""
    manifest, config_hash = _manifest(files, entry)
    table, run_files = files.sessions(entry.path, SESSION_COLUMNS, config_hash)
    status = table.column("status") if "status" in table.column_names else pa.nulls(table.num_rows, pa.string())
    ok = pc.sum(pc.equal(status, "ok")).as_py() or 0
    conditions = ((manifest or {}).get("plan") or {}).get("conditions") or (
        sorted(str(c) for c in pc.unique(table.column("condition")).to_pylist() if c is not None)
        if "condition" in table.column_names else []
    )  # fmt: skip
    return _info(files, entry, manifest, run_files, table.num_rows, ok, conditions), table


def index_info(files: Files, entry: Entry) -> RunInfo:
    """The index page's row of a run, without reading its session table: the counts are the
    reader's :class:`RunStatus` (from the commit markers; a plain layout's status column), the
    conditions the manifest's plan (none without one: the index does not show them). A run the
    reader refused, or with files the viewer does not read (outside its folders), is counted
    from the rows it does read (:func:`run_info`)."""
    manifest, config_hash = _manifest(files, entry)
    run_files = files.run_files(entry.path, config_hash)
    st = run_files.status
    if st is None or run_files.error or run_files.refused:
        return run_info(files, entry)[0]
    conditions = ((manifest or {}).get("plan") or {}).get("conditions") or []
    return _info(files, entry, manifest, run_files, st.n_committed, st.n_ok, conditions, full_sanity=False)


def _info(files: Files, entry: Entry, manifest: dict[str, Any] | None, run_files: RunFiles, committed: int, ok: int,
          conditions: list[str], full_sanity: bool = True) -> RunInfo:
    """``full_sanity``: compute the simulator's checks from the rows (the run page); False: the
    run's own tables/sanity where it is current (the run list, :meth:`Files.listed_sanity`)."""
    config_hash = manifest.get("config_hash") if manifest else None
    status_of = run_files.status or RunStatus(root=entry.path, layout="plain", config_hash=config_hash, n_committed=committed,
                                              n_ok=ok, n_failed=committed - ok, **manifest_facts(manifest, entry.path))
    completeness = status_of.completeness()
    planned = completeness.n_planned
    label, detail = run_status(manifest, completeness, committed, committed - ok)
    invocations = (manifest or {}).get("invocations") or []
    seconds = [((inv.get("totals") or {}).get("seconds")) for inv in invocations]
    if run_files.error:
        label, detail = "unreadable", run_files.error
    if run_files.refused:
        detail += (f"; {len(run_files.refused)} commit marker(s) name files outside the viewer's folders: "
                   "their rows were not read")
    cost = files.run_cost(entry.path, run_files)
    sanity = (files.sanity if full_sanity else files.listed_sanity)(entry.path, run_files) if committed and not run_files.error else None
    priced, total_cost = int(cost.get("priced_sessions") or 0), cost.get("cost_usd")
    return RunInfo(
        entry=entry,
        name=(manifest or {}).get("name") or entry.path.name,
        status=label,
        status_detail=detail,
        planned=planned,
        committed=committed,
        ok=ok,
        failed=committed - ok,
        models=model_names(manifest or {}),
        conditions=list(conditions),
        cost_usd=None if total_cost is None or total_cost != total_cost else float(total_cost),
        priced_sessions=priced,
        seconds=sum(s for s in seconds if isinstance(s, (int, float))) if any(isinstance(s, (int, float)) for s in seconds) else None,
        created_at=(manifest or {}).get("created_at"),
        finished_at=invocations[-1].get("finished_at") if invocations else None,
        config_hash=config_hash,
        manifest=manifest or {},
        follows_markers=run_files.follows_markers,
        refused_files=run_files.refused,
        files=run_files,
        sanity=sanity,
        sessions=completeness.sessions,
    )


__all__ = ["Entry", "RunInfo", "SESSION_COLUMNS", "classify", "discover", "entry_id", "index_info", "model_names", "run_info",
           "run_status"]
