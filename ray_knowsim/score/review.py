"""How far the LLM review of the simulator agrees with the deterministic audit, kind by kind.

``ray-knowsim score RUN_DIR --judges simulator_review --name NAME`` writes the review's findings
into score set NAME (each session's ``extra_json``: ``review_findings`` & co.); this module sets
them beside the audit's flags (ray_knowsim.audit.run) of the same sessions. The unit is a session:
for each kind both name (the audit's seven), whether the audit flags it and whether the review
finds it. Per kind: the sessions compared, how many each side flags and both, raw agreement,
Cohen's kappa, and the review's TPR / TNR with the audit as the reference (stats.agreement, the
one implementation). Kinds only the review knows are counted, with no agreement to report. Only
sessions the review judged without an error and the audit audited are compared; the rest are
counted in ``n_not_compared``.

Written to ``RUN_DIR/tables/review_agreement.{parquet,csv}`` by ``score`` (a ``score_set`` column; a
set's rows are replaced when it is compared again); the report computes it afresh
(:func:`review_agreement`), so a run extended since its review is compared as it is now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from ray_knowsim.audit.checks import FLAG_KINDS, AuditFlag
from ray_knowsim.io.tables import write_table
from ray_knowsim.schema.review import REVIEW_KINDS
from ray_knowsim.stats.agreement import cohen_kappa, rates

COLUMNS = ["score_set", "kind", "party", "shared", "n_sessions", "n_audit", "n_review", "n_both", "agreement", "kappa",
           "review_tpr", "review_tnr", "n_not_compared"]  # fmt: skip
GROUPS = {"any_learner": "learner", "any_extractor": "extractor", "any": None}


def agreement_table(session_ids: Sequence[str], flags: Iterable[AuditFlag], findings: Mapping[str, Sequence[Mapping[str, Any]]],
                    *, score_set: str = "", not_compared: int = 0) -> pd.DataFrame:
    """Per kind (and per party, and any): the review's findings against the audit's flags over
    ``session_ids`` (sessions both looked at). ``findings``: session id -> its review findings."""
    ids = list(dict.fromkeys(session_ids))
    keep = set(ids)
    audit: dict[str, set[str]] = {s: set() for s in ids}
    for f in flags:
        if f.session_id in keep:
            audit[f.session_id].add(f.kind)
    review: dict[str, set[str]] = {s: {str(x.get("kind")) for x in findings.get(s, ())} for s in ids}
    rows = []

    def row(kind: str, party: str | None, shared: bool, in_audit, in_review) -> dict[str, Any]:  # noqa: ANN001
        a = [in_audit(audit[s]) for s in ids]
        r = [in_review(review[s]) for s in ids]
        out = {"score_set": score_set, "kind": kind, "party": party or "both", "shared": shared, "n_sessions": len(ids),
               "n_audit": sum(a) if shared else None, "n_review": sum(r), "n_both": sum(x and y for x, y in zip(a, r)) if shared else None,
               "n_not_compared": not_compared}
        if shared and ids:
            rt = rates(r, a, True)
            out |= {"agreement": sum(x == y for x, y in zip(a, r)) / len(ids), "kappa": cohen_kappa(a, r),
                    "review_tpr": rt.tpr, "review_tnr": rt.tnr}
        return out

    for kind in REVIEW_KINDS:
        shared = kind in FLAG_KINDS
        rows.append(row(kind, REVIEW_KINDS[kind][0], shared, lambda k, kind=kind: kind in k, lambda k, kind=kind: kind in k))
    for name, party in GROUPS.items():  # a session flagged for any kind of the party, over the shared kinds
        kinds = {k for k, (p, _) in FLAG_KINDS.items() if party is None or p == party}
        rows.append(row(name, party, True, lambda k, kinds=kinds: bool(k & kinds), lambda k, kinds=kinds: bool(k & kinds)))
    table = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("n_sessions", "n_audit", "n_review", "n_both", "n_not_compared"):
        table[col] = table[col].astype("Int64")  # counts stay whole numbers where a kind has no audit side
    return table


def review_findings(scores: pd.DataFrame) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """(session id -> findings of the sessions the review judged, session ids with a judge error)."""
    out: dict[str, list[dict[str, Any]]] = {}
    failed: list[str] = []
    for r in scores.itertuples(index=False):
        extra = json.loads(r.extra_json) if isinstance(r.extra_json, str) and r.extra_json else {}
        if "review_findings" not in extra:  # the review failed (judge_error names why) or was not asked
            failed.append(r.session_id)
            continue
        out[r.session_id] = list(extra["review_findings"])
    return out, failed


def review_sets(run_root: str | Path) -> list[str]:
    """The run's score sets that hold a simulator review (their judge.json lists it)."""
    from ray_knowsim.score.store import ScoreDir, score_names

    return [n for n in score_names(run_root) if "simulator_review" in (ScoreDir(run_root, n).info().get("judges") or [])]


def set_agreement(reader: Any, audit: Any, score_set: str) -> pd.DataFrame:
    """Score set ``score_set``'s review against ``audit`` (audit.run.RunAudit of the same reader),
    over the sessions the run counts now."""
    from ray_knowsim.score.store import ScoreDir, counted_sessions

    scores = ScoreDir(reader.root, score_set).read(counted_sessions(reader)).to_pandas()
    findings, failed = review_findings(scores)
    audited = set(audit.sessions["session_id"]) if not audit.sessions.empty else set()
    ids = [s for s in findings if s in audited]
    not_compared = len(failed) + len(set(findings) - audited) + len(audited - set(findings) - set(failed))
    return agreement_table(ids, audit.flags, findings, score_set=score_set, not_compared=not_compared)


def review_agreement(reader: Any, audit: Any) -> pd.DataFrame | None:
    """Every review score set of the run against ``audit``, computed now (None: no review)."""
    sets = review_sets(reader.root)
    if not sets:
        return None
    return pd.concat([set_agreement(reader, audit, n) for n in sets], ignore_index=True)


def run_review_agreement(run_root: str | Path, score_set: str, reader: Any = None) -> pd.DataFrame:
    """The agreement of score set ``score_set``'s review with the run's audit, written to
    ``tables/review_agreement``; returns this set's rows."""
    from ray_knowsim.audit.run import audit_run
    from ray_knowsim.io.rundir import RunReader

    root = Path(run_root)
    reader = reader or RunReader.open(root)
    table = set_agreement(reader, audit_run(reader), score_set)
    tables = root / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    path = tables / "review_agreement.parquet"
    old = pd.read_parquet(path) if path.is_file() else pd.DataFrame(columns=COLUMNS)
    both = pd.concat([old[old["score_set"] != score_set], table], ignore_index=True) if len(old) else table
    write_table(both, tables, "review_agreement")
    return table


__all__ = ["COLUMNS", "agreement_table", "review_agreement", "review_findings", "review_sets",
           "run_review_agreement", "set_agreement"]
