"""Write the validation tables (Parquet + CSV + a JSON summary) and render the printed table.

Files in the output folder, each as ``<name>.parquet`` and ``<name>.csv``:
  ``agreement``        Table 3: k/n, %, one-sided binomial p per simulator and grouping
  ``pairs``            every condition pair: Cliff's delta, oriented contrasts, high-signal, agree
                       (Figure 3 data: human delta vs simulated contrast)
  ``cell_means``       human and sim cell means, sds, n and oriented z-scores (Figure 2 data)
  ``spearman``         rho of the z-scored cell means per grouping
  ``coverage``         per-cell concept-coverage Jaccard (Figure 4 data), ``coverage_summary``
  ``human_sessions``   the loaded human sessions with level and metrics (for audits)
  ``extractor_human_agreement`` / ``extractor_human_labels`` (``--extractor-agreement``): kappa and
                       TPR/TNR per label of the extractor against people's per-IU labels, and each label
plus ``validation.json``: parameters, notes and the file list.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from ray_knowsim.io import tables as table_io


def write_tables(tables: dict[str, pd.DataFrame], out_dir: Path, params: dict, notes: list[str]) -> list[Path]:
    out_dir = Path(out_dir)
    written = table_io.write_tables(tables, out_dir)
    summary = out_dir / "validation.json"
    summary.write_text(json.dumps({"params": params, "notes": notes, "files": [p.name for p in written]}, indent=2, default=str))
    return [*written, summary]


def _p(p: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "-"
    return "<.0001" if p < 0.0001 else f"{p:.4f}"


def format_report(tables: dict[str, pd.DataFrame], threshold: float) -> str:
    """Table 3 per simulator, then Spearman and coverage one-liners."""
    lines: list[str] = []
    agr = tables["agreement"]
    rho = tables.get("spearman", pd.DataFrame())
    cov = tables.get("coverage_summary", pd.DataFrame())
    if agr.empty:
        return f"no high-signal pairs (|delta| >= {threshold}) in the human data\n"
    for simulator, sub in agr.groupby("simulator", dropna=False, sort=False):
        name = simulator if isinstance(simulator, str) else "(no simulated session matched)"
        title = f"Sign agreement on high-signal pairs (|Cliff's delta| >= {threshold:g}), simulator: {name}"
        lines += [title, "-" * len(title), f"{'grouping':<12}{'group':<22}{'k/n':>9}{'%':>8}{'p (1-sided)':>13}  not evaluable"]
        for r in sub.itertuples(index=False):
            pct = "-" if r.n == 0 else f"{r.pct:.1f}"
            lines.append(f"{r.grouping:<12}{r.group:<22}{f'{r.k}/{r.n}':>9}{pct:>8}{_p(r.p_value):>13}  {r.n_not_evaluable}")
        if not rho.empty:
            for r in rho[(rho["simulator"] == simulator) & (rho["grouping"].isin(["overall", "metric"]))].itertuples(index=False):
                val = "-" if math.isnan(r.rho) else f"{r.rho:+.3f}"
                lines.append(f"Spearman rho of z-scored cell means [{r.grouping} {r.group}]: {val} (n={r.n_cells}, p={_p(r.p_value)})")
        if not cov.empty:
            for r in cov[(cov["simulator"] == simulator) & (cov["grouping"] == "overall")].itertuples(index=False):
                lines.append(
                    f"Concept coverage Jaccard: {r.mean_jaccard:.3f} (union per cell), "
                    f"{r.mean_pairwise_jaccard:.3f} (mean pairwise), {r.n_cells} cells"
                )
        lines.append("")
    return "\n".join(lines)


def format_extractor_agreement(result) -> str:  # noqa: ANN001 - extractor_labels.ExtractorAgreement
    """The printed extractor-vs-people table: per task (all items), n, kappa, TPR/TNR per label, cost."""
    from ray_knowsim.validate.knowchat_labels import LABELS

    def f(v: float) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

    rep = result.replies
    cost = rep["cost_usd"].dropna()
    lines = [
        f"extractor vs people's per-IU labels: {len(rep)} replies ({result.asked} asked now, {len(rep) - result.asked} resumed), "
        f"{int(rep['calls'].sum())} calls, {int(rep['prompt_tokens'].sum() + rep['completion_tokens'].sum())} tokens"
        + (f", ${cost.sum():.4f}" if len(cost) else ", no price"),
        "task       items   replies  labels  agree  kappa  " + "  ".join(f"TPR/TNR {c}" for c in LABELS),
    ]
    for r in result.agreement.itertuples(index=False):
        if r.item_id != "all":
            continue
        rates = "  ".join(f"{f(getattr(r, f'tpr_{c}'))}/{f(getattr(r, f'tnr_{c}'))}".ljust(len(f"TPR/TNR {c}")) for c in LABELS)
        lines.append(f"{r.task:<10} {'all':<7} {r.n_replies:>7}  {r.n:>6}  {f(r.agreement)}  {f(r.kappa)}  {rates}")
    return "\n".join(lines)
