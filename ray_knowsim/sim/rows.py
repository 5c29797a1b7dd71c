"""The one place a :class:`TurnRow` is built: from the rules' per-turn update and metrics."""

from __future__ import annotations

import json
from typing import Sequence

from ray_knowsim.schema.results import FAILURE_MODES, TurnRow
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.turn_metrics import TurnMetrics
from ray_knowsim.rules.update import TurnUpdate

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
        signals_json=json.dumps([e.model_dump(mode="json") for e in entries], ensure_ascii=False),
        states=list(states), carries=list(carries), density=density,
        extractor_repairs=json.dumps(list(extractor_repairs), ensure_ascii=False),
        extractor_refusals=json.dumps(list(extractor_refusals), ensure_ascii=False), **fields,
    )  # fmt: skip


__all__ = ["METRIC_COLUMNS", "NO_UPDATE", "UPDATE_COLUMNS", "turn_row"]
