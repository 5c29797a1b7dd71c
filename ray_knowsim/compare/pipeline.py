"""``compare`` end to end: read runs, check they merge, analyse, write tables and the HTML page."""

from __future__ import annotations

from ray_knowsim.stats.multiplicity import correction_name

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pandas as pd

from ray_knowsim.compare.failures import failure_counts, failure_gaps, gap_warnings
from ray_knowsim.compare.leaderboard import leaderboard, render_html
from ray_knowsim.compare.paired import ALL_LEVELS, CompareOptions, analyse, pick_metrics, too_few_items
from ray_knowsim.stats.defaults import ALPHA, POWER
from ray_knowsim.stats.leaderboard import TIER_RULE
from ray_knowsim.stats.rates import DEFAULT_MIN_DIFF
from ray_knowsim.compare.runs import LoadedRun, load_runs, merged_sessions
from ray_knowsim.io.tables import write_table

TABLES = ("paired", "best", "mde", "leaderboard", "failures", "failure_gaps", "audit_sensitivity")


@dataclass
class CompareResult:
    out_dir: Path
    tables: dict[str, pd.DataFrame]
    conditions: list[str]
    warnings: list[str] = field(default_factory=list)  # conditions failing at rates that bias the comparison
    incomplete: list[str] = field(default_factory=list)  # runs ranked although incomplete (allow_incomplete)
    too_few: list[str] = field(default_factory=list)  # per task without any testable comparison: why nothing can be significant
    simulator: "SimulatorDependence | None" = None  # the verdicts without the audit's flagged sessions


def default_metrics(sessions: pd.DataFrame) -> list[str]:
    ms = pick_metrics(sessions, None)
    if "cost_usd" in sessions.columns and (sessions["cost_usd"] > 0).any():
        ms.append("cost_usd")
    return ms


def unequal_n_notes(best: pd.DataFrame) -> list[str]:
    """A note per task whose conditions cover different numbers of items (an adaptive run, or an
    interrupted one): their means are over different items."""
    out = []
    marg = best[best["knowledge_level"] == ALL_LEVELS]
    for task, g in marg.groupby("task"):
        items = g.groupby("condition")["n_items"].max()
        if items.nunique() > 1:
            out.append(f"{task}: conditions cover unequal numbers of items ({', '.join(f'{c} {n}' for c, n in items.items())}; "
                       "an adaptive or interrupted run): their means are over different items; the paired verdicts use "
                       "matched items only.")
    return out


QUANTITY_NOTE = ("One quantity from verdict to leaderboard: the item win rate. Per item, each condition's mean over its ok "
                 "sessions; an item is a win, a loss or a tie for a pair. On each metric's leaderboard " + TIER_RULE
                 + ". The mean item rank is 1 + the sum of a condition's losing shares, ties half. The paper's mean rank "
                 "(ranks of means over KG, DC, CO, IQ) is shown as description.")


def verdict_records(paired: pd.DataFrame) -> list[dict]:
    """compare.json's machine-readable verdicts: every paired row's counts, verdict and sentence."""
    keep = ["task", "knowledge_level", "metric", "condition_a", "condition_b", "n_items", "wins", "losses", "ties",
            "p_adj", "significant", "better", "equivalent", "sentence"]
    out = []
    for r in paired[keep].to_dict(orient="records"):
        r["better"] = r["better"] if isinstance(r["better"], str) else None
        out.append({k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()})
    return out


class IncompleteRuns(ValueError):
    """A run to compare holds fewer sessions than it planned (or is still running): it is not
    ranked unless asked (``allow_incomplete``), since its ranking may differ from the full run's."""


def adaptive_notes(runs: Sequence[LoadedRun]) -> list[str]:
    """One line per adaptive run (it has decisions.json): compare's fixed-sample verdicts re-test
    data collected under a stopping rule, so the run's own sequential verdicts are the valid ones."""
    from ray_knowsim.io.decisions import DECISIONS_FILE

    return [f"{r.label} ({r.path}) is an adaptive run: it stopped collecting where its own sequential tests decided, so "
            f"the fixed-sample verdicts here are not at their stated level for it; its own verdicts are in {DECISIONS_FILE} "
            "(and its report)" for r in runs if (Path(r.path) / DECISIONS_FILE).is_file()]


def incomplete_notes(runs: Sequence[LoadedRun]) -> list[str]:
    """One line per incomplete run (io.rundir's completeness rule)."""
    return [f"{r.label} ({r.path}): {r.completeness.text}" for r in runs if r.completeness is not None and r.completeness.incomplete]


def compare_runs(paths: Sequence[str | Path], out_dir: str | Path, *, metrics: Sequence[str] | None = None,
                 alpha: float = ALPHA, power: float = POWER,
                 family: str = "run", allow_incomplete: bool = False, effect: float | None = None) -> CompareResult:
    runs = load_runs(paths, metrics or ())
    incomplete = incomplete_notes(runs)
    if incomplete and not allow_incomplete:
        raise IncompleteRuns("incomplete run(s), not ranked: " + "; ".join(incomplete)
                             + ". Resume them first, or pass --allow-incomplete to rank what is committed (the page says so)")
    sessions, conditions = merged_sessions(runs)
    metrics = list(metrics) if metrics else default_metrics(sessions)
    opts = CompareOptions(metrics=metrics, alpha=alpha, power=power, family=family,  # type: ignore[arg-type]
                          effect=effect)
    tables = analyse(sessions, conditions, opts)
    runs_of = {c: r.label for r in runs for c in r.conditions}
    tables["leaderboard"] = leaderboard(tables["best"], tables["paired"], runs_of, alpha=opts.alpha, power=opts.power)
    tables["failures"] = failure_counts(pd.concat([r.outcomes for r in runs], ignore_index=True))
    tables["failure_gaps"] = failure_gaps(tables["failures"], conditions, alpha=alpha)
    warnings = gap_warnings(tables["failure_gaps"])
    dependence = simulator_dependence(runs, sessions, conditions, opts)
    tables["audit_sensitivity"] = dependence.table
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        write_table(tables[name], out, name)
    notes = [
        f"Runs: {', '.join(f'{r.label} ({r.path})' for r in runs)}.",
        QUANTITY_NOTE,
        "Mean [95% item-clustered CI] of the level-marginal (unweighted mean of the level means; the run's tables show "
        "the same): description only (CO, PO and cost: lower is better).",
        f"Verdicts: exact sign test over items (each item's mean paired difference; tied items counted, not tested), "
        f"{correction_name(bool(effect))} over {'the whole comparison' if family == 'run' else 'each (task, level, metric)'} "
        f"at alpha {alpha}: a result is significant exactly when its win-rate interval at the row's family level excludes 1/2"
        + (f"; a pair is equivalent when its adjusted win rate (ties half) lies inside 1/2 ± {effect:g}." if effect else "."),
        *sorted(set(tables["leaderboard"]["ranked_set"])),
        "Failure rates per condition and level are in failures.csv; a pair whose rates differ (Fisher's exact test, "
        f"p < {alpha}, and at least 5 points apart) is compared over different sets of cells: "
        + ("; ".join(warnings) if warnings else "no such pair."),
        *unequal_n_notes(tables["best"]),
        dependence.note,
    ]
    flags = [f"Incomplete run, ranked with --allow-incomplete (its ranking may differ from the full run's): {line}" for line in incomplete]
    adaptive = adaptive_notes(runs)
    flags += adaptive
    (out / "leaderboard.html").write_text(render_html(tables["leaderboard"], tables["paired"], metrics, "KnowSim leaderboard", notes,
                                                      alpha, flags=flags), encoding="utf-8")
    info = {"runs": [{"path": r.path, "label": r.label, "conditions": r.conditions} for r in runs],
            "options": opts.model_dump(), "family": ("every paired row of the comparison" if family == "run" else "per (task, knowledge_level, metric): its condition pairs"),
            "quantity": "item win rate",
            "unit": "items: each item contributes the sign of its mean paired difference (level-marginal: mean over levels)",
            "test": f"exact two-sided sign test over items (ties dropped); {correction_name(effect is not None)} over the "
                    "family (p_adj: the correction's adjusted p-value)",
            "verdict": "significant <=> the Clopper-Pearson win-rate interval at 1 - level excludes 1/2 (level: the row's "
                       "family level, alpha / family_size up to alpha) <=> p_adj < alpha; no result is possible below "
                       "min_items non-tied items at the first level, alpha / family_size",
            "leaderboard": "per (task, metric), level-marginal: position = tier from the significant verdicts (1 + the longest "
                           "chain of significant defeats above; no verdict between conditions of one tier, except a cycle, "
                           "named in 'cycle'); tier_note: who beats it and n.s. (no verdict) against the tier above; rows "
                           "within a tier by mean item rank 1 + sum_j (1 - theta_ij) (theta_ij = (wins + ties/2) / matched "
                           "items), descriptive; detectable_win_rate: the family's smallest detectable win rate at power "
                           "(no ties); star = significantly beats every other condition",
            "ranked_set": sorted(set(tables["leaderboard"]["ranked_set"])),
            "verdicts": verdict_records(tables["paired"]),
            "ci": "ci_low/ci_high: descriptive 95% item-clustered interval of mean_diff (item-clustered SE, t on items - 1 df)",
            "mde": "mde_win_rate: smallest win rate detected with the given power (exact binomial; _adj at alpha / "
                   "family_size); mde: the same as a mean difference under a normal shift, sd_item_diff * Phi^-1(q)",
            "too_few_items": [msg for msg in (too_few_items(tables["paired"], t, alpha) for t in sorted(sessions["task"].unique())) if msg],
            "failure_gaps": "Fisher's exact two-sided test on (failed, ok) x (a, b) per (task, level); biased when "
                            f"p < {alpha} and the rates differ by >= {DEFAULT_MIN_DIFF} (p unadjusted)",
            "warnings": warnings, "incomplete": incomplete, "adaptive_runs": adaptive,
            "simulator_dependence": {"note": dependence.note, "flagged_sessions": dependence.n_flagged,
                                     "changed": dependence.changed}}
    too_few = info["too_few_items"]
    (out / "compare.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    return CompareResult(out, tables, conditions, warnings=warnings, incomplete=incomplete, too_few=too_few,
                         simulator=dependence)


@dataclass
class SimulatorDependence:
    """The verdicts recomputed without the sessions the simulator audit flags (compare.sensitivity)."""

    table: pd.DataFrame
    n_flagged: int
    changed: list[str]

    @property
    def note(self) -> str:
        if not self.n_flagged:
            return "Simulator audit: no session flagged, so no verdict rests on a flagged one."
        k = int(self.table["changed"].sum()) if len(self.table) else 0
        return (f"Simulator audit: {self.n_flagged} session(s) flagged; without them {k} of {len(self.table)} verdicts change"
                + (f" ({'; '.join(self.changed[:3])}{' ...' if len(self.changed) > 3 else ''})" if k else "")
                + " (audit_sensitivity.csv).")


def simulator_dependence(runs: Sequence[LoadedRun], sessions: pd.DataFrame, conditions: Sequence[str],
                         opts: CompareOptions) -> SimulatorDependence:
    """Each verdict again without the audit's flagged sessions of every run (compare's own verdict procedure)."""
    from ray_knowsim.compare.sensitivity import changed_lines, verdict_sensitivity
    from ray_knowsim.audit.run import flagged_keys

    flagged = flagged_keys((r.path, r.label) for r in runs)
    keyed = sessions.assign(_audit_key=sessions["run"].astype(str) + "\x00" + sessions["session_id"].astype(str))
    table = verdict_sensitivity(keyed, conditions, flagged, opts, key="_audit_key")
    return SimulatorDependence(table, len(flagged & set(keyed["_audit_key"])), changed_lines(table))
