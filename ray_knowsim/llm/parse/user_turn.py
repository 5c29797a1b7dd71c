"""The learner simulator's reply (KnowSim and the baselines)."""

from __future__ import annotations

import re

from pydantic import ValidationError

from ray_knowsim.llm.parse.json_extract import extract_json
from ray_knowsim.llm.parse.result import ParseResult, fail, rename, validation_detail
from ray_knowsim.schema.outputs import UserTurn

_XML_TAG = r"<{tag}>(.*?)</{tag}>"


def _from_xml(text: str) -> dict | None:
    found = {}
    for tag in ("thought", "message", "attempt_verify", "terminate"):
        m = re.search(_XML_TAG.format(tag=tag), text, re.DOTALL | re.IGNORECASE)
        if m:
            found[tag] = m.group(1).strip()
    if "message" not in found:
        return None
    for flag in ("attempt_verify", "terminate"):
        if flag in found:
            found[flag] = found[flag].lower() in ("true", "yes", "1")
    return found


def parse_user_turn(text: str | None, *, role: str = "user_sim") -> ParseResult[UserTurn]:
    """A simulator reply (KnowSim or baseline). Legacy ``<message>`` tag replies are accepted."""
    ext = extract_json(text)
    repairs = list(ext.repairs)
    if ext.error is not None or not isinstance(ext.value, dict):
        xml = _from_xml(text or "")
        if xml is None:
            kind = "empty" if not (text or "").strip() else "invalid_json"
            return fail(role, kind, ext.error or "the reply is not a JSON object", repairs)
        data, repairs = xml, ["xml_tags"]
    else:
        data = dict(ext.value)
    rename(data, "message", ("response", "reply", "user_message", "text", "query"), repairs)
    rename(data, "thought", ("thinking", "thoughts", "reasoning"), repairs)
    try:
        turn = UserTurn.model_validate(data)
    except ValidationError as exc:
        return fail(role, "invalid_output", validation_detail(exc), repairs, data)
    if not turn.message.strip():
        what = "thought-only reply (empty message)" if turn.thought.strip() else "empty message"
        return fail(role, "empty", what, repairs, data)
    return ParseResult(value=turn, repairs=tuple(repairs), raw=data)
