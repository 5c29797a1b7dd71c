"""The report's decision sections: an adaptive run's decision trace and its own sequential
verdicts, or -- for a fixed run -- "who beats whom" per level from ``ray-knowsim compare``'s
code (:mod:`ray_knowsim.compare`); the verdicts in words; and what the run cost (:mod:`ray_knowsim.tables.cost`),
with its cost per decision reached (:mod:`.per_decision`).
An adaptive run's stopped data is never re-tested with the fixed-sample test (:mod:`.verdicts`).
"""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path

import pandas as pd

from ray_knowsim.schema.price import NO_PRICE, usd_text
from ray_knowsim.compare.leaderboard import beats_html, beats_markdown, beats_note
from ray_knowsim.stats.defaults import ALPHA
from ray_knowsim.compare.paired import ALL_LEVELS, CompareOptions, analyse
from ray_knowsim.schema.states import level_order
from ray_knowsim.compare.pipeline import default_metrics
from ray_knowsim.compare.runs import load_runs
from ray_knowsim.tables.cost import run_cost_table
from ray_knowsim.score.spend import spend_of_run
from ray_knowsim.io.decisions import DecisionsFormatError, read_decisions
from ray_knowsim.io.rundir import RunReader, open_run
from ray_knowsim.schema.decisions import DecisionsFile
from ray_knowsim.report.per_decision import LABEL as PER_DECISION, run_per_decision
from ray_knowsim.report.verdicts import RunVerdicts, from_compare, from_record, verdict_texts
from ray_knowsim.stats.leaderboard import board_line
from ray_knowsim.score.store import RunScores

log = logging.getLogger(__name__)
FAMILY_NOTE = (f" The family is every comparison of the run (alpha {ALPHA}); CO and PO count lower as better. "
               "Details with intervals and minimum detectable effects: ray-knowsim compare RUN_DIR --out DIR.")


def decision_sections(run_dir: str | Path, scores: RunScores | None = None,
                      reader: RunReader | None = None) -> tuple[list[str], list[str], RunVerdicts | None]:
    """(HTML sections, Markdown lines, the verdicts behind them); empty when there is nothing to
    compare or cost. An adaptive run shows its own sequential verdicts (decisions.json); a fixed
    run compare's verdicts. ``scores`` / ``reader``: the run's when the caller already has them."""
    html_parts: list[str] = []
    md: list[str] = []
    verdicts: RunVerdicts | None = None
    try:
        record = read_decisions(run_dir)
    except DecisionsFormatError as exc:  # an adaptive record of another version: said, and the rest is shown
        log.warning("report of %s: %s", run_dir, exc)
        html_parts.append(f'<section id="adaptive-decisions"><h2>Adaptive decisions</h2><p class="lead">'
                          f'{html.escape(str(exc))}</p></section>')
        md += ["## Adaptive decisions", "", str(exc), ""]
        record = None
    if record is not None:
        h, m = trace_sections(record)
        html_parts.append(h)
        md += m
        verdicts = from_record(record)
        h, m = _sentences(verdicts, "Verdicts of the adaptive run (its own sequential tests)")
        h2, m2 = _board_sections(verdicts, None)
        html_parts += [h, h2]
        md += m + m2
    try:
        reader = reader if reader is not None else open_run(run_dir)
        scores = scores if scores is not None else RunScores.load(run_dir, reader)
        run = load_runs([run_dir], reader=reader, scores=scores)[0]
    except Exception as exc:  # noqa: BLE001 - a run compare cannot read (e.g. an old format): the report shows the rest
        why = f"not computed: compare cannot read this run ({type(exc).__name__}: {exc})"
        log.warning("report of %s: who-beats-whom %s", run_dir, why)
        html_parts.append(f'<section id="who-beats-whom"><h2>Who beats whom</h2><p class="lead">{html.escape(why)}</p></section>')
        md += ["## Who beats whom", "", why, ""]
        run = None
    if record is None and run is not None and len(run.conditions) > 1 and len(run.sessions):
        paired, verdicts = fixed_verdicts(run)
        note = beats_note(paired) + FAMILY_NOTE
        blocks, md_blocks = [], []
        for task in sorted(paired["task"].unique()):
            here = [v for v in paired[paired["task"] == task]["knowledge_level"].unique() if v != ALL_LEVELS]
            levels = [*level_order(here), ALL_LEVELS]
            for level in levels:
                blocks.append(beats_html(paired, task, level))
                md_blocks += [f"### {task}, level {level}", "", *beats_markdown(paired, task, level), ""]
        h, m = _sentences(verdicts, "Verdicts")
        h2, m2 = _board_sections(verdicts, (ALL_LEVELS,))
        html_parts.append('<section id="who-beats-whom"><h2>Who beats whom</h2>'
                          f'<p class="lead">{html.escape(note)}</p>{"".join(blocks)}</section>')
        html_parts += [h, h2]
        md += ["## Who beats whom", "", note, "", *md_blocks, *m, *m2]
    reader = reader if reader is not None else RunReader.open(run_dir)
    if reader.sessions.files:
        scores = scores if scores is not None else RunScores.load(run_dir, reader)
        cost = run_cost_table(reader, scores.attach if scores.sets else None, spend_of_run(reader))
        note = _reestimate_note(Path(run_dir))
        per = run_per_decision(verdicts, cost.iloc[-1].to_dict())
        html_parts.append(_cost_html(cost, note, per.line if per else None))
        md += _cost_md(cost, note, per.line if per else None)
    return html_parts, md, verdicts


def _board_sections(verdicts: RunVerdicts, levels: tuple[str, ...] | None) -> tuple[str, list[str]]:
    """Per (task, level, metric) the conditions in tiers from the verdicts
    (:func:`ray_knowsim.stats.leaderboard.board_line`: a step without a verdict says n.s., the
    mean item rank is labelled descriptive), and the smallest effect the run could detect."""
    e = html.escape
    rows = []
    for (task, level, metric), b in sorted(verdicts.boards.items()):
        if levels is not None and level not in levels:
            continue
        mde = b.detectable.text() if b.detectable is not None else ""
        rows.append((task, level, metric.upper(), board_line(b), mde))
    if not rows:
        return "", []
    lead = ("Per metric, the conditions in tiers from the significant verdicts on the item win rate: a condition's tier is "
            "1 + the longest chain of significant defeats above it, so conditions no verdict separates share a tier, a "
            "winner is never in its loser's tier, and a cycle of verdicts shares one tier and is named. A step without a "
            "verdict is marked n.s.; the mean item rank (1 + the sum of its losing shares, ties half) is description, "
            "never a position. ★ = significantly beats every other condition. (The results tables' positions are these "
            "tiers; the paper's mean rank, ranks of means, is apart in its own table.)")
    body = "".join(f"<tr><td>{e(t)}</td><td>{e(lv)}</td><td>{e(m)}</td><td>{e(o)}</td><td>{e(c)}</td></tr>" for t, lv, m, o, c in rows)
    h = (f'<section id="win-rate-leaderboard"><h2>Leaderboard on the item win rate</h2><p class="lead">{e(lead)}</p>'
         f"<table><thead><tr><th>task</th><th>level</th><th>metric</th><th>tiers</th><th>smallest detectable effect</th></tr></thead>"
         f"<tbody>{body}</tbody></table></section>")
    esc = lambda x: str(x).replace("|", "\\|")  # noqa: E731
    md = ["## Leaderboard on the item win rate", "", lead, "", "| task | level | metric | tiers | smallest detectable effect |",
          "|---|---|---|---|---|", *[f"| {esc(t)} | {esc(lv)} | {esc(m)} | {esc(o)} | {esc(c)} |" for t, lv, m, o, c in rows], ""]
    return h, md


def fixed_verdicts(run) -> tuple[pd.DataFrame, RunVerdicts]:  # noqa: ANN001 - a compare.runs.LoadedRun
    """compare's fixed-sample verdicts on one loaded run (its ``paired`` table and the verdicts):
    the one computation behind the report's "Who beats whom" and Verdicts and the terminal's verdicts."""
    tables = analyse(run.sessions, run.conditions, CompareOptions(metrics=default_metrics(run.sessions), alpha=ALPHA))
    paired = tables["paired"]
    return paired, from_compare(paired, ALPHA, "every comparison of the run")


def run_verdicts(run_dir: str | Path, scores: RunScores | None = None, reader: RunReader | None = None) -> RunVerdicts | None:
    """The verdicts the report shows for ``run_dir``: an adaptive run's own (decisions.json), else
    compare's (:func:`fixed_verdicts`); None where there are none to show (one condition, no
    session, a run compare cannot read). For callers that print them without the report (the
    terminal after a run), so both say the same verdicts."""
    try:
        record = read_decisions(run_dir)
    except DecisionsFormatError:
        return None
    if record is not None:
        return from_record(record)
    try:
        reader = reader if reader is not None else open_run(run_dir)
        scores = scores if scores is not None else RunScores.load(run_dir, reader)
        run = load_runs([run_dir], reader=reader, scores=scores)[0]
    except Exception as exc:  # noqa: BLE001 - as the report: a run compare cannot read has no verdicts to show
        log.warning("verdicts of %s not computed (%s: %s)", run_dir, type(exc).__name__, exc)
        return None
    if len(run.conditions) < 2 or not len(run.sessions):
        return None
    return fixed_verdicts(run)[1]


def _sentences(verdicts: RunVerdicts, title: str) -> tuple[str, list[str]]:
    """The significant verdicts in words (every one with its counts), or a sentence saying there
    are none; the words are :func:`verdict_texts`', which the terminal prints too."""
    sig = verdicts.significant()
    e = html.escape
    texts = verdict_texts(verdicts)
    if not sig:
        return (f'<section id="verdicts"><h2>{e(title)}</h2><p class="lead">{e(texts[0])}</p></section>',
                [f"## {title}", "", texts[0], ""])
    items = "".join(f'<li data-task="{e(p.task)}" data-level="{e(p.level)}" data-metric="{e(p.metric)}">{e(text)}</li>'
                    for p, text in zip(sig, texts))
    return (f'<section id="verdicts"><h2>{e(title)}</h2><ul class="verdicts">{items}</ul></section>',
            [f"## {title}", "", *[f"- {text}" for text in texts], ""])


def _trace_rows(record: DecisionsFile) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    dec_heads = ["task", "level", "metric", "kind", "decided", "after round", "result", "eliminated (round)"]
    dec = []
    for d in record.decisions:
        result = (d.winner or ("no winner: " + " > ".join(d.cycle) if d.cycle else "–")) if d.kind == "best" else (" > ".join(d.order) if d.order else "–") if d.kind == "ranking" \
            else ", ".join(f"{p.condition_a} vs {p.condition_b}: " + (p.better or ("within effect" if p.within_effect else "open"))
                           for p in d.pairs)
        if not d.decided:
            result = ("in play: " + ", ".join(d.in_play)) if d.in_play else "undecided: no outcome reachable with the pool's remaining items"
        dec.append([d.task, d.knowledge_level, d.metric, d.kind, "yes" if d.decided else "no",
                    str(d.after_round) if d.after_round is not None else "–", result,
                    ", ".join(f"{c} ({r})" for c, r in sorted(d.eliminated.items(), key=lambda kv: kv[1])) or "–"])
    round_heads = ["round", "items added", "sessions", "eliminated", "decided"]
    rounds = [[str(r.round), "; ".join(f"{t}: {', '.join(v)}" for t, v in r.items.items()), f"{r.sessions:,}",
               "; ".join(r.eliminated) or "–", "; ".join(r.decided) or "–"] for r in record.rounds]
    return dec_heads, dec, round_heads, rounds


def trace_sections(record: DecisionsFile) -> tuple[str, list[str]]:
    """The adaptive run's decision trace: what it decided per (task, level, metric), round by round."""
    e = html.escape
    from ray_knowsim.stats.adaptive import session_share

    saved = 1 - session_share(record.sessions_run, record.sessions_fixed)
    lead = (f"Adaptive run ({record.decide}, metrics {', '.join(record.metrics)}, alpha {record.alpha:g}): {record.status}; "
            f"{record.sessions_run:,} of the fixed design's {record.sessions_fixed:,} sessions ({saved:.0%} saved). "
            f"Procedure: {record.procedure}; family of {record.family_size} pairs.")
    dh, dec, rh, rounds = _trace_rows(record)

    def table(heads: list[str], rows: list[list[str]]) -> str:
        body = "".join("<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>" for row in rows)
        return f'<table><thead><tr>{"".join(f"<th>{e(h)}</th>" for h in heads)}</tr></thead><tbody>{body}</tbody></table>'

    html_part = (f'<section id="adaptive-decisions"><h2>Adaptive decisions</h2><p class="lead">{e(lead)}</p>'
                 f"<h3>Decisions</h3>{table(dh, dec)}<h3>Rounds</h3>{table(rh, rounds)}</section>")

    def md_table(heads: list[str], rows: list[list[str]]) -> list[str]:
        esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
        return ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)] + ["| " + " | ".join(esc(v) for v in r) + " |" for r in rows]

    md = ["## Adaptive decisions", "", lead, "", "### Decisions", "", *md_table(dh, dec), "", "### Rounds", "", *md_table(rh, rounds), ""]
    return html_part, md


def _usd(x: float) -> str:
    return usd_text(x)


def _cost_rows(cost: pd.DataFrame) -> list[list[str]]:
    return [[str(r["task"]), str(r["condition"]), f"{int(r['n_sessions']):,}", f"{int(r['requests']):,}",
             f"{int(r['prompt_tokens']):,}", f"{int(r['cached_prompt_tokens']):,}", f"{int(r['completion_tokens']):,}",
             _usd(r["cost_usd"]), _usd(r["cost_usd_per_session"])] for _, r in cost.iterrows()]


HEADS = ["task", "condition", "sessions", "requests", "prompt tokens", "cached prompt", "completion tokens", "cost (USD)", "per session"]


def _reestimate_note(run_dir: Path) -> str | None:
    """What the run's re-estimates while it ran said (preflight/projection.recorded_note), from its manifest."""
    from ray_knowsim.preflight.projection import recorded_note

    try:
        return recorded_note(json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        log.warning("report of %s: no re-estimate note (%s)", run_dir, exc)
        return None


def _cost_html(cost: pd.DataFrame, note: str | None = None, per_decision: str | None = None) -> str:
    """The Cost section: the table, the re-estimate's ``note`` and the run's cost per decision
    (:func:`ray_knowsim.report.per_decision.run_per_decision`'s sentence)."""
    e = html.escape
    num = ' class="num"'
    body = "".join("<tr>" + "".join(f"<td{num if k > 1 else ''}>{e(v)}</td>" for k, v in enumerate(row)) + "</tr>"
                   for row in _cost_rows(cost))
    return ('<section id="cost"><h2>Cost</h2><p class="lead">Tokens the models reported and their price (USD per million '
            f'tokens on each model entry; the offline model is free). "{NO_PRICE}": a model without a price. '
            '"uncommitted": spent on sessions cut off before their commit (an interrupt, a killed process); '
            '"superseded": on attempts a rerun replaced. The all, all row is the run\'s whole spend over all '
            'its invocations.</p>' + (f'<p class="lead">{e(note)}</p>' if note else "") +
            (f'<p class="lead" id="cost-per-decision"><b>{e(PER_DECISION.capitalize())}:</b> {e(per_decision)}</p>'
             if per_decision else "") +
            f'<table><thead><tr>{"".join(f"<th>{e(h)}</th>" for h in HEADS)}</tr></thead><tbody>{body}</tbody></table></section>')


def _cost_md(cost: pd.DataFrame, note: str | None = None, per_decision: str | None = None) -> list[str]:
    per = [f"**{PER_DECISION.capitalize()}:** {per_decision}", ""] if per_decision else []
    out = ["## Cost", "", *([note, ""] if note else []), *per, "| " + " | ".join(HEADS) + " |", "|---|---|" + "---:|" * (len(HEADS) - 2)]
    out += ["| " + " | ".join(row) + " |" for row in _cost_rows(cost)]
    return out + [""]


__all__ = ["decision_sections", "fixed_verdicts", "run_verdicts", "trace_sections"]
