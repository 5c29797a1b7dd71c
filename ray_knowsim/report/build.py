"""Build the report of one run directory: stream-reduce sessions, load the shown conversations,
draw, render HTML and Markdown, write both. The one entry point the CLI calls."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ray_knowsim.report.aggregate import PerTask, RunSummary, pick_sample
from ray_knowsim.report.banner import manifest_banner
from ray_knowsim.report.content import ReportContent
from ray_knowsim.report.explain import conversation_view
from ray_knowsim.report.html_page import render_html
from ray_knowsim.report.judges import judge_blocks, judges_html, judges_markdown
from ray_knowsim.report.markdown import render_markdown
from ray_knowsim.report.metrics import Gain, Variant, metric_specs
from ray_knowsim.report.plots import failure_mode_plot, overview_plot, trajectory_plot
from ray_knowsim.tables.outcomes import READ as OUTCOME_COLUMNS
from ray_knowsim.tables.outcomes import OutcomeCounter, role_totals, truncations_by_role
from ray_knowsim.audit.run import audit_run
from ray_knowsim.io.rundir import RunDirError, RunReader, import_run_plugins, open_run, status_words
from ray_knowsim.report.audit import AuditSection, audit_html, audit_markdown
from ray_knowsim.tables.sanity import JUDGE_SCORES, SanityReport, checks, read_turns, scan_turns
from ray_knowsim.report.tables import apply_verdicts, failure_table, marginal_table, per_level_table
from ray_knowsim.score.store import RunScores


@dataclass
class ReportOptions:
    variant: Variant = "final"
    gain: Gain = "kg"
    sample: int = 6  # conversations shown when none are named
    sessions: Sequence[str] = field(default_factory=tuple)  # explicit session ids to show
    seed: int = 0
    title: str | None = None
    allow_incomplete: bool = False  # report (and rank) a run that holds fewer sessions than planned; the page says so


class IncompleteRun(RunDirError):
    """The run holds fewer sessions than it planned (or is still running): its ranking may name
    another winner than the full run's, so it is not reported unless asked (``--allow-incomplete``)."""


@dataclass
class ReportResult:
    html_path: Path
    markdown_path: Path
    content: ReportContent


def build_report(run_dir: str | Path, out_dir: str | Path | None = None, options: ReportOptions | None = None) -> ReportResult:
    opts = options or ReportOptions()
    run = open_run(run_dir)
    run_status = run.status()
    completeness = run_status.completeness()
    if completeness.incomplete and not opts.allow_incomplete:
        raise IncompleteRun(f"{run.root}: incomplete run, {completeness.text}. Its ranking may differ from the full run's: "
                            "resume it first, or pass --allow-incomplete to report what is committed (the page says so)")
    import_run_plugins(run.manifest)  # the run's outside metrics (labels, directions): shown after the paper's four
    specs = metric_specs(opts.variant, opts.gain, present=run.sessions.names)
    scores = RunScores.load(run.root, run)

    # ONE pass over the session rows: the run's summary, each task's, the outcome counts (failures,
    # truncations) and the sanity checks' session inputs (their turn rows are read first)
    sanity = read_turns(scan_turns(run.turns) if run.turns is not None else ())
    outcomes = OutcomeCounter()

    def new_summary(sample: int) -> RunSummary:
        return RunSummary(tuple(s.column for s in specs), sample_per_cell=sample, seed=opts.seed)

    summary = new_summary(0 if opts.sessions else max(0, opts.sample))
    per_task = PerTask(lambda: new_summary(0))
    for batch in run.sessions.scan(list(dict.fromkeys([*summary.columns(), *OUTCOME_COLUMNS, *JUDGE_SCORES]))):
        if batch.num_rows == 0:
            continue
        outcomes.add(batch)
        joined = scores.attach(batch) if scores.sets else batch
        sanity.add_sessions(joined)
        per_task.add(joined, summary)
        summary.add(joined)
    if summary.rows == 0:
        raise RunDirError(f"{run.root}/sessions holds no rows")
    tasks = sorted(str(t) for t in summary.facts.get("task", {}) if t is not None)

    if opts.sessions:
        ids = list(dict.fromkeys(opts.sessions))
        note = f"{len(ids)} conversation(s) chosen on the command line."
    else:
        ids = pick_sample(summary, opts.sample)
        note = (
            f"{len(ids)} conversation(s) sampled (seed {opts.seed}), spread over levels and conditions; "
            "choose others with --sessions or --sample/--seed."
        )
    session_rows = {r["session_id"]: r for r in _joined(run.sessions.rows_of(ids), scores)}
    unknown = [i for i in ids if i not in session_rows]
    if unknown and opts.sessions:
        raise RunDirError(f"session id(s) not in {run.root}/sessions: {', '.join(unknown[:5])}")
    turns_by: dict[str, list[dict]] = defaultdict(list)
    if run.turns is not None:
        for row in run.turns.rows_of([i for i in ids if i in session_rows]):
            turns_by[row["session_id"]].append(row)
    else:
        note += " This run has no turns table, so no messages or trajectories."
    views = [conversation_view(session_rows[i], turns_by.get(i, [])) for i in ids if i in session_rows]

    run_ids = sorted(str(v) for v in summary.facts.get("run_id", {}) if v is not None)
    content = ReportContent(
        title=opts.title or f"KnowSim report — {', '.join(run_ids[:3]) or Path(run.root).name}",
        run_dir=Path(run.root).resolve(),
        variant=opts.variant,
        specs=specs,
        summary=summary,
        per_level=[], marginal=[], failures=[],  # the first task section's, set below (tasks are never pooled)
        conversations=views,
        generated=_dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        sample_note=note,
    )
    content.banner = offline_banner(Path(run.root), run.manifest)
    content.completeness = completeness
    content.status = status_words(run.manifest, completeness, run_status.n_committed, run_status.n_failed)
    content.failure_kinds = outcomes.failures(("task", "condition"))  # the run's tables count them the same way
    truncations = outcomes.truncations()
    content.truncations = truncations_by_role(truncations)
    content.truncation_totals = role_totals(truncations)
    content.sanity = SanityReport(checks(sanity), sanity)
    for task in tasks or [None]:
        part = per_task.of(task) if len(tasks) > 1 else summary
        part_failures = failure_table(part)
        section = dataclasses.replace(
            content, task=task, summary=part, per_level=per_level_table(part, specs), marginal=marginal_table(part, specs),
            failures=part_failures, conversations=[], figures={}, sections=[],
        )  # fmt: skip
        section.figures["overview"] = overview_plot(part, specs)
        section.figures["failure_modes"] = failure_mode_plot(part_failures, part.levels)
        content.sections.append(section)
    first = content.sections[0]
    content.per_level, content.marginal, content.failures = first.per_level, first.marginal, first.failures
    content.figures = dict(first.figures)
    content.trajectories = [trajectory_plot(v) for v in views]
    from ray_knowsim.report.decisions import decision_sections

    content.decisions_html, content.decisions_md, verdicts = decision_sections(run.root, scores=scores, reader=run)
    content.verdicts = verdicts
    if verdicts is not None:  # positions and ★ from the verdicts' leaderboards (item win rate), never from the means
        for section in content.sections:
            apply_verdicts(section.per_level, section.marginal, specs, verdicts.boards_of(section.task if len(content.sections) > 1 else None))
    audit_section = simulator_audit(run, scores)  # does the verdict depend on the simulator?
    content.decisions_html.append(audit_html(audit_section))
    content.decisions_md += audit_markdown(audit_section)
    if len(scores.sets) > 1:  # re-judged: does the verdict depend on the judge?
        small = run.sessions.read(["session_id", "task", "condition", "status"])
        blocks = judge_blocks(scores.attach(small).to_pandas(), scores.primary, list(scores.sets))
        content.decisions_html += judges_html(blocks)
        content.decisions_md += judges_markdown(blocks)

    out = Path(out_dir) if out_dir is not None else Path(run.root) / "report"
    out.mkdir(parents=True, exist_ok=True)
    suffix = ("_nkg" if opts.gain == "nkg" else "") + ("_es" if opts.variant == "es" else "")  # variants side by side
    html_path = out / f"report{suffix}.html"
    md_path = out / f"report{suffix}.md"
    html_path.write_text(render_html(content), encoding="utf-8")
    md_path.write_text(render_markdown(content), encoding="utf-8")
    return ReportResult(html_path.resolve(), md_path.resolve(), content)


def simulator_audit(run: RunReader, scores: RunScores) -> AuditSection:
    """The run's simulator audit and its verdicts recomputed without the flagged sessions."""
    from ray_knowsim.compare.sensitivity import changed_lines, verdict_sensitivity
    from ray_knowsim.compare.paired import CompareOptions
    from ray_knowsim.compare.pipeline import default_metrics
    from ray_knowsim.compare.runs import load_runs

    from ray_knowsim.score.review import review_agreement

    audit = audit_run(run)
    section = AuditSection(audit, review=review_agreement(run, audit))  # computed now: the run may have grown since `score`
    try:
        loaded = load_runs([run.root], reader=run, scores=scores)[0]
    except (RunDirError, ValueError, KeyError) as exc:
        section.why_no_sensitivity = f"Verdicts were not recomputed: compare cannot read this run ({exc})."
        return section
    if len(loaded.conditions) < 2 or not len(loaded.sessions):
        section.why_no_sensitivity = "One condition: there is no verdict to recompute."
        return section
    opts = CompareOptions(metrics=default_metrics(loaded.sessions))
    section.sensitivity = verdict_sensitivity(loaded.sessions, loaded.conditions, section.audit.flagged_ids(), opts)
    section.changed = changed_lines(section.sensitivity)
    return section


def _joined(rows: list[dict[str, Any]], scores: RunScores) -> list[dict[str, Any]]:
    """Session rows with the judges' scores joined in (``scores/``; see ray_knowsim.score.store)."""
    if not rows or not scores.sets:
        return rows
    return scores.attach(pa.Table.from_pylist(rows)).to_pylist()


def offline_banner(run_dir: Path, manifest: dict[str, Any] | None = None) -> str | None:
    """A warning when any role of the run was answered by a test double (the offline model): its
    numbers show that the pipeline works, not how real models behave. Read from the manifest's
    ``test_doubles``; manifests written before it existed name the built-in ``offline`` backend
    in their config, which is read instead. ``manifest``: the run's, when the caller has read it
    (otherwise ``run_dir/manifest.json`` is read)."""
    if manifest is not None:
        return manifest_banner(manifest)
    path = run_dir / "manifest.json"
    if not path.is_file():
        return None
    return manifest_banner(json.loads(path.read_text(encoding="utf-8")))
