"""What `ray-knowsim agreement` (and `run` of a config with simulators) says about its result:
the headline rows of the agreement tables, as a JSON record and as a few terminal lines.

Pure (no I/O): both read the rows :func:`headline_rows` picks from the tables
:func:`ray_knowsim.compare.agreement.agreement` wrote, so the terminal, ``--json`` and the CSV
files show the same numbers. The rows are the level-marginal ones (``knowledge_level == "all"``;
item ``all`` for the extractor tables); the per-level and per-item rows stay in the files.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ray_knowsim.text import fit, wrap_items

_KEEP = {
    "rank_agreement": ("run", "task", "metric", "tau", "n_items", "n_conditions", "top_run", "top_reference", "same_top"),
    "item_agreement": ("task", "metric", "alpha", "n_units", "n_runs"),
    "extractor_agreement": ("run", "task", "kappa", "tpr", "tnr", "n_labels"),
    "extractor_reextraction": ("run", "task", "kappa", "tpr", "tnr", "n_labels"),
    "audit": ("run", "n_flagged", "n_sessions", "flagged_share"),
}


def _marginal(name: str, df: pd.DataFrame) -> pd.DataFrame:
    if name in ("rank_agreement", "item_agreement"):
        return df[df["knowledge_level"] == "all"]
    if name == "extractor_agreement":
        return df[(df["item_id"] == "all") & (df["iu"] == "all")]
    if name == "extractor_reextraction":
        return df[df["item_id"] == "all"]
    return df


def _value(v: Any) -> Any:
    """A cell as JSON: NaN and pandas' missing values as None, numpy scalars as Python's."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or (not isinstance(v, (str, bool)) and pd.isna(v)):
        return None
    return v.item() if hasattr(v, "item") else v


def headline_rows(tables: dict[str, pd.DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """Per table, its marginal rows with the columns the summary shows (tables absent: left out)."""
    out = {}
    for name, cols in _KEEP.items():
        df = tables.get(name)
        if df is None:
            continue
        part = _marginal(name, df) if len(df) else df
        out[name] = [{c: _value(r[c]) for c in cols if c in part.columns} for _, r in part.iterrows()]
    return out


def agreement_record(result: Any) -> dict[str, Any]:
    """The JSON record of an :class:`~ray_knowsim.compare.agreement.AgreementResult`."""
    return {"out_dir": str(result.out_dir), "reference": result.reference, "runs": list(result.labels),
            "notes": list(result.notes), **headline_rows(result.tables)}


def _num(x: Any) -> str:
    return "–" if x is None else f"{x:.2f}"


def _stat_lines(head: str, rows: list[dict[str, Any]], stat: str, n: str, n_words: str) -> list[str]:
    """``head (n N n_words): metric stat, ...``; the n per metric where the metrics' n differ."""
    ns = {r[n] for r in rows}
    if len(ns) == 1:
        return wrap_items(f"{head} (n {ns.pop():,} {n_words}):", [f"{r['metric']} {_num(r[stat])}" for r in rows])
    return wrap_items(f"{head} (n: {n_words}):", [f"{r['metric']} {_num(r[stat])} (n {r[n]:,})" for r in rows])


def _by(rows: list[dict[str, Any]], *keys: str) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return groups


def _extractor_lines(record: dict[str, Any]) -> list[str]:
    lines = []
    for name, what in (("extractor_agreement", "identical exchanges"), ("extractor_reextraction", "all the reference's exchanges")):
        for r in record.get(name, []):
            lines.append(fit(f"  {r['task']}, extractor of {r['run']} on {what}: kappa {_num(r['kappa'])}, "
                             f"TPR {_num(r['tpr'])}, TNR {_num(r['tnr'])} (n {r['n_labels']:,} labels)"))
    return lines


def agreement_lines(record: dict[str, Any], record_file: str | None = None) -> list[str]:
    """The terminal summary of :func:`agreement_record`: Kendall's tau of the rankings and
    Krippendorff's alpha per metric, each with its n; tops that differ; the extractors' kappa;
    the audits; where the tables are. The tables hold point estimates only (no intervals)."""
    lines = [fit(f"agreement of {len(record['runs'])} runs against {record['reference']}; tables in {record['out_dir']}")]
    for (task, run), rows in _by(record.get("rank_agreement", []), "task", "run").items():
        k = {r["n_conditions"] for r in rows}
        conds = f", {k.pop()} conditions" if len(k) == 1 else ""
        lines += _stat_lines(f"  {task}, {run} vs {record['reference']}: Kendall tau of the mean item ranks", rows, "tau",
                             "n_items", f"items{conds}")
        lines += [fit(f"    top differs on {r['metric']}: {r['top_run'] or 'tied'} vs {r['top_reference'] or 'tied'}")
                  for r in rows if r.get("same_top") is False and (r["top_run"] or r["top_reference"])]
    for (task,), rows in _by(record.get("item_agreement", []), "task").items():
        lines += _stat_lines(f"  {task}: Krippendorff alpha over item x condition cells", rows, "alpha", "n_units", "cells")
    lines += _extractor_lines(record)
    lines += [fit(f"  {note}") for note in record.get("notes", [])]
    audits = [f"{r['run']} {r['n_flagged']} of {r['n_sessions']}" for r in record.get("audit", [])]
    if audits:
        lines += wrap_items("  audit, sessions flagged:", audits)
    if record_file:
        lines.append(fit(f"record: {record_file}"))
    return lines


__all__ = ["agreement_lines", "agreement_record", "headline_rows"]
