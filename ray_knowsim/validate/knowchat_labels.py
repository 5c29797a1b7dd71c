"""Read the optional ``iu labels`` sheet: people's per-IU teaching-quality labels of tutor replies.

Why a module: the sheet is what the extractor is compared with (``validate --extractor-agreement``),
so every row is checked against the conversation it labels here, with errors naming file, sheet,
row and column: the session must exist, the reply must be one of its tutor replies, the label one
of the three, the item known (a column, or the session's one item), and no (reply, IU) twice.
Whether the IU is in the item's graph is checked where the graphs are known (extractor_labels).
"""

from __future__ import annotations

import re

from ray_knowsim.validate.knowchat_models import ConversationRecord, HumanIULabel, LoadContext, canon_session
from ray_knowsim.validate.xlsx import KnowChatFormatError, Sheet, as_number, blank

__all__ = ["LABELS", "normalise_label", "read_iu_labels"]

#: the extractor's teaching-quality labels (spec §1.5), the categories people label with
LABELS: tuple[str, ...] = ("well_explained", "shallow", "not_mentioned")


def normalise_label(value: object) -> str | None:
    """'Well explained', 'well-explained', 'WELL_EXPLAINED' -> 'well_explained'; None if not a label."""
    if blank(value) or not isinstance(value, str):
        return None
    key = re.sub(r"[^a-z]+", "_", value.strip().lower()).strip("_")
    return key if key in LABELS else None


def read_iu_labels(sheet: Sheet, ctx: LoadContext, records: list[ConversationRecord],
                   items: dict[tuple[str, int | str], list[str]]) -> list[HumanIULabel]:
    """The sheet's labels; ``items``: (prolific id, session) -> the session's item ids."""
    cols = ctx.layout.sheet_columns("iu_labels")
    need = sheet.require({k: cols[k] for k in ("prolific_id", "session", "turn", "iu", "label")})
    item_col = sheet.find(cols["item_id"])
    by_key = {(r.prolific_id, r.session): r for r in records}
    replies = {k: sum(m.role == "assistant" for m in r.messages) for k, r in by_key.items()}
    out: list[HumanIULabel] = []
    first: dict[tuple, int] = {}
    for row, values in sheet.rows:
        pid = sheet.text(row, values, need["prolific_id"])
        session = canon_session(values.get(need["session"]))
        if session is None:
            raise KnowChatFormatError(f"{sheet.where(row, need['session'])}: expected a whole number or an id, got {values.get(need['session'])!r}")
        key = (pid, session)
        if key not in by_key:
            raise KnowChatFormatError(f"{sheet.where(row)}: session {pid}/{session} has no conversation")
        turn = as_number(values.get(need["turn"]))
        if turn is None or not turn.is_integer() or turn < 1:
            raise KnowChatFormatError(f"{sheet.where(row, need['turn'])}: expected a reply number from 1, got {values.get(need['turn'])!r}")
        if turn > replies[key]:
            raise KnowChatFormatError(
                f"{sheet.where(row, need['turn'])}: reply {int(turn)} of session {pid}/{session}, which has {replies[key]} tutor replies")
        iu = sheet.text(row, values, need["iu"])
        label = normalise_label(values.get(need["label"]))
        if label is None:
            raise KnowChatFormatError(
                f"{sheet.where(row, need['label'])}: expected one of {', '.join(LABELS)}, got {values.get(need['label'])!r}")
        item = sheet.text(row, values, item_col, required=False) if item_col else None
        if item is None:
            named = items.get(key, [])
            if len(named) != 1:
                raise KnowChatFormatError(
                    f"{sheet.where(row)}: session {pid}/{session} names {len(named)} items"
                    + (f" ({', '.join(named)})" if named else "") + f"; give the item in a column {cols['item_id'][0]!r}")
            item = named[0]
        dup = (pid, session, int(turn), item, iu)
        if dup in first:
            raise KnowChatFormatError(f"{sheet.where(row)}: IU {iu} of reply {int(turn)} of session {pid}/{session} "
                                      f"is labelled twice (first at row {first[dup]})")
        first[dup] = row
        out.append(HumanIULabel(arm=ctx.arm, task=ctx.task, prolific_id=pid, session=session, turn=int(turn),
                                item_id=item, iu=iu, label=label, where=sheet.where(row)))
    return out
