"""The simulator audit of a run directory: every committed ok session read through the run
reader, audited by :mod:`ray_knowsim.audit.checks`, and reduced to the run's audit tables.

``tables/audit`` — per (task, condition, knowledge level): ok sessions audited, sessions
flagged and their share, per party and per kind (sessions with at least one such flag).
``tables/audit_flags`` — one row per flag: where (session, turn, condition, level, item), what
(kind, party, IU, its state or label) and the evidence (the sentence, and why it contradicts the state).

The items' questions and reference answers come from the run's recorded config (its task
files, resolved from the recorded ``base_dir``); when they cannot be read the answer check is
skipped and :attr:`RunAudit.answers_checked` says so. Cost: one pass over the turn files, one
file at a time (a file holds whole sessions), a few columns each.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd
import pyarrow.compute as pc

from ray_knowsim.audit.checks import FLAG_KINDS, AuditFlag, SessionFacts, TurnFacts, audit_session
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.tables.sanity import _entries as signal_entries  # the one reader of an extractor answer's entries
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import Item, item_key

SESSION_COLUMNS = ("session_id", "task", "item_id", "condition", "knowledge_level", "simulator", "initial_states",
                   "graph_json", "status")  # fmt: skip
TURN_COLUMNS = ("session_id", "turn", "user_message", "assistant_message", "signals_json", "states", "overload")
CELL = ("task", "condition", "knowledge_level")
FLAG_COLUMNS = ("task", "condition", "knowledge_level", "item_id", *AuditFlag.model_fields)
SUMMARY_COLUMNS = (*CELL, "n_sessions", "n_flagged", "flagged_share", "n_learner_flagged", "n_extractor_flagged",
                   *(f"n_{k}" for k in FLAG_KINDS))  # fmt: skip


@dataclass
class RunAudit:
    flags: list[AuditFlag]
    sessions: pd.DataFrame  # one row per audited session: CELL, item_id, session_id, simulator, n_flags
    answers_checked: bool  # whether the items' reference answers were at hand
    not_audited: list[str] = field(default_factory=list)  # ok sessions without a readable IU graph
    meta: dict[str, Any] = field(default_factory=dict)

    def flagged_ids(self, party: str | None = None) -> set[str]:
        return {f.session_id for f in self.flags if party is None or f.party == party}

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"audit": summary_table(self.sessions, self.flags), "audit_flags": flags_table(self.sessions, self.flags)}


def summary_table(sessions: pd.DataFrame, flags: Iterable[AuditFlag]) -> pd.DataFrame:
    """Per (task, condition, level): sessions audited, flagged (any flag; per party; per kind)."""
    by_session: dict[str, set[str]] = defaultdict(set)
    for f in flags:
        by_session[f.session_id].add(f.kind)
    rows = []
    if not sessions.empty:
        for cell, group in sessions.groupby(list(CELL), sort=True):
            kinds = [by_session.get(s, set()) for s in group["session_id"]]
            n = len(group)
            flagged = sum(bool(k) for k in kinds)
            row = dict(zip(CELL, cell)) | {
                "n_sessions": n, "n_flagged": flagged, "flagged_share": flagged / n if n else float("nan"),
                "n_learner_flagged": sum(any(FLAG_KINDS[x][0] == "learner" for x in k) for k in kinds),
                "n_extractor_flagged": sum(any(FLAG_KINDS[x][0] == "extractor" for x in k) for k in kinds),
            }  # fmt: skip
            row |= {f"n_{kind}": sum(kind in k for k in kinds) for kind in FLAG_KINDS}
            rows.append(row)
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def flags_table(sessions: pd.DataFrame, flags: Iterable[AuditFlag]) -> pd.DataFrame:
    where = sessions.set_index("session_id")[["task", "condition", "knowledge_level", "item_id"]].to_dict("index") if not sessions.empty else {}
    rows = [where.get(f.session_id, {}) | f.model_dump() for f in flags]
    return pd.DataFrame(rows, columns=list(FLAG_COLUMNS))


def run_items(manifest: Mapping[str, Any] | None) -> dict[str, Item]:
    """The items of a run's recorded config by item key ({} when they cannot be read)."""
    from ray_knowsim.io.paths import resolve_path
    from ray_knowsim.io.loaders import load_items

    manifest = manifest or {}
    config = manifest.get("config") or {}
    base = Path(str(manifest.get("base_dir") or (config.get("base_dir") or ".")))
    out: dict[str, Item] = {}
    for task in config.get("tasks") or []:
        try:
            for item in load_items(resolve_path(str(task["items"]), base), task.get("name")):
                out[item_key(item.task, item.id)] = item
        except (KeyError, OSError, ValueError, TypeError):
            continue
    return out


def audit_run(run: RunReader, items: Mapping[str, Item] | None = None) -> RunAudit:
    """The audit of every committed ok session of ``run`` (``items``: by item key; default: the
    run's recorded config's items)."""
    from ray_knowsim.registry import RegistryError
    from ray_knowsim.simulators import SIMULATORS

    items = run_items(run.manifest) if items is None else items
    table = run.sessions.read(list(SESSION_COLUMNS), pc.field("status") == "ok")
    meta = table.drop_columns(["graph_json", "initial_states"]).to_pandas() if table.num_rows else pd.DataFrame(columns=list(SESSION_COLUMNS))
    facts: dict[str, dict[str, Any]] = {}
    graphs: dict[str, IUGraph | None] = {}
    unreadable: list[str] = []  # sessions without a readable IU graph: not audited (counted, never dropped silently)
    for row in table.to_pylist():
        text = row["graph_json"]
        if text not in graphs:
            try:
                graphs[text] = IUGraph.model_validate(json.loads(text or "null"))
            except (ValueError, TypeError):  # (pydantic's ValidationError is a ValueError)
                graphs[text] = None
        if graphs[text] is None:
            unreadable.append(row["session_id"])
            continue
        try:
            structured = SIMULATORS.get(row["simulator"]).structured
        except RegistryError:  # a plugin simulator not imported here
            structured = row["simulator"] == "structured"
        item = items.get(item_key(row["task"], row["item_id"]))
        facts[row["session_id"]] = {"graph": graphs[text], "initial": list(row["initial_states"] or []), "structured": structured,
                                    "problem": item.question if item else "", "answer": item.reference_answer if item else ""}
    flags: list[AuditFlag] = []
    counts: dict[str, int] = {}

    def audit(sid: str, session_turns: list[TurnFacts]) -> None:
        fx = facts[sid]
        got = audit_session(SessionFacts(sid, fx["graph"], fx["initial"], fx["structured"], fx["problem"], fx["answer"],
                                         tuple(sorted(session_turns, key=lambda t: t.turn))))
        counts[sid] = len(got)
        flags.extend(got)

    # Streamed a turns file at a time: a session is audited once the last file holding its turns
    # is read, and its messages are let go (a 10k-session run's turns are ~0.5 GB of text).
    files = list(run.turns.files) if run.turns is not None and facts else []
    last_file: dict[str, int] = {}
    for i, f in enumerate(files):
        for sid in set(run.turns.only([f]).read(["session_id"]).column("session_id").to_pylist()):
            if sid in facts:
                last_file[sid] = i
    turns: dict[str, list[TurnFacts]] = defaultdict(list)
    for i, f in enumerate(files):
        for batch in run.turns.only([f]).scan(list(TURN_COLUMNS)):  # a batch at a time: rows as dicts are ~3x their text
            for r in batch.to_pylist():
                if r["session_id"] in facts:
                    turns[r["session_id"]].append(TurnFacts(
                        int(r["turn"]), r["user_message"] or "", r["assistant_message"] or "", signal_entries(r.get("signals_json")),
                        list(r.get("states") or []), bool(r.get("overload"))))  # fmt: skip
        for sid in [s for s, last in last_file.items() if last == i]:
            audit(sid, turns.pop(sid, []))
    for sid in facts:
        if sid not in last_file:  # no turn rows: audited on its session row alone
            audit(sid, [])
    order = {sid: i for i, sid in enumerate(facts)}
    flags.sort(key=lambda fl: order[fl.session_id])  # in the sessions' order, as one pass would give them (stable)
    if not meta.empty:
        meta = meta[meta["session_id"].isin(facts)]
        meta = meta.assign(n_flags=meta["session_id"].map(counts).fillna(0).astype(int))
    return RunAudit(flags, meta, answers_checked=bool(items), not_audited=unreadable,
                    meta={"n_sessions": len(facts), "n_flagged": len({f.session_id for f in flags}), "not_audited": len(unreadable)})


def flagged_keys(paths_and_labels: Iterable[tuple[str, str]]) -> set[str]:
    """``"<run label>\x00<session id>"`` of every session the audit flags in each run (compare
    merges runs whose session ids may repeat: the key names the run too)."""
    out: set[str] = set()
    for path, label in paths_and_labels:
        out |= {f"{label}\x00{sid}" for sid in audit_run(RunReader.open(path)).flagged_ids()}
    return out


def read_audit(tables_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """A run's written audit tables (summary, flags), or None when the run has none."""
    summary, flags = tables_dir / "audit.parquet", tables_dir / "audit_flags.parquet"
    if not (summary.is_file() and flags.is_file()):
        return None
    return pd.read_parquet(summary), pd.read_parquet(flags)


__all__ = ["FLAG_COLUMNS", "SUMMARY_COLUMNS", "RunAudit", "audit_run", "flagged_keys", "flags_table", "read_audit", "run_items", "summary_table"]
