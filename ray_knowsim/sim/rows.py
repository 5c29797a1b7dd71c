"""The one place a session's rows are built: a :class:`TurnRow` from the rules' per-turn update
and metrics as each turn ends, the :class:`SessionRow` from the finished session."""

from __future__ import annotations

import json
from typing import Any, Sequence

from pydantic import TypeAdapter

from ray_knowsim.identity_memo import IdentityMemo
from ray_knowsim.schema.chat import Usage
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.results import (
    FAILURE_MODES, SIMULATION_ROLES, TRUNCATION_ROLES, SessionRow, TurnRow, session_row_model, truncation_column, usage_columns,
)  # fmt: skip
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.prerequisites import density
from ray_knowsim.rules.turn_metrics import TurnMetrics
from ray_knowsim.rules.update import TurnUpdate
from ray_knowsim.sim.cost import session_cost
from ray_knowsim.sim.session import LiveSession
from ray_knowsim.sim.types import ShardContext

#: TurnRow columns copied from the rules' TurnUpdate / TurnMetrics of the turn
UPDATE_COLUMNS: tuple[str, ...] = ("comprehension_load", "attempt_load", "effective_load", "overload", "eta")
METRIC_COLUMNS: tuple[str, ...] = (
    "n_upward_transitions", "absorbed_gain", "ic_numerator", "ic_denominator", "zpd_size", "absorbed_ic_numerator",
    "new_ius", "disallowed", "familiarity", "novelty", "engagement",
)  # fmt: skip
#: a turn without a state update (baseline simulators): nothing moved, full efficiency
NO_UPDATE: dict[str, float | bool] = {"comprehension_load": 0.0, "attempt_load": 0.0, "effective_load": 0.0, "overload": False, "eta": 1.0}


def _zero(column: str) -> int | float:
    return 0.0 if TurnRow.model_fields[column].annotation is float else 0


_SIGNAL_LIST = TypeAdapter(list[SignalEntry])
#: ``json.dumps(value, ensure_ascii=False)``, without making an encoder on each call
_JSON_TEXT = json.JSONEncoder(ensure_ascii=False).encode


#: a graph's ``graph_json`` column, by graph object (a loaded graph is never changed)
_GRAPH_JSON = IdentityMemo(512)


def graph_json(graph: IUGraph) -> str:
    """``json.dumps(graph.to_json_dict(), ensure_ascii=False)``, the session row's copy of its
    graph, written once per graph object rather than once per session (the model's dump alone
    took ~69 us of a ~700 us session row, in the run)."""
    return _GRAPH_JSON.get_or_make(graph, lambda g: json.dumps(g.to_json_dict(), ensure_ascii=False))


def signals_json(entries: Sequence[SignalEntry]) -> str:
    """A turn's signal list as its row's JSON: the entries as ``model_dump(mode="json")`` gives them.
    A plain SignalEntry without extra keys (every entry of a live report, nearly always) holds
    only its seven fields, all strings or None, in its ``__dict__``: that is its dump, read in
    place (a third of this function's time went to the list serializer); with extras, the list
    serializer dumps them all in one call; a subclass is dumped by its own model, as ever (the
    list serializer would dump it as the base class)."""
    if all(e.__class__ is SignalEntry and not e.__pydantic_extra__ for e in entries):
        return _JSON_TEXT([e.__dict__ for e in entries])
    if all(e.__class__ is SignalEntry for e in entries):
        return _JSON_TEXT(_SIGNAL_LIST.dump_python(list(entries), mode="json"))
    return _JSON_TEXT([e.model_dump(mode="json") for e in entries])


def turn_row(
    session_id: str,
    turn: int,
    user_message: str,
    assistant_message: str,
    *,
    states: Sequence[int],
    carries: Sequence[float],
    entries: Sequence[SignalEntry] = (),
    update: TurnUpdate | None = None,
    metrics: TurnMetrics | None = None,
    density: float = 0.0,
    extractor_repairs: Sequence[str] = (),
    extractor_refusals: Sequence[str] = (),
    run_id: str = "",
) -> TurnRow:
    """A turn's row (``states``/``carries`` in graph node order; ``extractor_repairs`` /
    ``extractor_refusals``: the extractor's drift this turn, see :mod:`ray_knowsim.sim.ask`). Without ``update``/``metrics``
    (a baseline turn: no learner state) the state columns are zeros."""
    fields: dict[str, object] = {c: getattr(update, c) for c in UPDATE_COLUMNS} if update is not None else dict(NO_UPDATE)
    if metrics is not None:
        fields |= {c: getattr(metrics, c) for c in METRIC_COLUMNS}
        fields |= {f"fm_{m}": metrics.failure_modes[m] for m in FAILURE_MODES}
    else:
        fields |= {c: _zero(c) for c in METRIC_COLUMNS}
    return TurnRow(
        run_id=run_id, session_id=session_id, turn=turn, user_message=user_message, assistant_message=assistant_message,
        signals_json=signals_json(entries),
        states=list(states), carries=list(carries), density=density,
        extractor_repairs=_JSON_TEXT(list(extractor_repairs)), extractor_refusals=_JSON_TEXT(list(extractor_refusals)),
        **fields,
    )  # fmt: skip


def state_turn_row(live: LiveSession, turn: int, entries: Sequence[SignalEntry], update: TurnUpdate, metrics: TurnMetrics,
                   *, repairs: Sequence[str] = (), refusals: Sequence[str] = (), run_id: str = "") -> TurnRow:
    """The row of a structured learner's turn ``turn``, the last exchange of ``live``'s transcript,
    after its state update."""
    ids = live.index.ids
    return turn_row(
        live.spec.session_id, turn, live.transcript[-2][1], live.transcript[-1][1], entries=entries, update=update,
        metrics=metrics, states=[update.post[v] for v in ids], carries=[update.carries[v] for v in ids],
        density=density(live.index, update.post), extractor_repairs=repairs, extractor_refusals=refusals, run_id=run_id,
    )  # fmt: skip


def baseline_turn_row(live: LiveSession, turn: int, run_id: str = "") -> TurnRow:
    """The row of a baseline learner's turn: the exchange, no state."""
    n = live.index.size
    return turn_row(live.spec.session_id, turn, live.transcript[-2][1], live.transcript[-1][1], states=[0] * n,
                    carries=[0.0] * n, run_id=run_id)


def session_row(live: LiveSession, ctx: ShardContext) -> SessionRow:
    """The finished session's row: its identity, how it ended, what it spent and (a structured
    learner that did not fail) its final and at-early-stop metrics."""
    s, k, spent = live.spec, live.knowledge, live.ledger
    failed = live.status == "failed"
    row: dict[str, Any] = {
        "run_id": ctx.run_id,
        "config_hash": ctx.config_hash,
        "session_id": s.session_id,
        "task": s.task,
        "item_id": s.item_id,
        "knowledge_level": s.knowledge_level,
        "condition": s.condition,
        "assistant_model": s.assistant_model,
        "assistant_strategy": s.assistant_strategy,
        "simulator": s.simulator,
        "trial": s.trial,
        "seed": s.seed,
        "rules_preset": ctx.rules.preset,
        "graph_size": live.index.size,
        "tau": k.tau,
        "iu_labels": list(live.index.labels),
        "initial_states": [k.initial[v] for v in live.index.ids],
        "graph_json": graph_json(live.graph),
        "status": "failed" if failed else "ok",
        "turns": live.turns_done,
        "stop_reason": live.stop_reason,
        "error": live.error,
        "llm_calls": spent.calls,
        "llm_cache_hits": spent.cache_hits,
        "llm_truncations": spent.truncations,
        **{truncation_column(r): spent.truncations_by_role.get(r, 0) for r in TRUNCATION_ROLES},
        "error_detail": live.error_detail,
        "extractor_repairs": spent.extractor_repairs,
        "extractor_refusals": spent.extractor_refusals,
        "prompt_versions": json.dumps(spent.prompt_versions, sort_keys=True),
        "user_profile": live.user_profile,
    }
    for role in SIMULATION_ROLES:
        row.update(usage_columns(role, spent.usage.get(role, Usage())))
    role_models = {r: st.model for r, st in ctx.roles.items()} | {"assistant": s.assistant_model}
    row["cost_usd"] = session_cost(spent.usage, role_models, ctx.prices)
    if live.structured and k.trajectory.metrics and not failed:
        row.update(k.trajectory.summary(ctx.rules))
        for mode in FAILURE_MODES:
            row[f"fm_{mode}"] = sum(m.failure_modes[mode] for m in k.trajectory.metrics)
    if live.transcript and live.transcript[-1][0] == "user" and not failed:
        row["final_user_message"] = live.transcript[-1][1]  # a closing message no turn row holds
    return session_row_model()(**row)  # SessionRow, with any outside metric columns (schema.metrics)


def session_rows(live: LiveSession, ctx: ShardContext) -> tuple[SessionRow, list[TurnRow]]:
    """The finished session's row and its turns' rows, each under the run's id (the loop writes
    turn rows under it already; one written under another is copied, not changed in place)."""
    run_id = ctx.run_id
    return session_row(live, ctx), [t if t.run_id == run_id else t.model_copy(update={"run_id": run_id})
                                    for t in live.turn_rows]


__all__ = ["METRIC_COLUMNS", "NO_UPDATE", "UPDATE_COLUMNS", "baseline_turn_row", "session_row", "session_rows",
           "state_turn_row", "turn_row"]
