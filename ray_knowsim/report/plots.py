"""The report's pictures as PNG data URIs (matplotlib, Agg backend: no display, no files).

Three kinds: a metric overview (means with 95% CIs per level), the failure-mode composition
(the paper's Figure 6) and one knowledge-state heatmap per shown conversation (Figure 1).
"""

from __future__ import annotations

import base64
import io
import textwrap
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import BoundaryNorm, ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from ray_knowsim.schema.results import FAILURE_MODES  # noqa: E402
from ray_knowsim.report.aggregate import RunSummary  # noqa: E402
from ray_knowsim.report.explain import SHORT_STATE, ConversationView  # noqa: E402
from ray_knowsim.report.metrics import MetricSpec  # noqa: E402
from ray_knowsim.report.tables import FailureRow  # noqa: E402

STATE_COLOURS = ("#e8e8e8", "#f4a259", "#7fb7e6", "#1f5f99")
FM_COLOURS = {
    "effective": "#2e9e5b",
    "under_absorbed": "#e6c229",
    "overload_wasted": "#d64545",
    "prereq_blocked": "#f28c28",
    "redundant": "#9a9a9a",
}
FM_LABELS = {
    "effective": "effective",
    "under_absorbed": "under-absorbed",
    "overload_wasted": "overload-wasted",
    "prereq_blocked": "prereq-blocked",
    "redundant": "redundant",
}
FM_ORDER = ("effective", "under_absorbed", "overload_wasted", "prereq_blocked", "redundant")
if set(FM_ORDER) != set(FAILURE_MODES):  # the chart must show exactly the contract's modes
    raise RuntimeError(f"FM_ORDER {FM_ORDER} does not match FAILURE_MODES {FAILURE_MODES}")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")

plt.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.spines.right": False})


def to_data_uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)  # layout is fixed by tight_layout; a "tight" bbox would draw twice
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _margins(fig, *, left: float, right: float, top: float, bottom: float, **space) -> None:
    """Fix the layout in inches (cheaper than tight_layout, which draws the figure again)."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h, **space)


def _short(text: str, width: int = 28) -> str:
    return textwrap.shorten(text, width=width, placeholder="…")


def overview_plot(summary: RunSummary, specs: Sequence[MetricSpec]) -> str:
    """One panel per metric: x = level, one marker (mean ± 95% CI) per condition."""
    conds, levels = summary.conditions, summary.levels
    legend_rows = 1 + (len(conds) - 1) // 4
    fig, axes = plt.subplots(1, len(specs), figsize=(3.1 * len(specs), 2.7 + 0.22 * legend_rows), squeeze=False)
    width = 0.8 / max(1, len(conds))
    for ax, spec in zip(axes[0], specs):
        for k, c in enumerate(conds):
            xs, ys, lo, hi = [], [], [], []
            for i, lv in enumerate(levels):
                m = summary.cell(c, lv, spec.column)
                if m.value is None:
                    continue
                cm = summary.interval(c, [lv], spec.column)
                ci = (cm.ci_low, cm.ci_high) if cm.ci_low == cm.ci_low else (m.mean, m.mean)
                xs.append(i - 0.4 + width * (k + 0.5))
                ys.append(m.mean)
                lo.append(m.mean - ci[0])
                hi.append(ci[1] - m.mean)
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", ms=4, capsize=2, color=PALETTE[k % len(PALETTE)], label=c)
        ax.set_xticks(range(len(levels)), levels)
        ax.set_xlim(-0.5, len(levels) - 0.5)
        ax.set_title(f"{spec.label} {spec.arrow}", fontweight="bold")
        ax.grid(axis="y", alpha=0.3)
    seen: dict[str, object] = {}
    for ax in axes[0]:  # a condition may appear in some panels only (baselines: IQ only)
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    labels = [c for c in conds if c in seen]
    if labels:
        fig.legend([seen[c] for c in labels], labels, loc="lower center", ncol=min(4, len(labels)), frameon=False, bbox_to_anchor=(0.5, 0.0))
    _margins(fig, left=0.45, right=0.1, top=0.3, bottom=0.4 + 0.24 * legend_rows, wspace=0.3)
    return to_data_uri(fig)


def failure_mode_plot(rows: Sequence[FailureRow], levels: Sequence[str]) -> str | None:
    """Stacked horizontal bars of failure-mode shares, one panel per level, one bar per condition."""
    levels = [lv for lv in levels if any(r.level == lv for r in rows)]
    if not levels:
        return None
    n_cond = max(sum(1 for r in rows if r.level == lv) for lv in levels)
    longest = max(len(_short(r.condition, 34)) for r in rows)
    panel = 0.3 * n_cond + 0.15
    fig, axes = plt.subplots(len(levels), 1, figsize=(7.5, 0.95 + (panel + 0.35) * len(levels)), squeeze=False, sharex=True)
    for ax, lv in zip(axes[:, 0], levels):
        sub = [r for r in rows if r.level == lv]
        names = [_short(r.condition, 34) for r in sub]
        left = [0.0] * len(sub)
        for mode in FM_ORDER:
            shares = [100 * (r.share(mode) or 0.0) for r in sub]
            ax.barh(names, shares, left=left, color=FM_COLOURS[mode], edgecolor="white", linewidth=0.5, label=FM_LABELS[mode])
            for y, (x0, w) in enumerate(zip(left, shares)):
                if w >= 8:
                    ax.text(x0 + w / 2, y, f"{w:.0f}", ha="center", va="center", fontsize=7, color="white" if mode != "under_absorbed" else "black")
            left = [a + b for a, b in zip(left, shares)]
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_title(lv, loc="left", fontweight="bold")
    axes[-1, 0].set_xlabel("share of explained IU events (%)")
    handles = [Patch(color=FM_COLOURS[m], label=FM_LABELS[m]) for m in FM_ORDER]
    fig.legend(handles=handles, loc="upper center", ncol=5, frameon=False, bbox_to_anchor=(0.5, 1.0))
    _margins(fig, left=0.25 + 0.08 * longest, right=0.25, top=0.55, bottom=0.45, hspace=0.35 / panel)
    return to_data_uri(fig)


def trajectory_plot(view: ConversationView) -> str | None:
    """IU x turn heatmap of states (column 0 = initial); ▼ marks overloaded turns, ● marks moves,
    the dashed line the virtual early stop."""
    if not view.has_state:
        return None
    import numpy as np

    grid = np.array(view.states, dtype=float).T  # IU x (T+1)
    n_iu, n_col = grid.shape
    names = [_short(lab, 30) for lab in view.labels]
    left = 0.15 + 0.05 * max(len(n) for n in names)
    fig, ax = plt.subplots(figsize=(left + 0.42 * n_col + 1.2, 0.75 + 0.26 * (n_iu + 0.7)))
    cmap = ListedColormap(STATE_COLOURS)
    ax.imshow(grid, cmap=cmap, norm=BoundaryNorm([-0.5, 0.5, 1.5, 2.5, 3.5], 4), aspect="auto", interpolation="nearest")
    moved_y, moved_x = np.nonzero(grid[:, 1:] > grid[:, :-1])
    ax.scatter(moved_x + 1, moved_y, s=10, c="white", edgecolors="black", linewidths=0.5, zorder=3)
    ax.set_yticks(range(n_iu), names, fontsize=7)
    ax.set_xticks(range(n_col), ["init"] + [str(t) for t in range(1, n_col)], fontsize=7)
    ax.set_xlabel("turn")
    for t in view.turns:
        if t.overload and t.turn < n_col:
            ax.text(t.turn, -0.75, "▼", ha="center", va="bottom", color="#d64545", fontsize=8)
    es = view.session.get("early_stop_turn")
    if es:
        ax.axvline(es + 0.5, color="black", linestyle="--", linewidth=1)
    ax.set_ylim(n_iu - 0.5, -1.2)
    for spine in ax.spines.values():
        spine.set_visible(False)
    handles = [Patch(color=c, label=SHORT_STATE[i]) for i, c in enumerate(STATE_COLOURS)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=7)
    _margins(fig, left=left, right=1.2, top=0.1, bottom=0.45)
    return to_data_uri(fig)
