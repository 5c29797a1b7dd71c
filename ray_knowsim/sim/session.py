"""One conversation inside a shard: what it is about, its transcript and how it ended, with its
learner's knowledge (:mod:`ray_knowsim.sim.knowledge`), what it spent (:mod:`ray_knowsim.sim.ledger`)
and the rows of its finished turns (built by :mod:`ray_knowsim.sim.rows`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Sequence

from ray_knowsim.schema.graph import GraphIndex, IUGraph, build_index, capacity
from ray_knowsim.schema.items import Item
from ray_knowsim.llm.http.credentials import mask_secrets
from ray_knowsim.schema.failures import bounded_detail
from ray_knowsim.schema.results import TurnRow
from ray_knowsim.rules.config import RuleConfig
from ray_knowsim.rules.init_state import session_initial_states
from ray_knowsim.rules.trajectory import Trajectory
from ray_knowsim.sim.knowledge import KnowledgeState
from ray_knowsim.sim.ledger import SessionLedger
from ray_knowsim.sim.types import SessionSpec
from ray_knowsim.simulators import SIMULATORS, LearnerView, Simulator
from ray_knowsim.strategies import TutorStrategy, get_strategy


@dataclass
class LiveSession:
    spec: SessionSpec
    item: Item
    graph: IUGraph
    index: GraphIndex
    knowledge: KnowledgeState
    ledger: SessionLedger = field(default_factory=SessionLedger)
    transcript: list[list[str]] = field(default_factory=list)  # [speaker, text]
    turn_rows: list[TurnRow] = field(default_factory=list)  # one per finished turn
    status: str = "live"  # live | done | failed
    stop_reason: str = "max_turns"
    error: str | None = None
    error_detail: str | None = None  # why, in the failing party's words (bounded, secrets masked)
    stop_hint: bool = False
    user_profile: str = ""  # the learner profile the simulator drew at start ("" if it has none)

    @cached_property
    def simulator(self) -> Simulator:  # looked up once per session, not every turn
        return SIMULATORS.get(self.spec.simulator)

    @cached_property
    def strategy(self) -> TutorStrategy:
        return get_strategy(self.spec.assistant_strategy)

    @property
    def structured(self) -> bool:
        return self.simulator.structured

    @property
    def live(self) -> bool:
        return self.status == "live"

    @property
    def turns_done(self) -> int:
        return sum(1 for speaker, _ in self.transcript if speaker == "assistant")

    def learner_view(self, transcript: Sequence[Sequence[str]], *, prompts: str, connectable: str,
                     seed: int | None = None, request_id: str = "") -> LearnerView:
        """What this session's simulator reads to write the learner's next message after ``transcript``."""
        k = self.knowledge
        return LearnerView(
            item=self.item, graph=self.graph, index=self.index, states=k.states, initial=k.initial,
            transcript=transcript, knowledge_level=self.spec.knowledge_level, explained=sorted(k.explained),
            stop_hint=self.stop_hint, profile=self.user_profile, prompts=prompts, connectable=connectable,
            seed=seed, request_id=request_id,
        )  # fmt: skip

    def finish(self, stop_reason: str) -> None:
        """End the session as done, for ``stop_reason`` (``max_turns``, ``user_terminated``, a rules' stop)."""
        self.status, self.stop_reason = "done", stop_reason

    def fail(self, error: str, detail: str | None = None) -> None:
        """End the session as failed with ``error`` (``<role>_<reason>``) and, when known, the
        failure's own words (an Answer's ``detail``: the server's message, the parser's complaint)."""
        self.status, self.error, self.stop_reason = "failed", error, "error"
        self.error_detail = bounded_detail(mask_secrets(detail)) if detail else None


def start_session(spec: SessionSpec, item: Item, graph: IUGraph, rules: RuleConfig,
                  index: GraphIndex | None = None) -> LiveSession:
    """Initial state: the engine's (init cache or sampled), else sampled from the session's init seed
    (both by :func:`ray_knowsim.rules.init_state.session_initial_states`). ``index``: the graph's
    index (``build_index(graph, item.id)``), shared by the sessions of an item (:func:`shared_indexes`)."""
    if index is None:
        index = build_index(graph, item.id)
    initial = session_initial_states(index, spec.knowledge_level, rules, spec.init_seed, spec.initial_ks)
    tau = capacity(index.size, rules.capacity_ratio, rules.capacity_floor)
    simulator = SIMULATORS.get(spec.simulator)
    profile = simulator.make_profile(spec.knowledge_level, spec.seed) if simulator.make_profile else ""
    knowledge = KnowledgeState(tau, initial, states=dict(initial), trajectory=Trajectory(tau=tau, initial=dict(initial)))
    live = LiveSession(spec, item, graph, index, knowledge, user_profile=profile)
    live.simulator = simulator  # resolved once (the cached property's value)
    return live


def shared_indexes() -> Callable[[Item, IUGraph], GraphIndex]:
    """``index_of(item, graph)``: one :class:`GraphIndex` per item and graph object, shared by every
    session of that item. An index is frozen and only read, so sharing it changes no result; what
    it saves is everything made once per index object: the index itself, the prompts' per-graph
    lines and names (:func:`ray_knowsim.prompts.views._of_graph`), and the kernel's packed graphs
    (a batch packs each distinct index once, not once per session)."""
    made: dict[tuple[str, int], tuple[IUGraph, GraphIndex]] = {}  # the graph is kept: its id stays its own

    def index_of(item: Item, graph: IUGraph) -> GraphIndex:
        key = (item.id, id(graph))
        if key not in made:
            made[key] = (graph, build_index(graph, item.id))
        return made[key][1]

    return index_of


__all__ = ["LiveSession", "shared_indexes", "start_session"]
