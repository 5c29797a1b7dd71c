"""Load human-study data in the KnowChat release layout, strictly where it matters.

The layout is a pydantic object (``layout.KnowChatLayout``); the built-in default is the dataset
card's layout, ``knowchat_layout.yaml`` beside this module, which documents every name, and
``--layout FILE`` is merged over it. In words, with the default:

Folder ``DIR`` (``--human DIR``, searched recursively, hidden folders skipped) holds one JSONL
conversation file and one XLSX workbook per (arm, task): the file name names the arm
(strategy|model) and the task (math|mathqa|expertqa), e.g. ``math_strategy_conversations.jsonl``
with ``math_strategy_conversations.xlsx``. Files naming neither are ignored (and listed).

JSONL, one object per line (blank lines skipped; other fields such as ``timestamp``, ``time``,
``answer`` allowed): ``prolific id``; ``session`` (a number, or an id text); ``condition`` (a code
of the arm's map, as int or text, or the condition's label); optional ``topic``; ``questions`` an
integer, a list, or absent (MathQA); ``messages`` a list of ``{"role", "content"}`` (roles by the
layout's names; content text or a list of text parts). (prolific id, session) is unique.

Workbook: the header row is the first non-empty row; header and sheet names match ignoring case,
spaces and punctuation; extra columns are ignored; empty rows are skipped. Sheets:
  ``summary``       optional, not read (its presence is reported).
  ``background``    ``prolific id``; other columns not read. Every participant must appear.
  ``prescreening``  ``prolific id`` + item scores (``Q1``..``Q10``) or ``score`` + ``max score``.
                    The level is LevelCuts.level(score / max). Several rows for one participant
                    are told apart by ``session`` or ``topic`` columns, or must agree.
  ``pretest``       math only: per session (``prolific id`` + ``session``, or ``condition`` where
  ``posttest``      there is no session column) item scores ``Q1``..``Q7`` or score + max score;
                    KG = (post - pre) / (max - pre), undefined (left out) when pre == max.
  ``main``          one row per conversation: ``prolific id``, ``session``; ``condition`` and
                    ``topic`` checked/used where present.
  ``survey``        one row per session (keyed like pretest); ``delivery calibration``,
                    ``cognitive overload``, ``interaction quality``, read from ``survey`` or from
                    ``main`` for a column ``survey`` lacks; a scale asked as numbered items
                    ('Cognitive Overload 1', 'cognitive_overload_2') is their mean. A blank
                    rating is missing.
  ``questions``     expertqa (read where present): rows referred to by the records'
                    ``questions``, by the ``question id`` column when every reference is found
                    there, else by row position (0 = first data row); optional ``item id`` (the
                    simulator's item id, for concept coverage).
Item scores: the sum of the item columns; the maximum is the number of item columns unless the
sheet has a ``max score`` column (names include 'max' and 'total'); a blank item cell counts 0
(reported), TRUE/FALSE count 1/0. Every session needs a ``main`` and a ``survey`` row, math sessions
a pretest and a posttest row; every ``main`` row needs a conversation (extra survey or test rows
are reported, not read); every error names file, sheet (or line), row and column.

This module holds the loaders (load_knowchat, load_pair) that tie the pieces together: knowchat_files
finds the files, knowchat_jsonl reads the conversations, knowchat_workbook the sheets, into the
objects of knowchat_models.
"""

from __future__ import annotations

from pathlib import Path

from ray_knowsim.validate.conditions import CONDITION_CODES, LEVELS, LevelCuts, condition_order, math_kg
from ray_knowsim.validate.knowchat_files import discover_files
from ray_knowsim.validate.knowchat_jsonl import read_conversations
from ray_knowsim.validate.knowchat_labels import read_iu_labels
from ray_knowsim.validate.knowchat_models import HumanConversation, HumanDataset, HumanIULabel, HumanSession, PairReport, LoadContext
from ray_knowsim.validate.knowchat_workbook import (
    Prescreening, QuestionBank, sheet_participants, rating_value, rating_columns, ScoreSheet, SessionRows,
)
from ray_knowsim.validate.layout import KnowChatLayout, default_layout, name_key
from ray_knowsim.validate.xlsx import KnowChatFormatError, blank, read_sheets

__all__ = ["KnowChatFormatError", "load_knowchat", "load_pair"]


def load_knowchat(folder: Path, cuts: LevelCuts | None = None, layout: KnowChatLayout | None = None) -> HumanDataset:
    """Load every (arm, task) pair in ``folder``; raises KnowChatFormatError naming the place."""
    cuts = cuts or LevelCuts()
    layout = layout or default_layout()
    pairs, ignored = discover_files(folder, layout)
    sessions: list[HumanSession] = []
    conversations: list[HumanConversation] = []
    reports: list[PairReport] = []
    labels: list[HumanIULabel] = []
    for (arm, task), (jsonl, xlsx) in pairs.items():
        s, c, r, lab = load_pair(arm, task, jsonl, xlsx, cuts, layout, with_labels=True)
        sessions += s
        conversations += c
        reports.append(r)
        labels += lab
    if len({type(x.session) for x in sessions}) > 1:  # numbers in one file, ids in another: one type
        for x in [*sessions, *conversations, *labels]:
            x.session = str(x.session)
    return HumanDataset(sessions=sessions, conversations=conversations, reports=reports, ignored=ignored, iu_labels=labels)



def load_pair(arm: str, task: str, jsonl: Path, xlsx: Path, cuts: LevelCuts, layout: KnowChatLayout | None = None,
              with_labels: bool = False):
    """(sessions, conversations, PairReport) of one JSONL file + workbook; with ``with_labels``,
    also the per-IU labels of its ``iu labels`` sheet (empty without one)."""
    layout = layout or default_layout()
    ctx = LoadContext(arm, task, layout)
    wanted = {k: s.names for k, s in layout.sheets.items()}
    sh, all_sheets = read_sheets(xlsx, wanted)
    if task != "math":
        for k in ("pretest", "posttest"):
            if k in sh and task not in layout.sheets[k].tasks:
                sh.pop(k)  # not read outside math (the older layout had empty ones)
    missing = [k for k, s in layout.sheets.items() if task in s.tasks and k not in sh]
    if missing:
        raise KnowChatFormatError(
            f"{xlsx.name}: missing sheet(s) {', '.join(repr(layout.sheets[k].names[0]) for k in missing)} "
            f"(the {task} workbook needs {', '.join(repr(s.names[0]) for s in layout.sheets.values() if task in s.tasks)}; "
            f"workbook has: {', '.join(repr(s) for s in all_sheets)})"
        )
    for k in ("background", "prescreening", "main", "survey", "pretest", "posttest", "iu_labels"):
        if k in sh and not sh[k].columns:
            raise KnowChatFormatError(f"{sh[k].where()}: the sheet is empty (no header row)")

    records = read_conversations(jsonl, ctx)
    bank = QuestionBank(sh.get("questions"), ctx)
    q_items, q_desc = bank.resolve(jsonl, records)

    background = sheet_participants(sh["background"], ctx)
    prescreen = Prescreening(sh["prescreening"], ctx, cuts)
    main = SessionRows(sh["main"], ctx)
    survey = SessionRows(sh["survey"], ctx)
    rating_cols = rating_columns(sh["survey"], sh["main"], ctx)
    pre = SessionRows(sh["pretest"], ctx) if task == "math" else None
    post = SessionRows(sh["posttest"], ctx) if task == "math" else None
    pre_scores = ScoreSheet(sh["pretest"], "pretest", ctx) if pre else None
    post_scores = ScoreSheet(sh["posttest"], "posttest", ctx) if post else None

    m = sh["main"]
    m_cond = m.find(layout.sheet_columns("main")["condition"])
    m_topic = m.find(layout.sheet_columns("main")["topic"])
    sessions: list[HumanSession] = []
    conversations: list[HumanConversation] = []
    kg_read = kg_ceiling = 0
    for rec in records:
        where = f"{jsonl.name}, line {rec.line}"
        key_txt = f"{rec.prolific_id}/{rec.session}"
        mrow = main.take(rec)
        if mrow is None:
            raise KnowChatFormatError(f"{where}: session {key_txt} is not in sheet {m.name!r} of {xlsx.name}")
        row, values = mrow
        if m_cond is not None and not blank(values.get(m_cond)):
            try:
                label = layout.condition(arm, values.get(m_cond))
            except ValueError as exc:
                raise KnowChatFormatError(f"{m.where(row, m_cond)}: {exc}") from None
            if label != rec.condition:
                raise KnowChatFormatError(f"{where}: condition {rec.condition!r} disagrees with {m.where(row, m_cond)} ({label!r})")
        if rec.prolific_id not in background:
            raise KnowChatFormatError(f"{m.where(row)}: participant {rec.prolific_id} is not in sheet {sh['background'].name!r}")
        level, fraction = prescreen.level(rec, m.where(row))
        srow = survey.take(rec)
        if srow is None:
            raise KnowChatFormatError(f"{m.where(row)}: session {key_txt} has no {sh['survey'].name!r} row")
        ratings: dict[str, float | None] = {}
        for metric, (sheet, cols) in rating_cols.items():
            r, v = srow if sheet is sh["survey"] else (row, values)
            ratings[metric.lower()] = rating_value(sheet, r, v, cols)
        kg = None
        if pre is not None and post is not None and pre_scores is not None and post_scores is not None:
            r0, r1 = pre.take(rec), post.take(rec)
            if r0 is None or r1 is None:
                lacking = sh["pretest"].name if r0 is None else sh["posttest"].name
                raise KnowChatFormatError(f"{m.where(row)}: math session {key_txt} has no {lacking!r} row")
            s0, top0 = pre_scores.score(r0[0])
            s1, top1 = post_scores.score(r1[0])
            if top0 != top1:
                raise KnowChatFormatError(
                    f"{post_scores.where(r1[0])}: maximum {top1:g} differs from the pretest's {top0:g} ({pre_scores.where(r0[0])})"
                )
            kg = math_kg(s0, s1, top0)
            kg_read += 1
            kg_ceiling += kg is None
        topic = (m.text(row, values, m_topic, required=False) if m_topic else None) or rec.topic
        items = sorted({q_items[q] for q in rec.questions if q_items.get(q)})
        sessions.append(
            HumanSession(
                arm=arm, task=task, prolific_id=rec.prolific_id, session=rec.session,
                condition_code=condition_order(arm, rec.condition), condition=rec.condition, topic=topic,
                level=level, prescreen_fraction=fraction, kg=kg, question_ids=list(rec.questions), item_ids=items,
                **ratings,
            )
        )
        conversations.append(
            HumanConversation(
                arm=arm, task=task, prolific_id=rec.prolific_id, session=rec.session, item_ids=items,
                texts=[msg.content for msg in rec.messages if msg.role != "system"],
                roles=[msg.role for msg in rec.messages if msg.role != "system"],
            )
        )
    main.check_all_taken(jsonl.name)  # main and the JSONL hold the same conversations
    for rows in (survey, pre, post):  # extra survey/test rows (a session never held) are only reported
        if rows is not None:
            extra = rows.untaken()
            if extra:
                ctx.notes.append(
                    f"{rows.sheet.name!r}: {len(extra)} row(s) match no conversation, not read (rows {', '.join(map(str, extra[:5]))}"
                    + (", ..." if len(extra) > 5 else "") + ")"
                )

    labels = (read_iu_labels(sh["iu_labels"], ctx, records, {(c.prolific_id, c.session): c.item_ids for c in conversations})
              if "iu_labels" in sh else [])
    pids = sorted({s.prolific_id for s in sessions})
    lv = prescreen.participant_levels(pids)
    report = PairReport(
        arm=arm, task=task, jsonl=str(jsonl.name), workbook=str(xlsx.name),
        sheets={k: (f"{s.name!r} " if name_key(s.name) != name_key(k) else "") + f"({len(s.rows)} rows)" for k, s in sh.items()},
        other_sheets=[n for n in all_sheets if n not in {s.name for s in sh.values()}],
        sessions=len(sessions), participants=pids,
        levels={k: lv.get(k, 0) for k in LEVELS},
        level_sessions={k: sum(s.level == k for s in sessions) for k in LEVELS},
        conditions={lab: sum(s.condition == lab for s in sessions) for lab in _labels(arm)},
        prescreening=prescreen.scores.describe(),
        tests=(
            f"pretest {pre_scores.describe()}; posttest {post_scores.describe()}; KG for {kg_read - kg_ceiling} "
            f"of {kg_read} sessions ({kg_ceiling} at the ceiling: KG undefined)"
            if pre_scores and post_scores else None
        ),
        ratings={
            metric: (f"{sheet.name!r} column {cols[0]!r}" if len(cols) == 1 else f"{sheet.name!r} mean of columns {', '.join(map(repr, cols))}")
            + f": {sum(getattr(s, metric.lower()) is not None for s in sessions)} values"
            for metric, (sheet, cols) in rating_cols.items()
        },
        questions=q_desc,
        iu_labels=(f"{len(labels)} per-IU labels of {len({(x.prolific_id, x.session, x.turn) for x in labels})} tutor replies "
                   f"in {len({(x.prolific_id, x.session) for x in labels})} sessions" if "iu_labels" in sh else None),
        notes=ctx.notes + prescreen.scores.notes + ([*pre_scores.notes, *post_scores.notes] if pre_scores and post_scores else []),
    )
    return (sessions, conversations, report, labels) if with_labels else (sessions, conversations, report)


def _labels(arm: str) -> list[str]:
    return list(CONDITION_CODES[arm].values())
