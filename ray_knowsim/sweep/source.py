"""Load the conversations a sweep re-scores: from a run directory of ours or reference record files.

Both end as ``Conversation`` objects (graph, initial state, compact per-turn signals, labels and
the metrics the source recorded, under our row names, for the default-setting identity check).
Conversations that carry no knowledge state (baselines), failed ones and error-stopped records are
skipped and counted; a source that yields nothing, or a record whose graph is missing, fails
before any work is submitted.
"""

from __future__ import annotations

import glob
import hashlib
import json
import string
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from ray_knowsim.io.loaders import load_graph_cache, load_records
from ray_knowsim.io.rundir import CommittedTable, RunDirError, RunReader
from ray_knowsim.schema.graph import GraphIndex, IUGraph, build_index
from ray_knowsim.schema.records import ConversationRecord
from ray_knowsim.schema.metrics import BUILTIN_METRICS, names
from ray_knowsim.schema.results import FAILURE_MODES
from ray_knowsim.rules.final_metrics import ks_basis
from ray_knowsim.rules.reference_record import initial_from_ks
from ray_knowsim.sweep.config import RecordsSource, RunDirSource, SweepConfig, SweepConfigError
from ray_knowsim.sweep.conversation import META_COLUMNS, Conversation, compact_turn

#: record stop reasons the reference analysis drops (spec §11)
ERROR_STOPS = frozenset({"error", "api_error", "empty_user_message", "empty_assistant"})

#: session-table columns recorded by our runs that a re-scored row also has
RUN_METRIC_COLUMNS: tuple[str, ...] = (
    *(c for m in BUILTIN_METRICS if m.source == "state" for c in m.columns()),
    *names(source="state", variant="es"), "early_stop_turn", "early_stop_reason", "tau",
    *(f"fm_{m}" for m in FAILURE_MODES),
)  # fmt: skip

#: reference record ``metrics`` field -> our row column (spec §9.1): the catalogue's metrics, then
#: the counts and parts a re-scored row also has
RECORD_METRICS: dict[str, str] = {
    **{m.reference: m.name for m in BUILTIN_METRICS if m.reference},
    "raw_state_progress": "raw_state_progress",
    "information_calibration": "ic_precision",
    "ic_precision": "ic_precision",
    "ic_recall": "ic_recall",
    "new_ius_total": "new_ius",
    "disallowed_total": "disallowed",
}
#: reference record ``metrics_at_early_stop`` field -> our row column (spec §9.2)
RECORD_METRICS_ES: dict[str, str] = {m.reference_es: m.es_name for m in BUILTIN_METRICS if m.reference_es and m.es_name}


@dataclass
class SourceData:
    conversations: list[Conversation]
    description: str
    skipped: Counter = field(default_factory=Counter)  # reason -> count

    @property
    def fingerprint(self) -> str:
        """Changes whenever a conversation the sweep reads changes (resume refuses a changed source)."""
        h = hashlib.sha256()
        for c in self.conversations:
            sig = [[(s.id, s.tq_code, s.attempt_code, s.assistant_response_role) for s in t] for t in c.turns]
            init = [c.initial[v] for v in c.graph.ids]
            carries = [c.carries.get(v, 0.0) for v in c.graph.ids] if c.carries else []
            parts = [c.key, c.graph.edges, c.graph.ids, init, carries, sig, c.max_turns, c.meta]
            if c.basis is not None:  # only then, so sources without one keep their fingerprint
                parts.append([list(c.basis.nodes), list(c.basis.extra)])
            h.update(json.dumps(parts).encode())
        return h.hexdigest()[:16]


def load_source(cfg: SweepConfig) -> SourceData:
    src = cfg.source
    data = _load_run_dir(cfg, src) if isinstance(src, RunDirSource) else _load_records(cfg, src)
    if not data.conversations:
        skipped = ", ".join(f"{n} {why}" for why, n in data.skipped.items()) or "none found"
        raise SweepConfigError(f"{data.description}: no conversation with a knowledge state to re-score ({skipped})")
    if cfg.max_turns is not None:
        for c in data.conversations:
            c.max_turns = cfg.max_turns
    return data


# --- our run directories -----------------------------------------------------------------------

_SESSION_COLUMNS = (
    "session_id", "task", "item_id", "knowledge_level", "condition", "assistant_model", "assistant_strategy",
    "simulator", "status", "turns", "graph_json", "initial_states", "stop_reason",
)  # fmt: skip


def _datasets(run_dir: Path) -> tuple[CommittedTable, CommittedTable]:
    """(sessions, turns) of a run directory, as the one run-directory reader counts them
    (io/rundir.py: only what commit markers name, each session once)."""
    if not run_dir.is_dir():
        raise SweepConfigError(f"{run_dir} is not a run directory: it does not exist")
    try:
        run = RunReader.open(run_dir)
    except RunDirError as exc:
        raise SweepConfigError(str(exc)) from exc
    if run.turns is None or not run.turns.files:
        raise SweepConfigError(f"{run_dir} is not a run directory with turns: {run_dir / 'turns'} holds no committed files")
    if not run.sessions.files:
        raise SweepConfigError(f"{run_dir} has no committed sessions yet")
    return run.sessions, run.turns


def _load_run_dir(cfg: SweepConfig, src: RunDirSource) -> SourceData:
    run_dir = cfg.resolve(src.run_dir)
    sessions, turns = _datasets(run_dir)
    names = set(sessions.names)
    missing = {"session_id", "knowledge_level", "condition", "graph_json", "initial_states"} - names
    if missing:
        raise SweepConfigError(f"{run_dir}/sessions lacks columns {sorted(missing)} (not our results contract?)")
    recorded_cols = [c for c in RUN_METRIC_COLUMNS if c in names]
    table = sessions.read([c for c in _SESSION_COLUMNS if c in names] + recorded_cols)
    out = SourceData([], f"run directory {run_dir}")
    keep: dict[str, dict[str, Any]] = {}
    for row in table.to_pylist():
        if row.get("status", "ok") != "ok":
            out.skipped["failed"] += 1
        elif not row.get("initial_states") or row.get("graph_json") in (None, "", "{}"):
            out.skipped["no knowledge state (baseline)"] += 1
        elif src.conditions is not None and row["condition"] not in src.conditions:
            out.skipped["condition filtered out"] += 1
        elif src.levels is not None and row["knowledge_level"] not in src.levels:
            out.skipped["level filtered out"] += 1
        else:
            keep[row["session_id"]] = row

    per_turn: dict[str, list[tuple[int, list]]] = {sid: [] for sid in keep}
    if keep:
        wanted = turns.id_array(keep)
        for batch in turns.scan(["session_id", "turn", "signals_json"], pc.field("session_id").isin(wanted)):
            for sid, t, sj in zip(*(batch.column(k).to_pylist() for k in range(3))):
                per_turn[sid].append((t, compact_turn(json.loads(sj) if sj else [])))

    graphs: dict[str, GraphIndex] = {}
    for sid in sorted(keep):
        row = keep[sid]
        gj = row["graph_json"]
        if gj not in graphs:
            graphs[gj] = build_index(IUGraph.model_validate(json.loads(gj)), row.get("item_id") or "")
        g = graphs[gj]
        init = row["initial_states"]
        if len(init) != g.size:
            raise SweepConfigError(f"session {sid!r}: {len(init)} initial states for a graph of {g.size} IUs")
        recorded_turns = sorted(per_turn[sid], key=lambda x: x[0])
        if [t for t, _ in recorded_turns] != list(range(1, len(recorded_turns) + 1)):
            raise SweepConfigError(f"session {sid!r}: turn rows are not 1..n: {[t for t, _ in recorded_turns]}")
        n_turns = len(recorded_turns)
        if row.get("turns") is not None and row["turns"] != n_turns:
            out.skipped["turn rows missing"] += 1
            continue
        meta = {k: str(row.get(k) or "") for k in META_COLUMNS}
        recorded = {c: row[c] for c in recorded_cols}
        out.conversations.append(
            Conversation(
                position=len(out.conversations),
                key=sid,
                graph=g,
                initial=dict(zip(g.ids, (int(s) for s in init))),
                carries=None,
                turns=[sig for _, sig in recorded_turns],
                max_turns=max(n_turns, 1),
                meta=meta,
                recorded=recorded,
            )
        )
    return out


# --- reference record files -----------------------------------------------------------------------


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return ""


def _condition(template: str, rec: ConversationRecord, file: Path) -> str:
    fields = _Blank({k: v for k, v in rec.model_dump().items() if isinstance(v, (str, int, float))})
    fields["file"] = file.stem
    try:
        return string.Formatter().vformat(template, (), fields)
    except (ValueError, IndexError) as exc:
        raise SweepConfigError(f"source.condition {template!r} is not a usable format string: {exc}") from exc


def _record_files(cfg: SweepConfig, patterns: list[str]) -> list[Path]:
    files: list[Path] = []
    for pattern in patterns:
        resolved = str(cfg.resolve(pattern))
        matches = sorted(glob.glob(resolved)) if glob.has_magic(resolved) else [resolved]
        if not matches or not all(Path(m).is_file() for m in matches):
            raise SweepConfigError(f"record files not found: {pattern} (resolved to {resolved})")
        files.extend(Path(m) for m in matches if Path(m) not in files)
    return files


def _num(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    return float(value) if isinstance(value, (int, float)) else value


def record_recorded(rec: ConversationRecord) -> dict[str, Any]:
    """A record's own metrics under our row names (what a default-setting re-score must match)."""
    out: dict[str, Any] = {}
    metrics = rec.metrics or {}
    for name, col in RECORD_METRICS.items():
        if name in metrics:
            out[col] = _num(metrics[name])
    if "absorbed_ic_f1" in metrics:  # which DC variant the record holds (spec §9.1, D11)
        col = "dc_legacy" if metrics.get("absorbed_ic_uses_legacy_proxy") else "dc_any"
        out[col] = _num(metrics["absorbed_ic_f1"])
    es = rec.metrics_at_early_stop or {}
    for name, col in RECORD_METRICS_ES.items():
        if name in es:
            out[col] = _num(es[name])
    if rec.initial_overload_threshold is not None:
        out["tau"] = rec.initial_overload_threshold
    vst = rec.virtual_early_stop_turn
    out["early_stop_turn"] = None if vst is None else int(vst) + 1
    out["early_stop_reason"] = rec.virtual_early_stop_reason
    return out


def _load_records(cfg: SweepConfig, src: RecordsSource) -> SourceData:
    files = _record_files(cfg, src.records)
    caches: dict[str, IUGraph] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graph defects are reported by `replay`; here they are expected
        for path in src.graph_cache:
            caches.update(load_graph_cache(cfg.resolve(path), mode=src.graph_mode))
    out = SourceData([], f"record files {', '.join(str(f) for f in files)}")
    indexes: dict[str, GraphIndex] = {}
    for path in files:
        for k, rec in enumerate(load_records(path)):
            if not rec.is_structured:
                out.skipped["no knowledge state (baseline)"] += 1
                continue
            if (rec.stop_reason or "") in ERROR_STOPS:
                out.skipped[f"stopped by {rec.stop_reason}"] += 1
                continue
            if src.levels is not None and rec.knowledge_level not in src.levels:
                out.skipped["level filtered out"] += 1
                continue
            if rec.problem_id not in caches:
                raise SweepConfigError(f"{path}: record {k} ({rec.problem_id}) has no graph in {src.graph_cache}")
            if rec.problem_id not in indexes:
                indexes[rec.problem_id] = build_index(caches[rec.problem_id], rec.problem_id)
            g = indexes[rec.problem_id]
            if not isinstance(rec.initial_knowledge_state, dict):
                raise SweepConfigError(f"{path}: record {k} ({rec.problem_id}) has no initial knowledge state")
            initial, carries = initial_from_ks(g, rec.initial_knowledge_state)
            turns = [compact_turn(t) for t in rec.iu_analysis_history or []]
            meta = {c: "" for c in META_COLUMNS}
            meta.update(
                session_id=f"{path.name}:{k}:{rec.problem_id}",
                task=str(rec.task or ""),
                item_id=rec.problem_id,
                knowledge_level=str(rec.knowledge_level or ""),
                condition=_condition(src.condition, rec, path),
                assistant_model=str((rec.model_extra or {}).get("assistant_model") or ""),
                assistant_strategy=str(rec.assistant_strategy or ""),
            )
            out.conversations.append(
                Conversation(
                    position=len(out.conversations),
                    key=meta["session_id"],
                    graph=g,
                    initial=initial,
                    carries=carries if any(v != 0.0 for v in carries.values()) else None,
                    turns=turns,
                    max_turns=max(int(rec.turns or len(turns) or 15), 1),
                    meta=meta,
                    recorded=record_recorded(rec),
                    basis=ks_basis(g, rec.initial_knowledge_state),
                )
            )
    return out


__all__ = ["ERROR_STOPS", "RECORD_METRICS", "RECORD_METRICS_ES", "RUN_METRIC_COLUMNS", "SourceData", "load_source"]
