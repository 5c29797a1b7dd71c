"""What a judge reads of one finished session, rebuilt from its session and turn rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

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
    #: the simulator's own record, read only for a judge that asks for it (``Judge.reads_record``):
    #: the IU graph as recorded, the initial states, and per turn the post-turn states and the
    #: extractor's entries (JSON text); empty otherwise
    graph_json: str = ""
    initial_states: tuple[int, ...] = ()
    turn_states: tuple[tuple[int, ...], ...] = ()
    turn_signals: tuple[str, ...] = ()

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
#: what a judge of the simulator's record reads besides (:attr:`Transcript.graph_json` & co.)
RECORD_SESSION_COLUMNS = ["graph_json", "initial_states"]
RECORD_TURN_COLUMNS = ["states", "signals_json"]


def transcripts_from_tables(sessions: pa.Table, turns: pa.Table, items: Mapping[str, Item]) -> list[Transcript]:
    """The transcripts of the finished (``status == "ok"``) sessions of one shard, in row order.

    ``items`` is keyed by :func:`ray_knowsim.schema.items.item_key`. A learner's closing message that got no reply (a
    baseline learner ending the conversation) is the session row's ``final_user_message``.
    """
    record = all(c in turns.column_names for c in RECORD_TURN_COLUMNS) and all(c in sessions.column_names for c in RECORD_SESSION_COLUMNS)
    n = turns.num_rows
    states = turns.column("states").to_pylist() if record else [None] * n
    signals = turns.column("signals_json").to_pylist() if record else [None] * n
    by_session: dict[str, list[tuple[int, str, str, Any, Any]]] = {}
    for sid, turn, user, assistant, st, sig in zip(
        turns.column("session_id").to_pylist(),
        turns.column("turn").to_pylist(),
        turns.column("user_message").to_pylist(),
        turns.column("assistant_message").to_pylist(),
        states, signals,
    ):
        by_session.setdefault(sid, []).append((turn, user, assistant, st, sig))
    out = []
    for row in sessions.select(SESSION_COLUMNS + (RECORD_SESSION_COLUMNS if record else [])).to_pylist():
        if row["status"] != "ok":
            continue
        key = item_key(row["task"], row["item_id"])
        if key not in items:
            raise KeyError(f"session {row['session_id']}: item {key} is not among the run's inputs")
        messages: list[list[str]] = []
        rows = sorted(by_session.get(row["session_id"], []), key=lambda r: r[0])
        for _, user, assistant, _, _ in rows:
            messages += [["user", user], ["assistant", assistant]]
        if row["final_user_message"]:
            messages.append(["user", row["final_user_message"]])
        out.append(
            Transcript(
                session_id=row["session_id"], task=row["task"], item_id=row["item_id"],
                knowledge_level=row["knowledge_level"], simulator=row["simulator"], seed=int(row["seed"]),
                item=items[key], messages=messages,
                **({"graph_json": row["graph_json"] or "", "initial_states": tuple(row["initial_states"] or ()),
                    "turn_states": tuple(tuple(r[3] or ()) for r in rows), "turn_signals": tuple(r[4] or "[]" for r in rows)}
                   if record else {}),
            )
        )  # fmt: skip
    return out


__all__ = ["RECORD_SESSION_COLUMNS", "RECORD_TURN_COLUMNS", "Transcript", "transcripts_from_tables"]
