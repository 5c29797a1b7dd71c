"""Load human-study data in the KnowChat release format, strictly.

The real release is not on this machine; this is the layout we read (designed from the dataset
card; `scripts/make_synthetic_knowchat.py` writes exactly this):

Folder ``DIR`` (``--human DIR``) holds one JSONL conversation file and one XLSX workbook per
(arm, task) -- four of each in the full release. The file stem names both: it must contain
exactly one arm token (``strategy``/``strategies`` or ``model``/``models``) and one task token
(``math``/``mathqa`` or ``expertqa``), tokens split on non-alphanumerics, case-insensitive; a
JSONL file and a workbook with the same (arm, task) belong together, e.g.
``knowchat_strategy_math.jsonl`` + ``knowchat_strategy_math.xlsx``. Other files are ignored.

JSONL, one object per line (blank lines skipped; extra keys allowed):
  ``prolific id`` str; ``topic`` str; ``condition`` int code (or its label, see
  conditions.CONDITION_CODES); ``session`` int >= 0 (the participant's session number);
  ``questions`` list of question ids (str or int) listed in the ``questions`` sheet;
  ``messages`` non-empty list of ``{"role": "user"|"assistant"|"system", "content": str}``.
  (prolific id, session) is unique and must match a ``main`` row with the same condition.

Workbook: all seven sheets must exist; row 1 is the header; headers match case-insensitively
with spaces, ``_`` and ``-`` equivalent; extra columns are ignored; empty rows are skipped.
  ``background``   ``prolific id`` (unique); other columns are free-form and not read.
  ``prescreening`` ``prolific id`` (unique), ``score``, ``max score`` (> 0, 0 <= score <= max).
                   The level is LevelCuts.level(score / max score).
  ``pretest``      ``prolific id``, ``session``, ``score``, ``max score``; unique per
  ``posttest``     (prolific id, session). Math: every session needs both, with the same max;
                   KG = (post - pre) / (max - pre), undefined (left out) when pre == max.
                   Other tasks: the sheets may be empty and are not read.
  ``main``         one row per session: ``prolific id``, ``session``, ``condition`` (code or
                   label); optional ``topic``.
  ``survey``       one row per session: ``prolific id``, ``session``. The ratings
                   ``delivery calibration``, ``cognitive overload``, ``interaction quality``
                   are read from ``survey``, or from ``main`` for a column ``survey`` lacks.
                   A blank rating is missing (left out); any other non-number is an error.
  ``questions``    ``question id`` (unique); optional ``item id`` (the simulator's item id,
                   e.g. ``math_003``, used for concept coverage) and ``question`` text.

Every participant in ``main`` must appear in ``background`` and ``prescreening``; ``main`` and
``survey`` must list the same sessions; every error names file, sheet (or line) and row.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ray_knowsim.validate.conditions import LEVELS, LevelCuts, condition_label, condition_order, math_kg
from ray_knowsim.validate.xlsx import KnowChatFormatError, Sheet, read_sheets

__all__ = ["KnowChatFormatError", "HumanSession", "HumanConversation", "HumanDataset", "load_knowchat", "discover"]

SHEETS: tuple[str, ...] = ("background", "prescreening", "pretest", "posttest", "main", "survey", "questions")
RATING_COLUMNS: dict[str, str] = {"DC": "delivery calibration", "CO": "cognitive overload", "IQ": "interaction quality"}
_ARM_TOKENS = {"strategy": "strategy", "strategies": "strategy", "model": "model", "models": "model"}
_TASK_TOKENS = {"math": "math", "mathqa": "math", "expertqa": "expertqa"}


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "assistant", "system"]
    content: str


class ConversationRecord(BaseModel):
    """One JSONL line as released."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    prolific_id: str = Field(alias="prolific id", min_length=1)
    topic: str
    condition: int | str
    session: int = Field(ge=0)
    questions: list[str | int]
    messages: list[Message] = Field(min_length=1)

    @field_validator("session", "condition", mode="before")
    @classmethod
    def _no_bool(cls, v: object) -> object:
        if isinstance(v, bool):
            raise ValueError("expected a number, got a boolean")
        return v


class HumanSession(BaseModel):
    """One rated human session, with its level and metrics resolved."""

    model_config = ConfigDict(extra="forbid")
    arm: str
    task: str
    prolific_id: str
    session: int
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
    session: int
    item_ids: list[str]
    texts: list[str]  # user and assistant message contents, in order


class HumanDataset(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sessions: list[HumanSession]
    conversations: list[HumanConversation]

    def frame(self) -> pd.DataFrame:
        """One row per session (columns of HumanSession)."""
        cols = list(HumanSession.model_fields)
        return pd.DataFrame([s.model_dump() for s in self.sessions], columns=cols)


def _tokens(stem: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", stem.lower()) if t]


def _arm_task(path: Path) -> tuple[str, str]:
    toks = _tokens(path.stem)
    arms = {_ARM_TOKENS[t] for t in toks if t in _ARM_TOKENS}
    tasks = {_TASK_TOKENS[t] for t in toks if t in _TASK_TOKENS}
    if len(arms) != 1 or len(tasks) != 1:
        raise KnowChatFormatError(
            f"{path.name}: the file name must name exactly one arm (strategy|model) and one task "
            f"(math|expertqa), e.g. knowchat_strategy_math{path.suffix}"
        )
    return arms.pop(), tasks.pop()


def discover(folder: Path) -> dict[tuple[str, str], tuple[Path, Path]]:
    """(arm, task) -> (conversations.jsonl, workbook.xlsx)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise KnowChatFormatError(f"{folder}: not a folder")
    found: dict[str, dict[tuple[str, str], Path]] = {".jsonl": {}, ".xlsx": {}}
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() not in found or path.name.startswith(("~$", ".")) or not path.is_file():
            continue
        key = _arm_task(path)
        bucket = found[path.suffix.lower()]
        if key in bucket:
            raise KnowChatFormatError(f"{path.name} and {bucket[key].name}: two {path.suffix} files for arm {key[0]!r}, task {key[1]!r}")
        bucket[key] = path
    jsonl, xlsx = found[".jsonl"], found[".xlsx"]
    if not jsonl and not xlsx:
        raise KnowChatFormatError(f"{folder}: no KnowChat .jsonl/.xlsx files found")
    for key in sorted(set(jsonl) ^ set(xlsx)):
        have = (jsonl.get(key) or xlsx.get(key)).name
        lacking = "workbook (.xlsx)" if key in jsonl else "conversation file (.jsonl)"
        raise KnowChatFormatError(f"{have}: no matching {lacking} for arm {key[0]!r}, task {key[1]!r}")
    return {k: (jsonl[k], xlsx[k]) for k in sorted(jsonl)}


def load_knowchat(folder: Path, cuts: LevelCuts | None = None) -> HumanDataset:
    """Load every (arm, task) pair in ``folder``; raises KnowChatFormatError naming the place."""
    cuts = cuts or LevelCuts()
    sessions: list[HumanSession] = []
    conversations: list[HumanConversation] = []
    for (arm, task), (jsonl, xlsx) in discover(folder).items():
        s, c = _load_pair(arm, task, jsonl, xlsx, cuts)
        sessions += s
        conversations += c
    return HumanDataset(sessions=sessions, conversations=conversations)


def _unique_by(sheet: Sheet, keys: tuple[str, ...]) -> dict[tuple, tuple[int, dict]]:
    sheet.require(*keys)
    out: dict[tuple, tuple[int, dict]] = {}
    for row, values in sheet.rows:
        key = tuple(sheet.integer(row, values, k) if k == "session" else sheet.text(row, values, k) for k in keys)
        if key in out:
            what = "participant" if keys == ("prolific id",) else "entry"
            raise KnowChatFormatError(
                f"{sheet.where(row)}: duplicate {what} {', '.join(map(str, key))} (first at row {out[key][0]})"
            )
        out[key] = (row, values)
    return out


def _load_pair(arm: str, task: str, jsonl: Path, xlsx: Path, cuts: LevelCuts):
    sh = read_sheets(xlsx, SHEETS)
    questions = _questions(sh["questions"])
    background = _unique_by(sh["background"], ("prolific id",))
    levels = _prescreening(sh["prescreening"], cuts)
    main = _unique_by(sh["main"], ("prolific id", "session"))
    sh["main"].require("condition")
    survey = _unique_by(sh["survey"], ("prolific id", "session"))
    ratings = _ratings(sh["survey"], sh["main"], survey, main)
    kgs = _math_kg(sh["pretest"], sh["posttest"], main) if task == "math" else {}

    for key in survey:
        if key not in main:
            raise KnowChatFormatError(f"{sh['survey'].where(survey[key][0])}: session {key[0]}/{key[1]} is not in sheet 'main'")
    records = _read_jsonl(jsonl, arm, questions)

    for key, (line, _, _) in records.items():
        if key not in main:
            raise KnowChatFormatError(f"{jsonl.name}, line {line}: session {key[0]}/{key[1]} is not in sheet 'main' of {xlsx.name}")

    sessions: list[HumanSession] = []
    m = sh["main"]
    for key, (row, values) in main.items():
        pid, session = key
        if (pid,) not in background:
            raise KnowChatFormatError(f"{m.where(row)}: participant {pid} is not in sheet 'background'")
        if pid not in levels:
            raise KnowChatFormatError(f"{m.where(row)}: participant {pid} has no 'prescreening' row")
        if key not in survey:
            raise KnowChatFormatError(f"{m.where(row)}: session {pid}/{session} has no 'survey' row")
        try:
            label = condition_label(arm, m.raw(values, "condition"))
        except ValueError as exc:
            raise KnowChatFormatError(f"{m.where(row, 'condition')}: {exc}") from None
        if key not in records:
            raise KnowChatFormatError(f"{m.where(row)}: session {pid}/{session} has no conversation in {jsonl.name}")
        line, rec, rec_label = records[key]
        if rec_label != label:
            raise KnowChatFormatError(
                f"{jsonl.name}, line {line}: condition {rec_label!r} disagrees with {m.where(row)} ({label!r})"
            )
        level, fraction = levels[pid]
        qids = [str(q) for q in rec.questions]
        sessions.append(
            HumanSession(
                arm=arm,
                task=task,
                prolific_id=pid,
                session=session,
                condition_code=condition_order(arm, label),
                condition=label,
                topic=(m.text(row, values, "topic", required=False) if m.has("topic") else None) or rec.topic,
                level=level,
                prescreen_fraction=fraction,
                kg=kgs.get(key),
                question_ids=qids,
                item_ids=sorted({questions[q] for q in qids if questions.get(q)}),
                **ratings[key],
            )
        )
    conversations = [
        HumanConversation(
            arm=arm,
            task=task,
            prolific_id=key[0],
            session=key[1],
            item_ids=sorted({questions[str(q)] for q in rec.questions if questions.get(str(q))}),
            texts=[msg.content for msg in rec.messages if msg.role != "system"],
        )
        for key, (_, rec, _) in records.items()
    ]
    return sessions, conversations


def _questions(sheet: Sheet) -> dict[str, str | None]:
    """question id -> item id (None where the sheet has no item id)."""
    rows = _unique_by(sheet, ("question id",))
    has_item = sheet.has("item id")
    return {
        key[0]: (sheet.text(row, values, "item id", required=False) if has_item else None)
        for key, (row, values) in rows.items()
    }


def _prescreening(sheet: Sheet, cuts: LevelCuts) -> dict[str, tuple[str, float]]:
    rows = _unique_by(sheet, ("prolific id",))
    sheet.require("score", "max score")
    out: dict[str, tuple[str, float]] = {}
    for (pid,), (row, values) in rows.items():
        score, top = _score(sheet, row, values)
        out[pid] = (cuts.level(score / top), score / top)
    assert set(v[0] for v in out.values()) <= set(LEVELS)
    return out


def _score(sheet: Sheet, row: int, values: dict) -> tuple[float, float]:
    score = sheet.number(row, values, "score")
    top = sheet.number(row, values, "max score")
    assert score is not None and top is not None
    if top <= 0:
        raise KnowChatFormatError(f"{sheet.where(row, 'max score')}: must be > 0, got {top:g}")
    if not 0 <= score <= top:
        raise KnowChatFormatError(f"{sheet.where(row, 'score')}: {score:g} is outside 0..{top:g}")
    return score, top


def _ratings(survey: Sheet, main: Sheet, srows: dict, mrows: dict) -> dict[tuple, dict[str, float | None]]:
    out: dict[tuple, dict[str, float | None]] = {k: {} for k in srows}
    for metric, column in RATING_COLUMNS.items():
        sheet, rows = (survey, srows) if survey.has(column) else (main, mrows) if main.has(column) else (None, None)
        if sheet is None:
            raise KnowChatFormatError(
                f"{survey.file.name}: rating column {column!r} is in neither sheet 'survey' nor sheet 'main'"
            )
        for key in out:
            if key in rows:
                row, values = rows[key]
                out[key][metric.lower()] = sheet.number(row, values, column, required=False)
    return out


def _math_kg(pre: Sheet, post: Sheet, main: dict) -> dict[tuple, float | None]:
    cols = ("prolific id", "session", "score", "max score")
    pre_rows, post_rows = _unique_by(pre, cols[:2]), _unique_by(post, cols[:2])
    pre.require(*cols)
    post.require(*cols)
    for sheet, rows in ((pre, pre_rows), (post, post_rows)):
        for key, (row, _) in rows.items():
            if key not in main:
                raise KnowChatFormatError(f"{sheet.where(row)}: session {key[0]}/{key[1]} is not in sheet 'main'")
    out: dict[tuple, float | None] = {}
    for key in main:
        if key not in pre_rows or key not in post_rows:
            lacking = "pretest" if key not in pre_rows else "posttest"
            raise KnowChatFormatError(
                f"{pre.file.name}, sheet 'main', row {main[key][0]}: math session {key[0]}/{key[1]} has no {lacking!r} row"
            )
        (r0, v0), (r1, v1) = pre_rows[key], post_rows[key]
        s0, m0 = _score(pre, r0, v0)
        s1, m1 = _score(post, r1, v1)
        if m0 != m1:
            raise KnowChatFormatError(
                f"{post.where(r1, 'max score')}: {m1:g} differs from the pretest's {m0:g} ({pre.where(r0)})"
            )
        out[key] = math_kg(s0, s1, m0)
    return out


def _read_jsonl(path: Path, arm: str, questions: dict) -> dict[tuple, tuple[int, ConversationRecord, str]]:
    out: dict[tuple, tuple[int, ConversationRecord, str]] = {}
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path.name}, line {line_no}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise KnowChatFormatError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(raw, dict):
                raise KnowChatFormatError(f"{where}: expected a JSON object, got {type(raw).__name__}")
            try:
                rec = ConversationRecord.model_validate(raw)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in exc.errors()[:5]
                )
                raise KnowChatFormatError(f"{where}: {problems}") from None
            try:
                label = condition_label(arm, rec.condition)
            except ValueError as exc:
                raise KnowChatFormatError(f"{where}, field 'condition': {exc}") from None
            for q in rec.questions:
                if str(q) not in questions:
                    raise KnowChatFormatError(f"{where}: question id {q!r} is not in sheet 'questions'")
            key = (rec.prolific_id.strip(), rec.session)
            if key in out:
                raise KnowChatFormatError(f"{where}: duplicate session {key[0]}/{key[1]} (first at line {out[key][0]})")
            out[key] = (line_no, rec, label)
    return out
