"""The report's tables as Markdown (GitHub tables), for pasting into issues, papers and notes."""

from __future__ import annotations

from ray_knowsim.report.content import ReportContent
from ray_knowsim.report.banner import BANNER_HEADING
from ray_knowsim.report.escape import escape_md as _md
from ray_knowsim.compare.sentences import interval_text
from ray_knowsim.report.metrics import fmt, ranked_specs
from ray_knowsim.report.tables import coverage_note, has_positions, paper_rank_rows, position_lead
from ray_knowsim.stats.ranks import PAPER_MEAN_RANK_LABEL, PAPER_MEAN_RANK_NOTE
from ray_knowsim.report.outcomes import failed_note_markdown, flags_markdown, task_sections_markdown
from ray_knowsim.report.plots import FM_LABELS, FM_ORDER


def _star(text: str, on: bool) -> str:
    return f"**{text}** ★" if on and text != "–" else text


def _partial(used: int, total: int) -> str:
    return f" ({used}/{total} metrics)" if 0 < used < total else ""


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_markdown(c: ReportContent) -> str:
    out = [f"# {_md(c.title)}", ""]
    if c.banner:
        out += [f"> **{BANNER_HEADING}** {_md(c.banner)}", ""]
    out += flags_markdown(c)  # an incomplete run, a simulator that does not work
    out += [f"- **{_md(k)}**: {_md(v)}" for k, v in c.facts()]
    out += [f"- **run directory**: `{c.run_dir}`", f"- **generated**: {c.generated}", ""]
    sections = c.sections or [c]
    for section in sections:
        if len(sections) > 1:
            out += [f"## Task: {_md(section.task)}", ""]
        out += _results(section, "#" if len(sections) > 1 else "")
        out += task_sections_markdown(section, "#" if len(sections) > 1 else "")  # failures by kind, truncations by role
    out += c.decisions_md  # who beats whom (per task and level) and cost
    if c.conversations:
        out += ["## Conversations shown in the HTML report", ""]
        for v in c.conversations:
            s = v.session
            out.append(f"- `{s.get('session_id')}` ({_md(s.get('condition'))}, {_md(s.get('knowledge_level'))}, {s.get('turns')} turns)")
        out.append("")
    out += ["## Metrics", ""] + [f"- **{s.label}** (`{s.column}`): {_md(s.description)}" for s in c.specs] + [""]
    return "\n".join(out)


def _results(c: ReportContent, deeper: str) -> list[str]:
    """One task's tables (``deeper`` adds a heading level under a task heading)."""
    out: list[str] = []
    positions, in_levels = has_positions(c.per_level, c.marginal)
    out += [f"{deeper}## Level-marginalised results", "", "Unweighted mean of the level means"
            + ("; the position on the item win rate in parentheses. " if positions else ". ") + _md(position_lead(positions, in_levels)), ""]
    heads = ["Condition", "n"] + [f"{s.label} {s.arrow}" for s in c.specs]
    out += [_row(heads), _row(["---"] + ["---:"] * (len(heads) - 1))]
    for r in c.marginal:
        cells = [_md(r.condition) + (" †" if r.missing_levels(c.summary.levels) else ""), f"{r.n:,}{failed_note_markdown(c, r.condition)}"]
        for s in c.specs:
            pos = r.positions.get(s.key)
            cells.append(_star(fmt(r.values[s.key], s.decimals), r.best[s.key]) + (f" (#{pos})" if pos is not None else ""))
        out.append(_row(cells))
    out += ["", "† no data for at least one level: the marginal averages the levels present.", ""]

    out += [f"{deeper}## Results per knowledge level", "", "Mean [95% interval clustered by item: item-clustered SE, Student t on items − 1 df]"
            + (" (#position within the level on the item win rate). " if in_levels else ". ") + _md(position_lead(in_levels, positions)), ""]
    heads = ["Level", "Condition", "n"] + [f"{s.label} {s.arrow}" for s in c.specs]
    out += [_row(heads), _row(["---"] * 2 + ["---:"] * (len(heads) - 2))]
    for block in c.per_level:
        for i, r in enumerate(block.rows):
            cells = [_md(block.level) if i == 0 else "", _md(r.condition), f"{r.n:,}{failed_note_markdown(c, r.condition, block.level)}"]
            for s in c.specs:
                cell = r.cells[s.key]
                txt = _star(fmt(cell.value, s.decimals), cell.best)
                if cell.ci is not None and cell.ci.ci_low == cell.ci.ci_low:  # an interval needs 2 items
                    txt += " " + _md(interval_text(cell.ci.ci_low, cell.ci.ci_high, s.decimals, "every item has the same mean"))
                if cell.position is not None:
                    txt += f" (#{cell.position})"
                cells.append(txt)
            out.append(_row(cells))
    out.append("")
    note = coverage_note(c.per_level)
    if note:
        out += [_md(note), ""]

    out += paper_rank_markdown(c, deeper)
    if c.failures:
        out += [f"{deeper}## Failure modes", "", "Share of explained-IU events (%), summed over conversations.", ""]
        heads = ["Level", "Condition"] + [FM_LABELS[m] for m in FM_ORDER] + ["events"]
        out += [_row(heads), _row(["---"] * 2 + ["---:"] * (len(heads) - 2))]
        for r in c.failures:
            cells = [_md(r.level), _md(r.condition)]
            cells += [fmt(100 * r.share(m) if r.share(m) is not None else None, 1) for m in FM_ORDER]
            cells.append(f"{r.total:,}")
            out.append(_row(cells))
        out.append("")
    return out


def paper_rank_markdown(c: ReportContent, deeper: str = "") -> list[str]:
    """The paper's mean rank in its own labelled table (ranks of the means; descriptive)."""
    specs = ranked_specs(c.specs)  # the paper's mean rank is over the ranked metrics only
    title = PAPER_MEAN_RANK_LABEL[0].upper() + PAPER_MEAN_RANK_LABEL[1:]
    out = [f"{deeper}## {_md(title)}", "", _md(PAPER_MEAN_RANK_NOTE) + " Over " + ", ".join(s.label for s in specs) + ".", ""]
    heads = ["Levels", "Condition"] + [f"{s.label}: rank of the mean" for s in specs] + [_md(PAPER_MEAN_RANK_LABEL)]
    out += [_row(heads), _row(["---"] * 2 + ["---:"] * (len(heads) - 2))]
    for r in paper_rank_rows(c.per_level, c.marginal, specs):
        out.append(_row([_md(r.scope), _md(r.condition), *[str(r.ranks[s.key]) if r.ranks[s.key] is not None else "–" for s in specs],
                         fmt(r.mean_rank, 2) + _partial(r.ranks_used, len(specs))]))
    return out + [""]
