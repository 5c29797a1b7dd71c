"""What each URL shows: gather the data (through ``view.data`` only) and hand it to a page.

Handlers are plain functions run on the server's single worker thread (``view.server``); they
raise aiohttp's HTTP errors for what cannot be shown. Entries are looked up by id; an id not
found triggers one rescan of the folders (a run started after the viewer shows up).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from aiohttp import web

from ray_knowsim.report.banner import manifest_banner
from ray_knowsim.report.explain import conversation_view
from ray_knowsim.report.per_decision import run_per_decision
from ray_knowsim.report.plots import trajectory_plot
from ray_knowsim.view import pages_outputs, pages_runs
from ray_knowsim.view.data import Files, safe_relative
from ray_knowsim.view.discover import Entry, RunInfo, discover, index_info, run_info
from ray_knowsim.view.html import result_table
from ray_knowsim.view.query import facets, failure_counts, neighbours, page_of, parse_query
from ray_knowsim.view.results import METRIC_COLUMNS, results_html
from ray_knowsim.view.verdicts import boards, verdicts

#: what /file/ serves: suffix -> content type (anything else is refused)
FILE_TYPES = {
    ".png": "image/png",
    ".csv": "text/csv",
    ".md": "text/plain",
    ".json": "application/json",
    ".txt": "text/plain",
    ".html": "text/html",
}
#: a run's tables in the order a reader wants them (others follow, by name)
TABLE_ORDER = ("marginal", "level_means", "ranks", "failure_modes", "cost")
RESCAN_SECONDS = 3.0
#: HTML files found in run folders (the report, compare's leaderboard): no script at all, their
#: own inline styles, a unique origin
SANDBOXED_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"


@dataclass
class ViewState:
    files: Files
    max_depth: int = 4
    _entries: dict[str, Entry] = field(default_factory=dict)
    _scanned: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def entries(self, fresh: bool = False) -> list[Entry]:
        with self._lock:
            if fresh or time.monotonic() - self._scanned > RESCAN_SECONDS:
                self._entries = {en.id: en for en in discover(self.files, self.max_depth)}
                self._scanned = time.monotonic()
            return list(self._entries.values())

    def entry(self, kind: str, ident: str | None) -> Entry:
        for fresh in (False, True):
            found = {en.id: en for en in self.entries(fresh)}.get(ident or "")
            if found is not None and (kind == "any" or found.kind == kind):
                return found
        raise web.HTTPNotFound(text=f"no {kind if kind != 'any' else 'entry'} with id {ident!r} under the viewer's folders")


def html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html", charset="utf-8")


def _run(state: ViewState, request: web.Request) -> tuple[RunInfo, pa.Table]:
    return run_info(state.files, state.entry("run", request.match_info.get("id")))


# ----------------------------------------------------------------------------- index


def index(state: ViewState, request: web.Request) -> web.Response:
    entries = state.entries(fresh=True)
    runs, broken, sweeps, compares = [], [], [], []
    for en in entries:
        if en.kind == "run":
            try:
                runs.append(index_info(state.files, en))  # counts from the markers, no session table read
            except (OSError, ValueError, pa.ArrowException) as exc:
                broken.append((en, f"unreadable: {exc}"))
        elif en.kind == "sweep":
            sweeps.append((en, _json(state, en.path / "sweep.json")))
        else:
            compares.append((en, _json(state, en.path / "compare.json")))
    return html(pages_outputs.index([str(r) for r in state.files.roots], runs, broken, sweeps, compares))


def _json(state: ViewState, path: Path) -> dict[str, Any]:
    data = state.files.read_json(path)
    return data if isinstance(data, dict) else {}


# ----------------------------------------------------------------------------- a run


def _value_counts(table: pa.Table, column: str, order: list[str] | None = None) -> dict[str, int]:
    if column not in table.column_names or not table.num_rows:
        return {}
    counts = {str(r["values"]): int(r["counts"]) for r in pc.value_counts(table.column(column)).to_pylist() if r["values"] is not None}
    keys = [k for k in (order or []) if k in counts] + sorted(k for k in counts if k not in (order or []))
    return {k: counts[k] for k in keys}


def _related_to_run(state: ViewState, run: Entry) -> list[tuple[str, str, str]]:
    out = []
    for en in state.entries():
        if en.kind == "sweep":
            src = pages_outputs.sweep_source(_json(state, en.path / "sweep.json"))
            if src is not None and state.files.contained(src) == run.path:
                out.append(("sweep", en.label, pages_outputs.entry_url(en)))
        elif en.kind == "compare":
            if run in _compared_runs(state, en):
                out.append(("comparison", en.label, pages_outputs.entry_url(en)))
    report = state.files.list_files(run.path / "report", (".html",))
    out += [("report", f"report/{p.name}", pages_outputs.file_url(run, f"report/{p.name}")) for p in report]
    return out


def _compared_runs(state: ViewState, compare: Entry) -> list[Entry]:
    """The run entries a comparison read (its recorded paths: absolute, or matched by their tail)."""
    runs = [en for en in state.entries() if en.kind == "run"]
    out = []
    for rec in _json(state, compare.path / "compare.json").get("runs") or []:
        raw = Path(str(rec.get("path") or ""))
        parts = [p for p in raw.parts if p not in ("..", ".", "/")]
        for en in runs:
            if (raw.is_absolute() and state.files.contained(raw) == en.path) or (parts and en.path.parts[-len(parts):] == tuple(parts)):
                out.append(en)
                break
    return out


def run_overview(state: ViewState, request: web.Request) -> web.Response:
    info, table = _run(state, request)
    fv = facets(table)
    counts = {"level": _value_counts(table, "knowledge_level", fv["level"]), "condition": _value_counts(table, "condition")}
    tables = []
    paths = state.files.list_files(info.entry.path / "tables", (".parquet",))
    rank = {name: k for k, name in enumerate(TABLE_ORDER)}
    for path in sorted(paths, key=lambda p: (rank.get(p.stem, len(rank)), p.stem)):
        data, total = state.files.read_table(path)
        tables.append((path.stem, result_table(data, total, f"table-{path.stem}-grid")))
    estimate = state.files.read_json(info.entry.path / "estimate.json")
    banner = manifest_banner(info.manifest) if info.manifest else None
    summaries = state.files.results(info.entry.path, info.files, METRIC_COLUMNS) if info.files is not None else {}
    info.per_decision = _per_decision(state, info)
    audit = state.files.audit(info.entry.path, info.files) if info.files is not None and table.num_rows else None
    return html(pages_runs.overview(info, banner, counts, failure_counts(table), tables,
                                    estimate if isinstance(estimate, dict) else None, _related_to_run(state, info.entry), info.sanity,
                                    results_html(summaries), audit))


def _per_decision(state: ViewState, info: Any) -> str:
    """The run's cost per decision in the report's and the terminal's sentence
    (:func:`ray_knowsim.report.per_decision.run_per_decision`); "" where it has no verdicts, and
    for a run with files the viewer refused (the verdicts' reader would read every file a marker names)."""
    if info.files is None or info.files.error or info.files.refused:
        return ""
    verdicts = state.files.run_verdicts(info.entry.path, info.files)
    per = run_per_decision(verdicts, state.files.run_cost(info.entry.path, info.files)) if verdicts is not None else None
    return per.line if per is not None else ""


def run_sessions(state: ViewState, request: web.Request) -> web.Response:
    info, table = _run(state, request)
    q, problems = parse_query(request.query)
    return html(pages_runs.sessions_list(info, q, page_of(table, q), facets(table), problems))


def run_conversation(state: ViewState, request: web.Request) -> web.Response:
    info, table = _run(state, request)
    sid = request.query.get("sid", "")
    q, _ = parse_query(request.query)
    hit = table.filter(pc.equal(table.column("session_id"), sid)) if sid else table.slice(0, 0)
    if hit.num_rows == 0 or info.files is None:
        raise web.HTTPNotFound(text=f"no committed session {sid!r} in {info.entry.label}")
    part = int(hit.column("_part")[0].as_py())
    row = state.files.session_row(info.entry.path, info.files, part, sid)
    if row is None:
        raise web.HTTPNotFound(text=f"session {sid!r} is no longer in its file (the run was rewritten); reload the list")
    view = conversation_view(row, state.files.turn_rows(info.files, part, sid))
    prev_id, next_id, position, matched = neighbours(table, q, sid)
    audit = state.files.audit(info.entry.path, info.files)
    flags = [f for f in audit.flags if f.session_id == sid]
    review = state.files.review_findings(info.entry.path, info.files).get(sid, [])
    return html(pages_runs.conversation(info, view, trajectory_plot(view), q, prev_id, next_id, position, matched, flags, review))


# ----------------------------------------------------------------------------- sweeps, comparisons, files


def sweep(state: ViewState, request: web.Request) -> web.Response:
    en = state.entry("sweep", request.match_info.get("id"))
    manifest = _json(state, en.path / "sweep.json")
    src = pages_outputs.sweep_source(manifest)
    related = [(r.label, pages_outputs.entry_url(r)) for r in state.entries()
               if r.kind == "run" and src is not None and state.files.contained(src) == r.path]
    images = [f"report/{p.name}" for p in state.files.list_files(en.path / "report", (".png",))]
    csvs = state.files.list_files(en.path / "report", (".csv",))
    first = ("param_influence", "metric_range_summary", "settings")
    order = sorted(csvs, key=lambda p: (first.index(p.stem) if p.stem in first else len(first), p.stem))
    tables = []
    for p in order[:4]:
        data, total = state.files.read_table(p, max_rows=50)
        tables.append((f"report/{p.name}", result_table(data, total)))
    files = [f"report/{p.name}" for p in state.files.list_files(en.path / "report", (".csv", ".md"))] + ["sweep.json"]
    return html(pages_outputs.sweep(en, manifest, related, images, tables, files))


def compare(state: ViewState, request: web.Request) -> web.Response:
    en = state.entry("compare", request.match_info.get("id"))
    info = _json(state, en.path / "compare.json")
    related = [(r.label, pages_outputs.entry_url(r)) for r in _compared_runs(state, en)]
    tables, frames = [], {}
    for name, rows in (("leaderboard", 5000), ("paired", 100_000), ("mde", 100), ("best", 100), ("failures", 100)):
        path = en.path / f"{name}.parquet"
        if state.files.is_file(path):
            data, total = state.files.read_table(path, max_rows=rows)
            frames[name] = data.to_pandas()
            tables.append((name, result_table(data.slice(0, 100), total, f"{name}-grid")))
    shown = verdicts(info, frames.get("paired") if not info.get("verdicts") else None)
    return html(pages_outputs.compare(en, info, related, tables, state.files.is_file(en.path / "leaderboard.html"),
                                      shown, boards(frames.get("leaderboard"))))


def file(state: ViewState, request: web.Request) -> web.Response:
    """A file of an entry's folder: a plain relative path, an allowed suffix, inside the folder."""
    en = state.entry("any", request.match_info.get("id"))
    rel = request.match_info.get("tail", "")
    suffix = Path(rel).suffix.lower()
    if not safe_relative(rel) or suffix not in FILE_TYPES:
        raise web.HTTPNotFound(text="no such file")
    target = state.files.child(en.path, rel)
    if target is None or not target.is_file():
        raise web.HTTPNotFound(text="no such file")
    body = state.files.read_bytes(target)
    ctype = FILE_TYPES[suffix]
    response = web.Response(body=body, content_type=ctype, charset="utf-8" if ctype.startswith("text/") or ctype.endswith("json") else None)
    if suffix == ".html":
        response.headers["Content-Security-Policy"] = SANDBOXED_CSP
    return response


__all__ = ["SANDBOXED_CSP", "ViewState", "compare", "file", "index", "run_conversation", "run_overview", "run_sessions", "sweep"]
