"""Per-turn counters (spec §7) and the failure-mode classification (spec §10).

All are measured against the pre-turn snapshot unless stated; this is the single
implementation the replay, the simulation loop and the kernel tests rely on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.results import FAILURE_MODES
from ray_knowsim.schema.signals import ATTEMPT_REASONING, SignalEntry
from ray_knowsim.schema.states import KNOWS_WELL, PARTIAL, STRUGGLING, UNAWARE
from ray_knowsim.rules.prerequisites import ceiling, ceiling_any_partial, in_zpd
from ray_knowsim.rules.update import TurnUpdate, mentions

#: extra counters so the variants spec §10 leaves open can be derived
FAILURE_MODE_VARIANTS: tuple[str, ...] = (
    "blocked_but_moved",  # prereq_blocked IUs that still moved (unaware -> struggling)
    "wasted_flag_only",  # under_absorbed IUs in a turn flagged overloaded at L == tau exactly
    "capped_in_zpd",  # under_absorbed IUs sitting at their ceiling (pre == ceiling)
)


@dataclass
class TurnMetrics:
    ic_numerator: int
    ic_denominator: int
    zpd_size: int
    absorbed_ic_numerator: int  # |A_t|, exact, weakest-prerequisite ceiling (the paper's DC numerator)
    absorbed_ic_numerator_any_partial: int  # reference-format count: A_t mention entries, any-partial ceiling (§7.4, D16)
    n_upward_transitions: int
    absorbed_gain: float
    new_ius: int
    disallowed: int
    familiarity: float
    novelty: float
    engagement: float
    perceived_overload: float  # excess share max(0, L - tau) / L
    capacity_load: float  # min(1, L / tau): the paper's CO per turn
    failure_modes: dict[str, int] = field(default_factory=dict)

    @property
    def information_calibration(self) -> float:
        return self.ic_numerator / self.ic_denominator if self.ic_denominator else 0.0


def turn_metrics(
    g: GraphIndex,
    pre: Mapping[str, int],
    entries: Sequence[SignalEntry],
    update: TurnUpdate,
    tau: int,
) -> TurnMetrics:
    post = update.post
    mentioned = mentions(entries)
    by_id = {e.id: e for e in entries if e.id is not None}

    def pre_of(v: str) -> int:
        return pre.get(v, UNAWARE)

    def teachable(v: str) -> bool:
        # ids outside the graph behave like an unaware IU without prerequisites
        return in_zpd(g, v, pre) if v in g.order else True

    explained = {e.id for e in mentioned if e.id in g.order}  # E_t as a set of graph IUs
    upward = [v for v in g.ids if v in explained and post[v] > pre_of(v)]
    absorbed = [v for v in upward if teachable(v)]
    # the reference-format count (spec §7.4): mention ENTRIES (an IU mentioned twice counts twice)
    # of upward IUs, with the any-partial ceiling; ids outside the graph never move
    moved = set(upward)
    absorbed_any = [
        e for e in mentioned if e.id in moved and pre_of(e.id) < KNOWS_WELL and ceiling_any_partial(g, e.id, pre) >= PARTIAL
    ]

    ic_num = sum(1 for e in mentioned if pre_of(e.id) < KNOWS_WELL and teachable(e.id))
    new_entries = [e for e in mentioned if pre_of(e.id) <= STRUGGLING]
    disallowed = sum(1 for e in new_entries if e.id in g.order and not teachable(e.id))

    n = len(mentioned)
    if n:
        familiarity = sum(1 for e in mentioned if e.id in g.order and pre_of(e.id) >= PARTIAL) / n
        novel = [
            v
            for v in g.ids
            if v in explained
            and pre_of(v) == UNAWARE
            and (
                post[v] in (STRUGGLING, PARTIAL)
                or (post[v] == KNOWS_WELL and by_id[v].attempt_code == ATTEMPT_REASONING)
            )
        ]
        novelty = len(novel) / n
    else:
        familiarity = novelty = 0.0

    load = update.effective_load
    return TurnMetrics(
        ic_numerator=ic_num,
        ic_denominator=n,
        zpd_size=sum(1 for v in g.ids if in_zpd(g, v, pre)),
        absorbed_ic_numerator=len(absorbed),
        absorbed_ic_numerator_any_partial=len(absorbed_any),
        n_upward_transitions=len(upward),
        absorbed_gain=float(sum(post[v] - pre_of(v) for v in upward)),
        new_ius=len(new_entries),
        disallowed=disallowed,
        familiarity=familiarity,
        novelty=novelty,
        engagement=familiarity * novelty,
        perceived_overload=max(0.0, load - tau) / load if load else 0.0,
        capacity_load=min(1.0, load / tau) if load else 0.0,
        failure_modes=failure_modes(g, pre, post, explained, update, tau),
    )


def failure_modes(
    g: GraphIndex,
    pre: Mapping[str, int],
    post: Mapping[str, int],
    explained: set[str],
    update: TurnUpdate,
    tau: int,
) -> dict[str, int]:
    """Classify every explained IU (first match wins): redundant, prereq_blocked, effective,
    overload_wasted (dropoff active, no transition), under_absorbed."""
    counts = dict.fromkeys(FAILURE_MODES + FAILURE_MODE_VARIANTS, 0)
    for v in explained:
        p = pre.get(v, UNAWARE)
        moved = post[v] > p
        if p == KNOWS_WELL:
            counts["redundant"] += 1
        elif not in_zpd(g, v, pre):
            counts["prereq_blocked"] += 1
            counts["blocked_but_moved"] += int(moved)
        elif moved:
            counts["effective"] += 1
        elif update.effective_load > tau:
            counts["overload_wasted"] += 1
        else:
            counts["under_absorbed"] += 1
            counts["wasted_flag_only"] += int(update.overload)
            counts["capped_in_zpd"] += int(p == ceiling(g, v, pre))
    return counts
