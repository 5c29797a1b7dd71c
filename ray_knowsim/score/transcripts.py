"""What a judge reads of one finished session, rebuilt from its session and turn rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pyarrow as pa

from ray_knowsim.schema.items import Item, item_key
from ray_knowsim.simulators import SIMULATORS


@dataclass(frozen=True)
class Transcript:
    session_id: str
    task: str
    item_id: str
    knowledge_level: str
    simulator: str
    seed: int
    item: Item
    messages: list[list[str]]  # [speaker, text] in order, as the simulation held them

    @property
    def structured(self) -> bool:
        """Whether the session kept a knowledge state (the simulator registry says, plugins too)."""
        return SIMULATORS.get(self.simulator).structured

    @property
    def n_user(self) -> int:
        return sum(1 for speaker, _ in self.messages if speaker == "user")


#: the columns :func:`transcripts_from_tables` reads (a scoring pass reads only these)
SESSION_COLUMNS = ["session_id", "task", "item_id", "knowledge_level", "simulator", "seed", "status", "final_user_message"]
TURN_COLUMNS = ["session_id", "turn", "user_message", "assistant_message"]


def transcripts_from_tables(sessions: pa.Table, turns: pa.Table, items: Mapping[str, Item]) -> list[Transcript]:
    """The transcripts of the finished (``status == "ok"``) sessions of one shard, in row order.

    ``items`` is keyed by :func:`ray_knowsim.schema.items.item_key`. A learner's closing message that got no reply (a
    baseline learner ending the conversation) is the session row's ``final_user_message``.
    """
    by_session: dict[str, list[tuple[int, str, str]]] = {}
    for sid, turn, user, assistant in zip(
        turns.column("session_id").to_pylist(),
        turns.column("turn").to_pylist(),
        turns.column("user_message").to_pylist(),
        turns.column("assistant_message").to_pylist(),
    ):
        by_session.setdefault(sid, []).append((turn, user, assistant))
    out = []
    for row in sessions.select(SESSION_COLUMNS).to_pylist():
        if row["status"] != "ok":
            continue
        key = item_key(row["task"], row["item_id"])
        if key not in items:
            raise KeyError(f"session {row['session_id']}: item {key} is not among the run's inputs")
        messages: list[list[str]] = []
        for _, user, assistant in sorted(by_session.get(row["session_id"], [])):
            messages += [["user", user], ["assistant", assistant]]
        if row["final_user_message"]:
            messages.append(["user", row["final_user_message"]])
        out.append(
            Transcript(
                session_id=row["session_id"], task=row["task"], item_id=row["item_id"],
                knowledge_level=row["knowledge_level"], simulator=row["simulator"], seed=int(row["seed"]),
                item=items[key], messages=messages,
            )
        )  # fmt: skip
    return out


__all__ = ["Transcript", "transcripts_from_tables"]
