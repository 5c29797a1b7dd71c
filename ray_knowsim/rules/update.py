"""The per-turn state update, in plain Python, written to read like spec §6.

This is the executable statement of the rules. The batched numba kernel
(`ray_knowsim.kernels.update`) is its twin and is tested against it; nothing else
re-implements these rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ray_knowsim.schema.graph import GraphIndex, hinge_size
from ray_knowsim.schema.signals import ATTEMPT_ARTICULATION, ATTEMPT_REASONING, TQ_NOT_MENTIONED, TQ_SHALLOW, SignalEntry
from ray_knowsim.schema.states import KNOWS_WELL, UNAWARE
from ray_knowsim.rules.config import RuleConfig
from ray_knowsim.rules.prerequisites import ceiling

INCORRECT_NO_EXPLANATION = "confirmed_incorrect_no_explanation"


@dataclass
class TurnUpdate:
    """What one turn did to one session's state (spec §6)."""

    post: dict[str, int]
    carries: dict[str, float]
    comprehension_load: float
    attempt_load: float
    effective_load: float
    overload: bool  # the recorded flag (L >= tau, or L > tau when overload_flag_strict)
    dropoff_active: bool  # eta < 1
    eta: float
    efficiency: dict[str, float] = field(default_factory=dict)  # per mentioned IU, after the hinge


def _pre(pre: Mapping[str, int], node_id: str | None) -> int:
    """Pre-state of an entry's IU; ids outside the graph (or missing) read as unaware."""
    return pre.get(node_id, UNAWARE) if node_id is not None else UNAWARE


def mentions(entries: Sequence[SignalEntry]) -> list[SignalEntry]:
    """M_t: entries the assistant mentioned (truthy id, teaching_quality != not_mentioned)."""
    return [e for e in entries if e.mentioned]


def last_entries(entries: Sequence[SignalEntry]) -> dict[str, SignalEntry]:
    """``by_id``: the last entry of each id, the one whose signals drive the state (spec §6.1)."""
    by_id: dict[str, SignalEntry] = {}
    for e in entries:
        if e.id is not None:
            by_id[e.id] = e
    return by_id


def well_explained_ids(g: GraphIndex, entries: Sequence[SignalEntry]) -> list[str]:
    """Graph IUs (node order) whose LAST entry this turn is rated ``well_explained`` (spec §7.7):
    what ``explained_concepts`` grows by; an earlier well_explained entry overridden by a later
    one with another label does not count."""
    by_id = last_entries(entries)
    return [v for v in g.ids if v in by_id and by_id[v].teaching_quality == "well_explained"]


def loads(entries: Sequence[SignalEntry], pre: Mapping[str, int], rules: RuleConfig) -> tuple[float, float]:
    """(comprehension, attempt) loads, summed in the reference order so overload ties agree (spec §0)."""
    mentioned = mentions(entries)
    comprehension = 0
    for e in mentioned:
        if _pre(pre, e.id) < KNOWS_WELL:
            comprehension += rules.w_state[_pre(pre, e.id)]
    for e in mentioned:
        if _pre(pre, e.id) == KNOWS_WELL:
            comprehension += rules.w_state[KNOWS_WELL]
    attempt = 0.0
    if rules.include_attempt_load:
        for e in entries:
            if e.attempt_code == ATTEMPT_REASONING:
                attempt += rules.w_reasoning[_pre(pre, e.id)]
            elif e.attempt_code == ATTEMPT_ARTICULATION:
                attempt += rules.w_articulation
    return float(comprehension), attempt


def efficiency(load: float, tau: int, turn: int, max_turns: int, rules: RuleConfig) -> float:
    """eta: sigmoid-like dropoff once the load exceeds capacity (spec §6.4, D4)."""
    eta = 1.0
    if load > tau:
        x = (load - tau) / (tau * rules.dropoff_softening)
        eta = 1 / (1 + x**2)
    if rules.temporal_decay:
        eta *= max_turns / (max_turns + turn - 1)
    return eta


def hinge_efficiency(
    g: GraphIndex, mentioned: Sequence[SignalEntry], pre: Mapping[str, int], eta: float, rules: RuleConfig
) -> dict[str, float]:
    """Per-IU efficiency: the N most demanding mentioned IUs absorb at eta, the rest at tail*eta (D5)."""
    if not rules.hinge:
        return {e.id: eta for e in mentioned}
    ranked = sorted(
        mentioned,
        key=lambda e: (
            -rules.w_state[_pre(pre, e.id)],
            g.depth.get(e.id, 0),
            g.order.get(e.id, 0),
        ),
    )
    top = hinge_size(g.size, rules.hinge_ratio)
    eff: dict[str, float] = {}
    for rank, e in enumerate(ranked):
        eff[e.id] = (1.0 if rank < top else rules.hinge_tail) * eta
    return eff


def propose(prev: int, ceil: int, tq_code: int) -> int:
    """Minimal rules: well explained -> +1 up to the ceiling; shallow only unlocks unaware -> struggling."""
    if tq_code == TQ_NOT_MENTIONED:
        return prev
    if tq_code == TQ_SHALLOW and prev != UNAWARE:
        return prev
    return max(prev, min(prev + 1, ceil))


def apply_turn(
    g: GraphIndex,
    pre: Mapping[str, int],
    carry_in: Mapping[str, float],
    entries: Sequence[SignalEntry],
    tau: int,
    turn: int,
    rules: RuleConfig,
    max_turns: int = 15,
) -> TurnUpdate:
    """Advance one session by one turn.

    ``pre`` and ``carry_in`` are keyed by graph id (missing ids read as unaware / 0.0);
    ``entries`` are the normalised signals of this turn (spec §1.5).
    """
    by_id = last_entries(entries)  # the last entry for an id drives its state
    mentioned = mentions(entries)

    comprehension, attempt = loads(entries, pre, rules)
    load = comprehension + attempt
    overload = load > tau if rules.overload_flag_strict else load >= tau
    eta = efficiency(load, tau, turn, max_turns, rules)
    dropoff_active = eta < 1.0
    eff = hinge_efficiency(g, mentioned, pre, eta, rules)

    cur = {v: pre.get(v, UNAWARE) for v in g.ids}
    carries: dict[str, float] = {}
    for v in g.update_order:
        prev = cur[v]
        entry = by_id.get(v)
        tq = entry.tq_code if entry is not None else TQ_NOT_MENTIONED
        prop = propose(prev, ceiling(g, v, cur), tq)  # cascade: earlier IUs already updated
        c_in = carry_in.get(v, 0.0)
        if dropoff_active and prop > prev:
            total = c_in + (prop - prev) * eff.get(v, eta)
            steps = math.floor(total)
            new = min(prev + steps, KNOWS_WELL)
            carry = total - steps
            if rules.reset_carry_on_transition and steps > 0:
                carry = 0.0
        else:
            new = prop
            if rules.carry_persists and not (rules.reset_carry_on_transition and prop > prev):
                carry = c_in
            else:
                carry = 0.0
        cur[v] = new
        carries[v] = carry

    post: dict[str, int] = {}
    for v in g.ids:
        entry = by_id.get(v)
        p = pre.get(v, UNAWARE)
        demoted = (
            entry is not None
            and entry.attempt_code == ATTEMPT_REASONING
            and entry.assistant_response_role == INCORRECT_NO_EXPLANATION
            and p < KNOWS_WELL
        )
        post[v] = cur[v] if demoted else max(cur[v], p)

    return TurnUpdate(
        post=post,
        carries=carries,
        comprehension_load=comprehension,
        attempt_load=attempt,
        effective_load=load,
        overload=overload,
        dropoff_active=dropoff_active,
        eta=eta,
        efficiency=eff,
    )
