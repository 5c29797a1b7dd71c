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
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from ray_knowsim.io.loaders import decode_json
from ray_knowsim.validate.conditions import ARMS, CONDITION_CODES, LEVELS, TASKS, LevelCuts, condition_order, math_kg
from ray_knowsim.validate.layout import KnowChatLayout, default_layout, name_key
from ray_knowsim.validate.xlsx import KnowChatFormatError, Sheet, as_number, as_text, blank, read_sheets

__all__ = [
    "KnowChatFormatError", "HumanSession", "HumanConversation", "HumanDataset", "PairReport",
    "load_knowchat", "discover", "discover_files",
]

RATING_KEYS: dict[str, str] = {"DC": "dc", "CO": "co", "IQ": "iq"}
SessionKey = int | str


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant", "system"]
    content: str


class ConversationRecord(BaseModel):
    """One JSONL line, resolved through the layout."""

    model_config = ConfigDict(extra="forbid")
    line: int
    prolific_id: str = Field(min_length=1)
    session: int | str
    condition: str  # the condition label
    topic: str | None = None
    questions: list[str] = Field(default_factory=list)  # references as text ('3', 'eqa-7')
    messages: list[Message]


class HumanSession(BaseModel):
    """One rated human session, with its level and metrics resolved."""

    model_config = ConfigDict(extra="forbid")
    arm: str
    task: str
    prolific_id: str
    session: int | str
    condition_code: int
    condition: str
    topic: str | None = None
    level: str
    prescreen_fraction: float
    kg: float | None = None
    dc: float | None = None
    co: float | None = None
    iq: float | None = None
    question_ids: list[str] = Field(default_factory=list)
    item_ids: list[str] = Field(default_factory=list)


class HumanConversation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arm: str
    task: str
    prolific_id: str
    session: int | str
    item_ids: list[str]
    texts: list[str]  # user and assistant message contents, in order


class PairReport(BaseModel):
    """What was read for one (arm, task): the facts `validate --inspect` prints."""

    model_config = ConfigDict(extra="forbid")
    arm: str
    task: str
    jsonl: str
    workbook: str
    sheets: dict[str, str]  # logical sheet -> "name (N rows)"
    other_sheets: list[str]  # workbook sheets the layout does not read
    sessions: int
    participants: list[str]
    levels: dict[str, int]  # participants per level
    level_sessions: dict[str, int]
    conditions: dict[str, int]  # sessions per condition
    prescreening: str
    tests: str | None  # math: how pre/post tests were read and KG counts
    ratings: dict[str, str]  # metric -> where read and how many values
    questions: str
    notes: list[str] = Field(default_factory=list)


class HumanDataset(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sessions: list[HumanSession]
    conversations: list[HumanConversation]
    reports: list[PairReport] = Field(default_factory=list)
    ignored: list[str] = Field(default_factory=list)

    def frame(self) -> pd.DataFrame:
        """One row per session (columns of HumanSession)."""
        cols = list(HumanSession.model_fields)
        return pd.DataFrame([s.model_dump() for s in self.sessions], columns=cols)


# ---------------------------------------------------------------- values


def canon_session(value: object) -> SessionKey | None:
    """1, 1.0, '1', ' 1 ' -> 1; other non-empty text stays text; None when unusable."""
    if isinstance(value, bool) or blank(value) or isinstance(value, (list, dict)):
        return None
    num = as_number(value)
    if num is not None:
        return int(num) if num.is_integer() else None
    return str(value).strip()


def _ref_text(value: object) -> str | None:
    """A question reference as text: 3, 3.0, '3' -> '3'."""
    if isinstance(value, bool) or blank(value) or isinstance(value, (list, dict)):
        return None
    num = as_number(value)
    if num is not None and num.is_integer():
        return str(int(num))
    return as_text(value)


# ---------------------------------------------------------------- files


def _tokens(stem: str) -> set[str]:
    toks = [t for t in re.split(r"[^a-z0-9]+", stem.lower()) if t]
    return set(toks) | {a + b for a, b in zip(toks, toks[1:])}


def _arm_task(path: Path, layout: KnowChatLayout) -> tuple[str, str] | None:
    toks = {name_key(t) for t in _tokens(path.stem)}
    arms = {arm for arm, names in layout.files.arms.items() if toks & {name_key(n) for n in names}}
    tasks = {task for task, names in layout.files.tasks.items() if toks & {name_key(n) for n in names}}
    if not arms and not tasks:
        return None
    if len(arms) != 1 or len(tasks) != 1:
        raise KnowChatFormatError(
            f"{path.name}: the file name must name exactly one arm ({'|'.join(ARMS)}) and one task "
            f"({'|'.join(TASKS)}), e.g. math_strategy_conversations{path.suffix}"
        )
    return arms.pop(), tasks.pop()


def discover_files(folder: Path, layout: KnowChatLayout | None = None) -> tuple[dict[tuple[str, str], tuple[Path, Path]], list[str]]:
    """((arm, task) -> (conversations.jsonl, workbook.xlsx), ignored .jsonl/.xlsx files)."""
    layout = layout or default_layout()
    folder = Path(folder)
    if not folder.is_dir():
        raise KnowChatFormatError(f"{folder}: not a folder")
    found: dict[str, dict[tuple[str, str], Path]] = {".jsonl": {}, ".xlsx": {}}
    ignored: list[str] = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(p.startswith(".") for p in rel.parts) or path.name.startswith("~$") or not path.is_file():
            continue
        if path.suffix.lower() not in found:
            continue
        key = _arm_task(path, layout)
        if key is None:
            ignored.append(str(rel))
            continue
        bucket = found[path.suffix.lower()]
        if key in bucket:
            raise KnowChatFormatError(
                f"{rel} and {bucket[key].relative_to(folder)}: two {path.suffix} files for arm {key[0]!r}, task {key[1]!r}"
            )
        bucket[key] = path
    jsonl, xlsx = found[".jsonl"], found[".xlsx"]
    if not jsonl and not xlsx:
        extra = f" (ignored, naming no arm and task: {', '.join(ignored)})" if ignored else ""
        raise KnowChatFormatError(f"{folder}: no KnowChat .jsonl/.xlsx files found{extra}")
    for key in sorted(set(jsonl) ^ set(xlsx)):
        have = (jsonl.get(key) or xlsx.get(key)).name
        lacking = "workbook (.xlsx)" if key in jsonl else "conversation file (.jsonl)"
        raise KnowChatFormatError(f"{have}: no matching {lacking} for arm {key[0]!r}, task {key[1]!r}")
    order = {(a, t): i for i, (a, t) in enumerate((a, t) for a in ARMS for t in TASKS)}
    return {k: (jsonl[k], xlsx[k]) for k in sorted(jsonl, key=order.__getitem__)}, ignored


def discover(folder: Path, layout: KnowChatLayout | None = None) -> dict[tuple[str, str], tuple[Path, Path]]:
    """(arm, task) -> (conversations.jsonl, workbook.xlsx)."""
    return discover_files(folder, layout)[0]


def load_knowchat(folder: Path, cuts: LevelCuts | None = None, layout: KnowChatLayout | None = None) -> HumanDataset:
    """Load every (arm, task) pair in ``folder``; raises KnowChatFormatError naming the place."""
    cuts = cuts or LevelCuts()
    layout = layout or default_layout()
    pairs, ignored = discover_files(folder, layout)
    sessions: list[HumanSession] = []
    conversations: list[HumanConversation] = []
    reports: list[PairReport] = []
    for (arm, task), (jsonl, xlsx) in pairs.items():
        s, c, r = load_pair(arm, task, jsonl, xlsx, cuts, layout)
        sessions += s
        conversations += c
        reports.append(r)
    if len({type(x.session) for x in sessions}) > 1:  # numbers in one file, ids in another: one type
        for x in [*sessions, *conversations]:
            x.session = str(x.session)
    return HumanDataset(sessions=sessions, conversations=conversations, reports=reports, ignored=ignored)


# ---------------------------------------------------------------- one (arm, task)


@dataclass
class _Ctx:
    arm: str
    task: str
    layout: KnowChatLayout
    notes: list[str] = field(default_factory=list)


def load_pair(arm: str, task: str, jsonl: Path, xlsx: Path, cuts: LevelCuts, layout: KnowChatLayout | None = None):
    """(sessions, conversations, PairReport) of one JSONL file + workbook."""
    layout = layout or default_layout()
    ctx = _Ctx(arm, task, layout)
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
    for k in ("background", "prescreening", "main", "survey", "pretest", "posttest"):
        if k in sh and not sh[k].columns:
            raise KnowChatFormatError(f"{sh[k].where()}: the sheet is empty (no header row)")

    records = _read_jsonl(jsonl, ctx)
    bank = _QuestionBank(sh.get("questions"), ctx)
    q_items, q_desc = bank.resolve(jsonl, records)

    background = _participants(sh["background"], ctx)
    prescreen = _Prescreening(sh["prescreening"], ctx, cuts)
    main = _SessionRows(sh["main"], ctx)
    survey = _SessionRows(sh["survey"], ctx)
    rating_cols = _rating_columns(sh["survey"], sh["main"], ctx)
    pre = _SessionRows(sh["pretest"], ctx) if task == "math" else None
    post = _SessionRows(sh["posttest"], ctx) if task == "math" else None
    pre_scores = _ScoreSheet(sh["pretest"], "pretest", ctx) if pre else None
    post_scores = _ScoreSheet(sh["posttest"], "posttest", ctx) if post else None

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
            ratings[metric.lower()] = _rating(sheet, r, v, cols)
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
        notes=ctx.notes + prescreen.scores.notes + ([*pre_scores.notes, *post_scores.notes] if pre_scores and post_scores else []),
    )
    return sessions, conversations, report


def _labels(arm: str) -> list[str]:
    return list(CONDITION_CODES[arm].values())


# ---------------------------------------------------------------- JSONL


def _field(raw: dict, names: list[str]) -> tuple[bool, object]:
    keys = {name_key(k): k for k in raw}
    for n in names:
        k = keys.get(name_key(n))
        if k is not None:
            return True, raw[k]
    return False, None


def _read_jsonl(path: Path, ctx: _Ctx) -> list[ConversationRecord]:
    out: list[ConversationRecord] = []
    first: dict[tuple, int] = {}
    with path.open(encoding="utf-8-sig") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path.name}, line {line_no}"
            raw = decode_json(line, where, dict, "a JSON object",
                              lambda exc: f"not valid JSON ({exc.msg} at column {exc.colno})", error=KnowChatFormatError)
            rec = _record(raw, where, line_no, ctx)
            key = (rec.prolific_id, rec.session)
            if key in first:
                raise KnowChatFormatError(f"{where}: duplicate session {key[0]}/{key[1]} (first at line {first[key]})")
            first[key] = line_no
            out.append(rec)
    if not out:
        raise KnowChatFormatError(f"{path.name}: no conversation records")
    return out


def _record(raw: dict, where: str, line_no: int, ctx: _Ctx) -> ConversationRecord:
    names = ctx.layout.records

    def need(key: str) -> object:
        present, value = _field(raw, names[key])
        if not present or (blank(value) and key != "messages"):
            raise KnowChatFormatError(f"{where}: field {names[key][0]!r} is missing or empty")
        return value

    pid_raw = need("prolific_id")
    if isinstance(pid_raw, (bool, list, dict)):
        raise KnowChatFormatError(f"{where}, field {names['prolific_id'][0]!r}: expected an id, got {pid_raw!r}")
    session = canon_session(need("session"))
    if session is None:
        raise KnowChatFormatError(f"{where}, field {names['session'][0]!r}: expected a whole number or an id, got {_field(raw, names['session'])[1]!r}")
    try:
        condition = ctx.layout.condition(ctx.arm, need("condition"))
    except ValueError as exc:
        raise KnowChatFormatError(f"{where}, field {names['condition'][0]!r}: {exc}") from None
    _, topic = _field(raw, names["topic"])
    _, qraw = _field(raw, names["questions"])
    return ConversationRecord(
        line=line_no,
        prolific_id=as_text(pid_raw),
        session=session,
        condition=condition,
        topic=None if blank(topic) else str(topic).strip(),
        questions=_questions_field(qraw, where, names["questions"][0]),
        messages=_messages(need("messages"), where, names["messages"][0], ctx.layout),
    )


def _questions_field(value: object, where: str, name: str) -> list[str]:
    if value is None or blank(value):
        return []
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise KnowChatFormatError(f"{where}, field {name!r}: expected an integer or a list, got {value!r}") from None
    items = value if isinstance(value, list) else [value]
    out = []
    for i, q in enumerate(items):
        text = _ref_text(q)
        if text is None:
            raise KnowChatFormatError(f"{where}, field {name!r}[{i}]: expected a question index or id, got {q!r}")
        out.append(text)
    return out


def _messages(value: object, where: str, name: str, layout: KnowChatLayout) -> list[Message]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise KnowChatFormatError(f"{where}, field {name!r}: expected a list of messages, got text") from None
    if not isinstance(value, list):
        raise KnowChatFormatError(f"{where}, field {name!r}: expected a list of messages, got {type(value).__name__}")
    out = []
    for i, msg in enumerate(value):
        if not isinstance(msg, dict):
            raise KnowChatFormatError(f"{where}, field {name!r}[{i}]: expected an object with role and content")
        has_role, role_raw = _field(msg, ["role", "speaker", "from"])
        has_content, content = _field(msg, ["content", "text", "value", "message"])
        if not has_role:
            raise KnowChatFormatError(f"{where}, field {name!r}[{i}]: no 'role'")
        role = layout.role(role_raw)
        if role is None:
            raise KnowChatFormatError(
                f"{where}, field {name!r}[{i}].role: unknown role {role_raw!r} (expected one of "
                + ", ".join(n for names in layout.roles.values() for n in names) + ")"
            )
        if not has_content:
            raise KnowChatFormatError(f"{where}, field {name!r}[{i}]: no 'content'")
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
            content = "\n".join(p if isinstance(p, str) else str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            content = str(content)
        out.append(Message(role=role, content=content))
    return out


# ---------------------------------------------------------------- sheets


def _participants(sheet: Sheet, ctx: _Ctx) -> set[str]:
    col = sheet.require({"prolific_id": ctx.layout.sheet_columns("background")["prolific_id"]})["prolific_id"]
    return {sheet.text(row, values, col) for row, values in sheet.rows}  # type: ignore[misc]


class _SessionRows:
    """Per-session rows of one sheet, keyed (prolific id, session) or, without a session column,
    (prolific id, condition)."""

    def __init__(self, sheet: Sheet, ctx: _Ctx) -> None:
        self.sheet, self.ctx = sheet, ctx
        cols = ctx.layout.sheet_columns(_sheet_key(sheet, ctx))
        self.pid = sheet.require({"prolific_id": cols["prolific_id"]})["prolific_id"]
        self.session = sheet.find(cols["session"])
        self.condition = sheet.find(cols["condition"]) if self.session is None else None
        if self.session is None and self.condition is None:
            sheet.require({"session": cols["session"]})
        self.rows: dict[tuple, tuple[int, dict]] = {}
        for row, values in sheet.rows:
            pid = sheet.text(row, values, self.pid)
            if self.session is not None:
                s = canon_session(values.get(self.session))
                if s is None:
                    raise KnowChatFormatError(f"{sheet.where(row, self.session)}: expected a whole number or an id, got {values.get(self.session)!r}")
            else:
                try:
                    s = ("condition", ctx.layout.condition(ctx.arm, values.get(self.condition)))
                except ValueError as exc:
                    raise KnowChatFormatError(f"{sheet.where(row, self.condition)}: {exc}") from None
            k = (pid, s)
            if k in self.rows:
                raise KnowChatFormatError(
                    f"{sheet.where(row)}: duplicate entry {pid}, {s if not isinstance(s, tuple) else s[1]} (first at row {self.rows[k][0]})"
                )
            self.rows[k] = (row, values)
        self.taken: set[tuple] = set()

    def take(self, rec: ConversationRecord) -> tuple[int, dict] | None:
        k = (rec.prolific_id, rec.session if self.session is not None else ("condition", rec.condition))
        hit = self.rows.get(k)
        if hit is not None:
            self.taken.add(k)
        return hit

    def untaken(self) -> list[int]:
        return [row for k, (row, _) in self.rows.items() if k not in self.taken]

    def check_all_taken(self, jsonl_name: str) -> None:
        for k, (row, _) in self.rows.items():
            if k not in self.taken:
                what = k[1] if not isinstance(k[1], tuple) else k[1][1]
                raise KnowChatFormatError(f"{self.sheet.where(row)}: session {k[0]}/{what} has no conversation in {jsonl_name}")


def _is_sheet(sheet: Sheet, names: list[str]) -> bool:
    return name_key(sheet.name) in {name_key(n) for n in names}


def _sheet_key(sheet: Sheet, ctx: _Ctx) -> str:
    return next(k for k, s in ctx.layout.sheets.items() if _is_sheet(sheet, s.names))


def _norm_header(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).strip()


class _ScoreSheet:
    """Scores per row: the sum of item columns (max = their number or a max column), or the older
    'score' + 'max score'."""

    def __init__(self, sheet: Sheet, key: str, ctx: _Ctx) -> None:
        self.sheet, self.notes = sheet, []
        cols = ctx.layout.sheet_columns(key)
        pattern = ctx.layout.sheet_item_pattern(key)
        fixed = ctx.layout.sheets[key].max_score
        items = [c for c in sheet.columns if pattern.search(_norm_header(c))]
        items.sort(key=lambda c: (int(m.group()) if (m := re.search(r"\d+", c)) else 0, c))
        for c in items:
            if name_key(c) in sheet.duplicates:
                raise KnowChatFormatError(f"{sheet.where(sheet.header_row)}: column {c!r} appears twice")
        self.items = items
        max_col = sheet.find(cols["max_score"])
        score_col = sheet.find(cols["score"])
        self._scores: dict[int, tuple[float, float]] = {}
        if items:
            blanks = 0
            sums: dict[int, float] = {}
            for row, values in sheet.rows:
                vals = [self._item(row, values, c) for c in items]
                if all(v is None for v in vals):
                    raise KnowChatFormatError(f"{sheet.where(row)}: no item score in {items[0]!r}..{items[-1]!r}")
                blanks += sum(v is None for v in vals)
                sums[row] = sum(v for v in vals if v is not None)
                if max_col is None and fixed is None:
                    for c, v in zip(items, vals):
                        if v is not None and v > 1:
                            raise KnowChatFormatError(
                                f"{sheet.where(row, c)}: item score {v:g} > 1, but the maximum is taken as the number "
                                f"of item columns ({len(items)}); add a 'max score' column or set sheets.{key}.max_score in a layout file"
                            )
            span = f"{items[0]}..{items[-1]}" if len(items) > 1 else items[0]
            tops: dict[int, float] = {}
            if max_col is not None:
                tops = {row: sheet.number(row, values, max_col) for row, values in sheet.rows}  # type: ignore[misc]
                if sheet.rows and all(tops[r] == sums[r] for r in tops) and not all(t == len(items) for t in tops.values()):
                    # a 'total' column that is the item sum in every row is a score, not the maximum
                    self.notes.append(f"{sheet.name!r} column {max_col!r} equals the item sum in every row: read as the score")
                    tops = {}
                    max_col = None
            default_top = fixed if fixed is not None else float(len(items))
            for row, _ in sheet.rows:
                self._scores[row] = self._check(row, sums[row], tops.get(row, default_top), max_col, None)
            self.desc = f"items {span} summed, max " + (f"from column {max_col!r}" if max_col else f"{default_top:g}")
            if blanks:
                self.notes.append(f"{sheet.name!r}: {blanks} blank item cell(s) counted as 0")
        elif score_col is not None and (max_col is not None or fixed is not None):
            for row, values in sheet.rows:
                score = sheet.number(row, values, score_col)
                top = sheet.number(row, values, max_col) if max_col is not None else fixed
                self._scores[row] = self._check(row, score, top, max_col, score_col)  # type: ignore[arg-type]
            self.desc = f"column {score_col!r} of " + (f"column {max_col!r}" if max_col else f"{fixed:g}")
        else:
            if score_col is not None:
                sheet.require({"max_score": cols["max_score"]})  # raises: 'score' without its maximum
            raise KnowChatFormatError(
                f"{sheet.where()}: missing score columns: neither item columns (Q1, Q2, ...) nor {cols['score'][0]!r} with "
                f"{cols['max_score'][0]!r}; header row {sheet.header_row} has: {', '.join(repr(c) for c in sheet.columns) or 'nothing'}"
            )

    def _item(self, row: int, values: dict, col: str) -> float | None:
        v = values.get(col)
        if blank(v):
            return None
        if isinstance(v, bool):
            return float(v)
        if isinstance(v, str) and v.strip().lower() in ("true", "false"):
            return float(v.strip().lower() == "true")
        num = as_number(v)
        if num is None:
            raise KnowChatFormatError(f"{self.sheet.where(row, col)}: expected an item score (a number), got {v!r}")
        if num < 0:
            raise KnowChatFormatError(f"{self.sheet.where(row, col)}: item score {num:g} is negative")
        return num

    def _check(self, row: int, score: float, top: float, max_col: str | None, score_col: str | None) -> tuple[float, float]:
        if top <= 0:
            raise KnowChatFormatError(f"{self.sheet.where(row, max_col)}: the maximum must be > 0, got {top:g}")
        if not 0 <= score <= top:
            raise KnowChatFormatError(f"{self.sheet.where(row, score_col or (self.items[0] if self.items else None))}: score {score:g} is outside 0..{top:g}")
        return score, top

    def score(self, row: int) -> tuple[float, float]:
        return self._scores[row]

    def where(self, row: int) -> str:
        return self.sheet.where(row)

    def describe(self) -> str:
        return self.desc


class _Prescreening:
    """Participant -> level. Several rows for one participant are told apart by a session or a
    topic column, or must give the same fraction."""

    def __init__(self, sheet: Sheet, ctx: _Ctx, cuts: LevelCuts) -> None:
        self.sheet, self.cuts = sheet, cuts
        cols = ctx.layout.sheet_columns("prescreening")
        pid_col = sheet.require({"prolific_id": cols["prolific_id"]})["prolific_id"]
        self.session_col = sheet.find(cols["session"])
        self.topic_col = sheet.find(cols["topic"])
        self.scores = _ScoreSheet(sheet, "prescreening", ctx)
        self.by_pid: dict[str, list[tuple[int, object, str | None, float]]] = {}
        for row, values in sheet.rows:
            pid = sheet.text(row, values, pid_col)
            score, top = self.scores.score(row)
            session = canon_session(values.get(self.session_col)) if self.session_col else None
            topic = sheet.text(row, values, self.topic_col, required=False) if self.topic_col else None
            self.by_pid.setdefault(pid, []).append((row, session, topic, score / top))  # type: ignore[arg-type]
        seen: dict[tuple, tuple[int, float]] = {}
        for pid, rows in self.by_pid.items():
            for row, session, topic, fraction in rows:
                k = (pid, session, None if topic is None else name_key(topic))
                if k in seen and seen[k][1] != fraction:
                    raise KnowChatFormatError(
                        f"{sheet.where(row)}: duplicate participant {pid} with a different score (first at row {seen[k][0]})"
                    )
                seen.setdefault(k, (row, fraction))

    def level(self, rec: ConversationRecord, where_main: str) -> tuple[str, float]:
        rows = self.by_pid.get(rec.prolific_id)
        if not rows:
            raise KnowChatFormatError(f"{where_main}: participant {rec.prolific_id} has no {self.sheet.name!r} row")
        fractions = {f for *_, f in rows}
        if len(fractions) > 1:
            pick = [r for r in rows if self.session_col and r[1] == rec.session] or [
                r for r in rows if self.topic_col and r[2] is not None and rec.topic is not None and name_key(r[2]) == name_key(rec.topic)
            ]
            if len({r[3] for r in pick}) != 1:
                raise KnowChatFormatError(
                    f"{self.sheet.where(rows[0][0])}: participant {rec.prolific_id} has {len(rows)} rows with different scores "
                    f"(rows {', '.join(str(r[0]) for r in rows)}) and none is told apart by a session or topic column for session {rec.session}"
                )
            fractions = {pick[0][3]}
        fraction = fractions.pop()
        return self.cuts.level(fraction), fraction

    def participant_levels(self, pids: list[str]) -> dict[str, int]:
        """Participants per level (a participant whose rows differ counts at each level seen)."""
        out: Counter = Counter()
        for pid in pids:
            for lev in {self.cuts.level(f) for *_, f in self.by_pid.get(pid, [])}:
                out[lev] += 1
        return dict(out)


def _rating_columns(survey: Sheet, main: Sheet, ctx: _Ctx) -> dict[str, tuple[Sheet, list[str]]]:
    """metric -> (sheet, columns): one column named for the scale, or, where the scale was asked as
    several numbered items ('Delivery Calibration 1', 'dc_2', ...), those columns (their mean)."""
    out: dict[str, tuple[Sheet, list[str]]] = {}
    for metric, key in RATING_KEYS.items():
        for sheet, sheet_key in ((survey, "survey"), (main, "main")):
            names = ctx.layout.sheet_columns(sheet_key)[key]
            col = sheet.find(names)
            if col is not None:
                out[metric] = (sheet, [col])
                break
            stems = {name_key(n) for n in names}
            items = [c for c in sheet.columns if (m := re.fullmatch(r"(.*?)(?:q|item)?\d+", name_key(c))) and m.group(1) in stems]
            if items:
                out[metric] = (sheet, items)
                break
        else:
            raise KnowChatFormatError(
                f"{survey.file.name}: rating column {ctx.layout.columns[key][0]!r} is in neither sheet {survey.name!r} nor sheet {main.name!r}"
            )
    return out


def _rating(sheet: Sheet, row: int, values: dict, cols: list[str]) -> float | None:
    got = [v for v in (sheet.number(row, values, c, required=False) for c in cols) if v is not None]
    return sum(got) / len(got) if got else None


class _QuestionBank:
    def __init__(self, sheet: Sheet | None, ctx: _Ctx) -> None:
        self.sheet, self.ctx = sheet, ctx
        self.ids: dict[str, int] = {}
        self.id_col = self.item_col = None
        if sheet is None:
            return
        self._by_row = dict(sheet.rows)
        cols = ctx.layout.sheet_columns("questions")
        self.id_col = sheet.find(cols["question_id"])
        self.item_col = sheet.find(cols["item_id"])
        if self.id_col is not None:
            for row, values in sheet.rows:
                q = _ref_text(values.get(self.id_col))
                if q is None:
                    continue
                if q in self.ids:
                    raise KnowChatFormatError(f"{sheet.where(row, self.id_col)}: duplicate question id {q} (first at row {self.ids[q]})")
                self.ids[q] = row

    def _item(self, row: int) -> str | None:
        if self.sheet is None or self.item_col is None:
            return None
        values = self._by_row[row]
        return self.sheet.text(row, values, self.item_col, required=False)

    def resolve(self, jsonl: Path, records: list[ConversationRecord]) -> tuple[dict[str, str | None], str]:
        """(reference -> item id or None, how references were matched)."""
        refs = [(r.line, q) for r in records for q in r.questions]
        if not refs:
            return {}, "none in the records"
        if self.sheet is None:
            self.ctx.notes.append("records refer to questions but the workbook has no questions sheet: references not used")
            return {}, f"{len(refs)} references, no questions sheet (not used)"
        name = self.sheet.name
        if self.id_col is not None and all(q in self.ids for _, q in refs):
            rows = {q: self.ids[q] for _, q in refs}
            how = f"by column {self.id_col!r}"
        else:
            base = self.ctx.layout.question_index_base
            n = len(self.sheet.rows)
            nums = [as_number(q) for _, q in refs]
            if base == 0 and all(x is not None and x.is_integer() for x in nums) and min(nums) >= 1 and max(nums) == n:  # type: ignore[type-var]
                base = 1  # 1..n cannot be 0-based positions; n can only be the last row counted from 1
                self.ctx.notes.append(f"question references run 1..{n}: read as row positions counted from 1")
            rows = {}
            for line, q in refs:
                num = as_number(q)
                if num is None or not num.is_integer() or not base <= num < base + n:
                    by_id = f"not a {self.id_col!r} in sheet {name!r} and " if self.id_col else ""
                    raise KnowChatFormatError(
                        f"{jsonl.name}, line {line}: question {q!r} is {by_id}not a row index {base}..{base + n - 1} of sheet {name!r}"
                    )
                rows[q] = self.sheet.rows[int(num) - base][0]
            how = f"by row position (first data row = {base})"
        items = {q: self._item(row) for q, row in rows.items()}
        linked = sum(v is not None for v in items.values())
        return items, f"{len(refs)} references to {len(rows)} of {len(self.sheet.rows)} questions, {how}; {linked} with an item id"
