"""Edits of synthetic run tables that plant what must show up on every page: TEST DOUBLES.

Use with ``tests.doubles.rundirs.committed_run(..., edit=...)``: each function takes the session and
turn tables of a synthetic run (random signals through the real rules) and returns them changed:

* :func:`failures` — chosen sessions fail with a chosen error and reason, per condition;
* :func:`broken_simulator` — what SmolLM2 did as extractor and judge: one label for every IU in
  every extractor answer, no state ever moving, IQ 1 for every conversation;
* :func:`truncations` — truncated answers of chosen roles per condition (session columns).
"""

from __future__ import annotations

import json
from typing import Mapping

import pyarrow as pa

from ray_knowsim.schema.results import truncation_column

#: a vLLM server's refusal, as the HTTP path reads it (status + the server's message), with a key it echoed
HTTP_400_DETAIL = "HTTP 400: max_tokens=8192 cannot be greater than max_model_len=4096"


def _set(table: pa.Table, name: str, values: list, type_: pa.DataType | None = None) -> pa.Table:
    arr = pa.array(values, type_ or table.schema.field(name).type)
    return table.set_column(table.schema.get_field_index(name), name, arr)


def failures(sessions: pa.Table, turns: pa.Table | None, plan: Mapping[str, tuple[int, str, str | None]]
             ) -> tuple[pa.Table, pa.Table | None]:
    """``plan``: condition -> (how many of its sessions fail, error code, error_detail); the first
    sessions of the condition in row order fail, their metrics cleared and their turns dropped."""
    rows = sessions.to_pylist()
    left = {c: n for c, (n, _, _) in plan.items()}
    failed = set()
    for row in rows:
        c = row["condition"]
        if left.get(c, 0) > 0:
            left[c] -= 1
            _, error, detail = plan[c]
            row.update(status="failed", error=error, error_detail=detail, stop_reason="error", turns=0, kg=None, nkg=None,
                       dc=None, co=None, iq=None)
            failed.add(row["session_id"])
    out = pa.Table.from_pylist(rows, schema=sessions.schema)
    if turns is not None:
        keep = [sid not in failed for sid in turns.column("session_id").to_pylist()]
        turns = turns.filter(pa.array(keep))
    return out, turns


def broken_simulator(sessions: pa.Table, turns: pa.Table | None, label: str = "well_explained", iq: float = 1.0
                     ) -> tuple[pa.Table, pa.Table | None]:
    """Every extractor answer gives ``label`` to every IU, no state moves, the judge gives ``iq`` to all."""
    assert turns is not None
    initial = dict(zip(sessions.column("session_id").to_pylist(), sessions.column("initial_states").to_pylist()))
    signals, states, ups = [], [], []
    for sid, text in zip(turns.column("session_id").to_pylist(), turns.column("signals_json").to_pylist()):
        entries = json.loads(text)
        signals.append(json.dumps([{**e, "teaching_quality": label} for e in entries]))
        states.append(list(initial[sid]))
        ups.append(0)
    turns = _set(_set(_set(turns, "signals_json", signals), "states", states), "n_upward_transitions", ups)
    sessions = _set(sessions, "iq", [iq] * sessions.num_rows)
    return sessions, turns


def truncations(sessions: pa.Table, turns: pa.Table | None, plan: Mapping[str, Mapping[str, int]]
                ) -> tuple[pa.Table, pa.Table | None]:
    """``plan``: condition -> {role: truncated answers per session}; ``llm_truncations`` is their sum."""
    conds = sessions.column("condition").to_pylist()
    roles = sorted({r for per in plan.values() for r in per})
    for role in roles:
        sessions = _set(sessions, truncation_column(role), [plan.get(c, {}).get(role, 0) for c in conds])
    sessions = _set(sessions, "llm_truncations", [sum(plan.get(c, {}).values()) for c in conds])
    return sessions, turns
