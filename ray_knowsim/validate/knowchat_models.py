"""The KnowChat records and results, and the values both readers share.

Why a module: the JSONL reader, the workbook readers and the loaders all build or read these
objects (a conversation record, a rated session, a pair report) and canonicalise session ids and
question references the same way; ``LoadContext`` is what one (arm, task) load carries between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from ray_knowsim.validate.layout import KnowChatLayout
from ray_knowsim.validate.xlsx import as_number, as_text, blank

__all__ = [
    "Message", "ConversationRecord", "HumanSession", "HumanConversation", "HumanIULabel", "PairReport", "HumanDataset",
    "LoadContext", "SessionKey", "canon_session", "ref_text",
]

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
    roles: list[str] = Field(default_factory=list)  # the speaker of each text ("user" / "assistant")

    def exchange(self, turn: int) -> tuple[list[list[str]], str, str]:
        """(the conversation before it as [speaker, text] pairs, the learner's message, the tutor's
        reply) of tutor reply ``turn`` (1-based over the assistant messages). The learner's message
        is every user message since the previous reply, joined (empty before an opening greeting)."""
        pairs = [[r, t] for r, t in zip(self.roles, self.texts)]
        replies = [k for k, (r, _) in enumerate(pairs) if r == "assistant"]
        if not 1 <= turn <= len(replies):
            raise ValueError(f"reply {turn} of a conversation with {len(replies)} tutor replies")
        at = replies[turn - 1]
        start = replies[turn - 2] + 1 if turn > 1 else 0
        user = "\n\n".join(t for r, t in pairs[start:at] if r == "user")
        return pairs[:start], user, pairs[at][1]


class HumanIULabel(BaseModel):
    """A person's label of one IU in one tutor reply (sheet ``iu labels``)."""

    model_config = ConfigDict(extra="forbid")
    arm: str
    task: str
    prolific_id: str
    session: int | str
    turn: int = Field(ge=1)  # the tutor reply, counted from 1
    item_id: str
    iu: str
    label: Literal["well_explained", "shallow", "not_mentioned"]
    where: str  # file, sheet and row, for messages


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
    iu_labels: str | None = None  # how many per-IU labels were read, over how many sessions (None: no sheet)
    notes: list[str] = Field(default_factory=list)


class HumanDataset(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sessions: list[HumanSession]
    conversations: list[HumanConversation]
    reports: list[PairReport] = Field(default_factory=list)
    ignored: list[str] = Field(default_factory=list)
    iu_labels: list[HumanIULabel] = Field(default_factory=list)

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


def ref_text(value: object) -> str | None:
    """A question reference as text: 3, 3.0, '3' -> '3'."""
    if isinstance(value, bool) or blank(value) or isinstance(value, (list, dict)):
        return None
    num = as_number(value)
    if num is not None and num.is_integer():
        return str(int(num))
    return as_text(value)


# ---------------------------------------------------------------- one load


@dataclass
class LoadContext:
    """One (arm, task) pair being loaded: its layout, and the notes the readers leave for the report."""

    arm: str
    task: str
    layout: KnowChatLayout
    notes: list[str] = field(default_factory=list)
