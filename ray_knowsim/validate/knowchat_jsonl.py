"""Read a KnowChat conversation file (JSONL) into ConversationRecords, resolved through the layout.

Why a module: the JSONL format (fields by the layout's names, condition codes, question references,
messages and roles) is checked here, one line at a time, with errors naming file and line.
"""

from __future__ import annotations

import json
from pathlib import Path

from ray_knowsim.io.loaders import decode_json
from ray_knowsim.validate.knowchat_models import ConversationRecord, Message, LoadContext, ref_text, canon_session
from ray_knowsim.validate.layout import KnowChatLayout, name_key
from ray_knowsim.validate.xlsx import KnowChatFormatError, as_text, blank

__all__ = ["read_conversations"]


def _field(raw: dict, names: list[str]) -> tuple[bool, object]:
    keys = {name_key(k): k for k in raw}
    for n in names:
        k = keys.get(name_key(n))
        if k is not None:
            return True, raw[k]
    return False, None


def read_conversations(path: Path, ctx: LoadContext) -> list[ConversationRecord]:
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


def _record(raw: dict, where: str, line_no: int, ctx: LoadContext) -> ConversationRecord:
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
        text = ref_text(q)
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
