"""Random sessions for the kernel-equivalence tests, and the counters the plain-Python rules give.

Graphs of 1-24 IUs in the awkward shape (tests/doubles/graphs.py: cyclic ones, self-loops,
duplicated edges, shuffled node order, prerequisite ids outside the graph); random states and
carries; 1-5 turns of signal lists with duplicated, unknown, empty and missing ids and every tq /
attempt / role value; the reference preset, the paper preset and random valid RuleConfigs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ray_knowsim.kernels.update import COUNTERS
from ray_knowsim.rules.config import RuleConfig, paper_rules, reference_rules, rules_from
from ray_knowsim.rules.turn_metrics import TurnMetrics
from ray_knowsim.rules.update import TurnUpdate
from ray_knowsim.schema.graph import GraphIndex, build_index
from ray_knowsim.schema.signals import SignalEntry
from tests.doubles.graphs import random_graph

TQS = ("well_explained", "shallow", "not_mentioned", "excellent")
ATTEMPTS = ("none", "reasoning", "articulation")
ROLES = (
    "confirmed_correct",
    "confirmed_incorrect_no_explanation",
    "confirmed_incorrect_with_explanation",
    "ignored",
    "not_applicable",
    "something_else",
)
WEIGHTS = (0.0, 0.05, 0.1, 0.3, 0.35, 0.7, 1.0, 1.4, 1.75, 2.0)  # multiples of 0.05: exact load/tau ties happen


@dataclass
class Session:
    g: GraphIndex
    rules: RuleConfig
    initial: dict[str, int]
    carries: dict[str, float]
    signals: list[list[SignalEntry]]
    max_turns: int


def random_index(rng: random.Random, n: int) -> GraphIndex:
    """An awkward random graph of ``n`` IUs (tests/doubles/graphs.py), indexed."""
    return build_index(random_graph(rng, n, awkward=True))


def random_rules(rng: random.Random) -> RuleConfig:
    kind = rng.random()
    if kind < 0.3:
        return reference_rules()
    if kind < 0.55:
        return paper_rules()
    return rules_from(
        rng.choice(("reference", "paper")),
        w_state=tuple(rng.choice(WEIGHTS) for _ in range(4)),
        w_reasoning=tuple(rng.choice(WEIGHTS) if rng.random() < 0.8 else rng.uniform(0, 3) for _ in range(4)),
        w_articulation=rng.choice(WEIGHTS),
        include_attempt_load=rng.random() < 0.8,
        capacity_ratio=rng.choice((0.55, 0.3, 0.2, rng.uniform(0.05, 1.2))),
        capacity_floor=rng.randint(1, 5),
        overload_flag_strict=rng.random() < 0.5,
        dropoff_softening=rng.choice((1.3, 1.0, rng.uniform(0.1, 3.0))),
        hinge=rng.random() < 0.6,
        hinge_ratio=rng.choice((0.143, 0.0, rng.uniform(0, 0.6))),
        hinge_tail=rng.choice((0.5, 0.0, 1.0, rng.random())),
        reset_carry_on_transition=rng.random() < 0.5,
        carry_persists=rng.random() < 0.5,
        temporal_decay=rng.random() < 0.3,
    )


def random_entry(rng: random.Random, ids: list[str]) -> SignalEntry:
    r = rng.random()
    if r < 0.78:
        node_id = rng.choice(ids)
    elif r < 0.88:
        node_id = rng.choice(("X1", "Z9", "IU99"))  # not in the graph
    elif r < 0.92:
        node_id = ""  # an empty id that is not None: counts as a mention outside the graph
    else:
        node_id = None
    return SignalEntry(
        id=node_id,
        teaching_quality=rng.choices(TQS, weights=(3, 3, 4, 1))[0],
        user_attempt_type=rng.choices(ATTEMPTS, weights=(5, 3, 2))[0],
        assistant_response_role=rng.choices(ROLES, weights=(4, 3, 1, 1, 2, 1))[0],
    )


def random_signals(rng: random.Random, ids: list[str]) -> list[SignalEntry]:
    if rng.random() < 0.4:  # realistic: one entry per IU in node order
        entries = [random_entry(rng, [v]) if rng.random() < 0.95 else random_entry(rng, ids) for v in ids]
    else:
        entries = [random_entry(rng, ids) for _ in range(rng.randint(0, len(ids) + 6))]
    return entries


def random_session(rng: random.Random, n: int | None = None, g: GraphIndex | None = None) -> Session:
    g = g or random_index(rng, n or rng.randint(1, 24))
    ids = list(g.ids)
    skew = rng.random()
    weights = (1 + 3 * skew, 2, 2, 1 + 3 * (1 - skew))
    initial = {v: rng.choices((0, 1, 2, 3), weights=weights)[0] for v in ids if rng.random() < 0.9}  # some ids missing
    carries = {}
    for v in ids:
        r = rng.random()
        if r < 0.5:
            carries[v] = rng.random()
        elif r < 0.6:
            carries[v] = rng.choice((0.5, 0.25, 0.9999999999, 1.0 - 2**-53))
        elif r < 0.65:
            carries[v] = rng.uniform(1.0, 2.0)  # outside the usual [0, 1): steps > 1
        elif r < 0.68:
            carries[v] = rng.uniform(2.0, 3.0)  # unaware -> knows_well in one turn (novelty's attempt clause)
        elif r < 0.73:
            carries[v] = rng.uniform(-1.5, 0.0)  # negative: cur < pre, so the monotonicity pass matters
    turns = [random_signals(rng, ids) for _ in range(rng.randint(1, 5))]
    return Session(g, random_rules(rng), initial, carries, turns, rng.randint(1, 20))


def random_batch(seed: int, n_sessions: int, max_size: int = 24) -> list[Session]:
    rng = random.Random(seed)
    sessions: list[Session] = []
    for _ in range(n_sessions):
        if sessions and rng.random() < 0.2:  # share a graph object with an earlier session
            sessions.append(random_session(rng, g=rng.choice(sessions).g))
        else:
            sessions.append(random_session(rng, rng.randint(1, max_size)))
    return sessions


def expected_row(u: TurnUpdate, m: TurnMetrics) -> dict[str, float]:
    row: dict[str, float] = {
        "comprehension_load": u.comprehension_load,
        "attempt_load": u.attempt_load,
        "effective_load": u.effective_load,
        "overload": float(u.overload),
        "dropoff_active": float(u.dropoff_active),
        "eta": u.eta,
        "n_upward_transitions": m.n_upward_transitions,
        "absorbed_gain": m.absorbed_gain,
        "ic_numerator": m.ic_numerator,
        "ic_denominator": m.ic_denominator,
        "zpd_size": m.zpd_size,
        "absorbed_ic_numerator": m.absorbed_ic_numerator,
        "absorbed_ic_numerator_any_partial": m.absorbed_ic_numerator_any_partial,
        "new_ius": m.new_ius,
        "disallowed": m.disallowed,
        "familiarity": m.familiarity,
        "novelty": m.novelty,
        "engagement": m.engagement,
        "perceived_overload": m.perceived_overload,
        "capacity_load": m.capacity_load,
        **m.failure_modes,
        "n_knows_well": sum(1 for s in u.post.values() if s == 3),
    }
    assert tuple(row) == COUNTERS
    return row


def diff(got: dict, want: dict) -> dict:
    """Keys whose values differ (exact comparison; floats by value, so 0.0 == -0.0)."""
    return {k: (got.get(k), want.get(k)) for k in want.keys() | got.keys() if got.get(k) != want.get(k)}
