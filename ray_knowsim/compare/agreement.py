"""``agreement``: do the conclusions survive a change of simulator? Runs of ONE design (same items,
levels, conditions, tutors, rules, seeds) that differ only in the learner and extractor models.

Written to ``--out DIR`` (Parquet + CSV each, and ``agreement.json``):

* ``rank_agreement`` — per (task, level or "all", metric) and run: Kendall's tau-b between the
  run's **mean item ranks** and the reference run's, and whether both put the same condition on top
  (``top_run`` / ``top_reference`` / ``same_top``: the unique smallest mean item rank; descriptive,
  no test). The mean item rank is the leaderboard's, on the quantity the verdicts test (issue 28:
  one quantity; :func:`ray_knowsim.stats.ranks.mean_item_ranks` of the pairwise item win rates,
  :func:`ray_knowsim.stats.winrate.win_counts`), over the item means (level-marginal: the mean of
  the item's level means) of the items every run holds -- not condition means, which can order two
  conditions against their verdict.
* ``item_agreement`` — per (task, level, metric): Krippendorff's alpha (interval) with the runs
  as raters and (item, condition) cells as units, valued by the item mean.
* ``verdicts`` — per paired row, compare's verdict (:func:`ray_knowsim.compare.paired.analyse`,
  the one verdict procedure) under each run, and ``holds_everywhere``: the same significant
  verdict under every simulator.
* ``extractor_agreement`` — per (task, item, IU) and run: Cohen's kappa of the extractor's
  labels against the reference run's, and TPR/TNR for ``well_explained``, over the turns whose
  learner message and tutor reply are the SAME text in both runs (only there did both extractors
  read one exchange; with another learner model that is usually the first turn alone, and the
  table says how many turns it rests on). Rows per IU, per item (``iu`` "all") and per task
  (``item_id`` and ``iu`` "all").
* ``extractor_reextraction`` (``--re-extract``) — the same figures over ALL the reference's
  exchanges, each labelled again by the other run's extractor (:mod:`ray_knowsim.compare.reextract`:
  the simulation's renderer and parser, the recorded state before the exchange; resumable and
  costed under ``OUT/re_extraction/<run>/``).
* ``audit`` — per run: the simulator audit's flagged share (:mod:`ray_knowsim.audit.run`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ray_knowsim.compare.paired import ALL_LEVELS, CompareOptions, analyse, pick_metrics
from ray_knowsim.compare.runs import IncompatibleRuns, LoadedRun, first_difference, load_runs
from ray_knowsim.compare.sensitivity import KEY, verdict_text
from ray_knowsim.stats.defaults import ALPHA
from ray_knowsim.io.rundir import open_run
from ray_knowsim.io.tables import write_table
from ray_knowsim.schema.states import level_order
from ray_knowsim.score.relabel import label_of
from ray_knowsim.stats.agreement import cohen_kappa, kendall_tau, krippendorff_alpha, rates
from ray_knowsim.stats.ranks import TIE_DECIMALS, higher_is_better, mean_item_ranks
from ray_knowsim.stats.winrate import win_counts

TABLES = ("rank_agreement", "item_agreement", "verdicts", "extractor_agreement", "audit")
POSITIVE = "well_explained"
#: what may differ between the runs: the simulator's models (and nothing else of the simulator)
SIMULATOR_MODELS = ("user_sim", "extractor")


@dataclass
class AgreementResult:
    out_dir: Path
    tables: dict[str, pd.DataFrame]
    labels: list[str]
    reference: str
    notes: list[str] = field(default_factory=list)


def _design(run: LoadedRun, manifest: dict[str, Any]) -> dict[str, Any]:
    """What must be equal across the runs: the run identity without the simulator's models, the
    conditions, the tutors' model entries, the seed and the trials."""
    ident = run.identity.model_dump(mode="json")
    for role in SIMULATOR_MODELS:
        ident["simulator"][role].pop("model", None)
    cfg = manifest.get("config") or {}
    models = cfg.get("models") or {}
    tutors = sorted({str(m) for m in run.sessions.get("assistant_model", pd.Series(dtype=str)).unique()})
    return {"identity": ident, "conditions": list(run.conditions), "seed": cfg.get("seed"), "trials": cfg.get("trials"),
            "tutor_models": {k: models.get(k) for k in tutors}}


def check_same_design(runs: Sequence[LoadedRun], manifests: Sequence[dict[str, Any]]) -> None:
    """Refuse runs that differ in anything but the simulator's models, naming the first difference."""
    base = _design(runs[0], manifests[0])
    for run, manifest in zip(runs[1:], manifests[1:]):
        diff = first_difference(_design(run, manifest), base)
        if diff:
            raise IncompatibleRuns(f"{run.path} and {runs[0].path} differ in more than the simulator models: {diff}")


def _labels(paths: Sequence[str]) -> list[str]:
    names = [Path(p).name or str(p) for p in paths]
    return names if len(set(names)) == len(names) else [f"{k}:{n}" for k, n in enumerate(names)]


def item_means(sessions: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per (task, level, item, condition) the item mean, plus level "all": the mean of the item's level means."""
    per = sessions.groupby(["task", "knowledge_level", "item_id", "condition"], as_index=False)[metric].mean()
    marg = per.groupby(["task", "item_id", "condition"], as_index=False)[metric].mean().assign(knowledge_level=ALL_LEVELS)
    return pd.concat([per, marg], ignore_index=True)


def _scopes(sessions: pd.DataFrame, task: str) -> list[str]:
    return [*level_order(sessions.loc[sessions["task"] == task, "knowledge_level"].unique()), ALL_LEVELS]


def rank_and_item_tables(runs: dict[str, pd.DataFrame], reference: str, conditions: Sequence[str],
                         metrics: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    ranks, items = [], []
    ref = runs[reference]
    for metric in metrics:
        means = {label: item_means(s, metric) for label, s in runs.items() if metric in s.columns}
        if reference not in means:
            continue
        for task in sorted(ref["task"].unique()):
            for level in _scopes(ref, task):
                wide = {label: m[(m["task"] == task) & (m["knowledge_level"] == level)].pivot(index="item_id", columns="condition", values=metric)
                        for label, m in means.items()}
                common = sorted(set.intersection(*(set(w.index) for w in wide.values())))
                if not common:
                    continue
                ranked = {label: _mean_item_ranks(w.reindex(index=common, columns=list(conditions)), metric) for label, w in wide.items()}
                r = ranked[reference]
                top_ref = _top(r)
                for label, c in ranked.items():
                    if label == reference:
                        continue
                    ranks.append({"task": task, "knowledge_level": level, "metric": metric, "run": label, "reference": reference,
                                  "n_items": len(common), "n_conditions": int(c.notna().sum()),
                                  "tau": kendall_tau(list(r.values), list(c.values)),
                                  "top_reference": top_ref, "top_run": _top(c),
                                  "same_top": top_ref is not None and top_ref == _top(c)})
                units = [w.reindex(index=common, columns=list(conditions)).to_numpy(dtype=float).ravel() for w in wide.values()]
                items.append({"task": task, "knowledge_level": level, "metric": metric, "n_runs": len(units),
                              "n_units": int(np.isfinite(np.vstack(units)).any(axis=0).sum()),
                              "alpha": krippendorff_alpha([list(u) for u in units], "interval")})
    return pd.DataFrame(ranks), pd.DataFrame(items)


def _mean_item_ranks(wide: pd.DataFrame, metric: str) -> pd.Series:
    """Per condition (a column of item means) its mean item rank among the conditions with data
    (NaN for one without): the leaderboard's Borda count of the pairwise item win rates."""
    present = [c for c in wide.columns if wide[c].notna().any()]
    hib = higher_is_better(metric)
    theta = {(a, b): win_counts(wide[a].to_numpy(dtype=float), wide[b].to_numpy(dtype=float), hib).win_rate
             for k, a in enumerate(present) for b in present[k + 1:]}
    mir = mean_item_ranks(present, theta)
    return pd.Series({c: mir.get(c, np.nan) for c in wide.columns}, dtype=float)


def _top(mir: pd.Series) -> str | None:
    """The condition with the smallest mean item rank; None when there is none or the top is tied."""
    m = mir.dropna().round(TIE_DECIMALS)
    if m.empty:
        return None
    top = m[m == m.min()]
    return str(top.index[0]) if len(top) == 1 else None


def verdict_table(runs: dict[str, pd.DataFrame], conditions: Sequence[str], opts: CompareOptions) -> pd.DataFrame:
    """Compare's verdicts under each run side by side; ``holds_everywhere``: the same significant verdict in all."""
    merged: pd.DataFrame | None = None
    for label, sessions in runs.items():
        paired = analyse(sessions, conditions, opts)["paired"]
        col = paired[list(KEY)].assign(**{f"verdict@{label}": [verdict_text(r) for _, r in paired.iterrows()]})
        merged = col if merged is None else merged.merge(col, on=list(KEY), how="outer")
    if merged is None:
        return pd.DataFrame(columns=[*KEY, "same", "holds_everywhere"])
    cols = [c for c in merged.columns if c.startswith("verdict@")]
    merged[cols] = merged[cols].fillna("not computed")
    merged["same"] = merged[cols].nunique(axis=1) == 1
    merged["holds_everywhere"] = merged["same"] & (merged[cols[0]] != "no verdict") & (merged[cols[0]] != "not computed")
    return merged


def _turn_labels(path: str) -> dict[tuple[str, int], tuple[str, str, dict[str, str]]]:
    """(session, turn) -> (learner message, tutor reply, {IU: label}) of a run's structured turns."""
    run = open_run(path)
    out = {}
    if run.turns is None:
        return out
    for batch in run.turns.scan(["session_id", "turn", "user_message", "assistant_message", "signals_json"]):
        for r in batch.to_pylist():
            try:
                entries = json.loads(r["signals_json"] or "[]")
            except ValueError:
                continue
            labels = {str(e.get("id")): label_of(e.get("teaching_quality")) for e in entries if isinstance(e, dict) and e.get("id")}
            if labels:
                out[(r["session_id"], int(r["turn"]))] = (r["user_message"], r["assistant_message"], labels)
    return out


EXTRACTOR_COLUMNS = ["task", "item_id", "iu", "run", "reference", "n_labels", "agreement", "kappa", "positives", "tpr", "tnr"]


def label_rows(pairs: Sequence[tuple[str, str, str, str, str]], run: str, reference: str) -> list[dict[str, Any]]:
    """Per (task, item, IU), per (task, item, "all") and per (task, "all", "all"): Cohen's kappa of
    the run's labels against the reference's, raw agreement and TPR/TNR of ``well_explained``.
    ``pairs``: (task, item, IU, label, reference label)."""
    cells: dict[tuple[str, str, str], list[tuple[str, str]]] = defaultdict(list)
    for task, item, iu, mine, theirs in pairs:
        for cell in ((task, item, iu), (task, item, "all"), (task, "all", "all")):
            cells[cell].append((mine, theirs))
    rows = []
    for (task, item, iu), got in sorted(cells.items()):
        mine, theirs = [a for a, _ in got], [b for _, b in got]
        r = rates(mine, theirs, POSITIVE)
        rows.append({"task": task, "item_id": item, "iu": iu, "run": run, "reference": reference, "n_labels": len(got),
                     "agreement": sum(a == b for a, b in got) / len(got), "kappa": cohen_kappa(mine, theirs),
                     "positives": r.positives, "tpr": r.tpr, "tnr": r.tnr})
    return rows


def extractor_table(paths: dict[str, str], reference: str, sessions: pd.DataFrame) -> pd.DataFrame:
    """Per (task, item, IU) and run: kappa and TPR/TNR of the labels against the reference's, over the
    turns both runs saw with the same text (:func:`label_rows`: also each item's and the task's IUs pooled)."""
    where = sessions.drop_duplicates("session_id").set_index("session_id")[["task", "item_id"]].to_dict("index")
    ref = _turn_labels(paths[reference])
    rows = []
    for label, path in paths.items():
        if label == reference:
            continue
        pairs = []
        for key, (user, reply, labs) in _turn_labels(path).items():
            base = ref.get(key)
            if base is None or base[0] != user or base[1] != reply or key[0] not in where:
                continue  # another exchange: the two extractors did not read the same text
            cell = where[key[0]]
            pairs += [(cell["task"], str(cell["item_id"]), iu, lab, base[2][iu]) for iu, lab in labs.items() if iu in base[2]]
        rows += label_rows(pairs, label, reference)
    return pd.DataFrame(rows, columns=EXTRACTOR_COLUMNS)


def reextraction_table(paths: dict[str, str], reference: str, out_dir: Path, address: str | None = None
                       ) -> tuple[pd.DataFrame, dict[str, dict[str, Any]], list[str]]:
    """Each other run's extractor labels ALL the reference's exchanges (:mod:`ray_knowsim.compare.reextract`);
    (the agreement rows, per run the spend, notes)."""
    from ray_knowsim.compare.reextract import re_extract

    rows, spent, notes = [], {}, []
    for label, path in paths.items():
        if label == reference:
            continue
        done = re_extract(paths[reference], path, label, out_dir / "re_extraction", address=address)
        table = label_rows(done.pairs, label, reference)
        rows += table
        s = done.spend
        spent[label] = {"extractor": done.extractor, "asked": done.asked, "resumed": s["exchanges"] - done.asked, **s}
        pooled = [r for r in table if r["item_id"] == "all"]
        n = sum(r["n_labels"] for r in pooled)
        cost = "no price" if s["cost_usd"] is None else f"${s['cost_usd']:.4f}"
        notes.append(f"re-extraction by {label}'s extractor ({done.extractor}): {n:,} labels of {s['exchanges'] - s['errors']:,} "
                     f"of the reference's exchanges ({done.asked} asked, {s['exchanges'] - done.asked} resumed; {s['calls']} calls, "
                     f"{s['prompt_tokens'] + s['completion_tokens']:,} tokens, {cost})"
                     + (f"; {s['errors']} unreadable answers left out (asked again on a rerun)" if s["errors"] else ""))
    return pd.DataFrame(rows, columns=EXTRACTOR_COLUMNS), spent, notes


def agreement(paths: Sequence[str | Path], out_dir: str | Path, *, reference: str | Path | None = None,
              metrics: Sequence[str] | None = None, alpha: float = ALPHA, re_extract: bool = False,
              address: str | None = None) -> AgreementResult:
    """The agreement tables of ``paths`` (one design, different simulator models) against ``reference``;
    ``re_extract``: also have each other run's extractor label all the reference's exchanges
    (table ``extractor_reextraction``, resumable under ``out_dir/re_extraction``)."""
    from ray_knowsim.audit.run import audit_run

    paths = [str(p) for p in paths]
    if len(paths) < 2:
        raise ValueError("agreement needs at least two runs (one design under different simulator models)")
    labels = _labels(paths)
    loaded = [load_runs([p])[0] for p in paths]
    readers = [open_run(p) for p in paths]
    check_same_design(loaded, [r.manifest or {} for r in readers])
    ref_label = labels[paths.index(str(reference))] if reference is not None and str(reference) in paths else labels[0]
    if reference is not None and str(reference) not in paths:
        raise ValueError(f"--reference {reference} is not one of the runs")
    runs = {label: run.sessions for label, run in zip(labels, loaded)}
    conditions = loaded[0].conditions
    metrics = list(metrics) if metrics else pick_metrics(runs[ref_label], None)
    opts = CompareOptions(metrics=metrics, alpha=alpha)
    rank, item = rank_and_item_tables(runs, ref_label, conditions, metrics)
    tables = {"rank_agreement": rank, "item_agreement": item, "verdicts": verdict_table(runs, conditions, opts),
              "extractor_agreement": extractor_table(dict(zip(labels, paths)), ref_label, runs[ref_label])}
    audits = []
    for label, reader in zip(labels, readers):
        a = audit_run(reader)
        audits.append({"run": label, "n_sessions": len(a.sessions), "n_flagged": len(a.flagged_ids()),
                       "flagged_share": len(a.flagged_ids()) / len(a.sessions) if len(a.sessions) else float("nan"),
                       "n_learner_flagged": len(a.flagged_ids("learner")), "n_extractor_flagged": len(a.flagged_ids("extractor"))})
    tables["audit"] = pd.DataFrame(audits)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spent, re_notes = {}, []
    if re_extract:
        tables["extractor_reextraction"], spent, re_notes = reextraction_table(dict(zip(labels, paths)), ref_label, out, address)
    for name in [*TABLES, *(["extractor_reextraction"] if re_extract else [])]:
        write_table(tables[name], out, name)
    verdicts = tables["verdicts"]
    signif = verdicts[[c for c in verdicts.columns if c.startswith("verdict@")]].ne("no verdict").any(axis=1) if len(verdicts) else []
    notes = [f"{int(verdicts['holds_everywhere'].sum())} of {int(np.sum(signif))} verdicts significant under some simulator "
             f"hold under every one" if len(verdicts) else "no verdicts"]
    ex = tables["extractor_agreement"]
    if len(ex):
        pooled = ex[ex["item_id"] == "all"]
        notes.append(f"extractor labels compared on {int(pooled['n_labels'].sum()):,} (turn, IU) pairs of identical exchanges")
    else:
        notes.append("no exchange was the same text in two runs: the extractors' labels could not be paired")
    notes += re_notes
    info = {"runs": [{"label": lab, "path": p} for lab, p in zip(labels, paths)], "reference": ref_label,
            "metrics": metrics, "alpha": alpha, "conditions": conditions, "notes": notes,
            **({"re_extraction": spent} if re_extract else {}),
            "simulators": {lab: (r.manifest or {}).get("config", {}).get("roles", {}) for lab, r in zip(labels, readers)},
            "definitions": __doc__}
    (out / "agreement.json").write_text(json.dumps(info, indent=1, default=str), encoding="utf-8")
    return AgreementResult(out, tables, labels, ref_label, notes)


__all__ = ["AgreementResult", "EXTRACTOR_COLUMNS", "TABLES", "agreement", "check_same_design", "extractor_table", "item_means",
           "label_rows", "rank_and_item_tables", "reextraction_table", "verdict_table"]
