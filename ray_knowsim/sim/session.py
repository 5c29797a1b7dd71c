"""One conversation inside a shard: its transcript, knowledge state, per-turn record and result rows."""

from __future__ import annotations

import dataclasses
from functools import cached_property
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ray_knowsim.kernels.batch import COUNTER_INDEX
from ray_knowsim.schema.chat import Usage
from ray_knowsim.schema.graph import GraphIndex, IUGraph, build_index, capacity
from ray_knowsim.schema.items import Item
from ray_knowsim.llm.http.credentials import mask_secrets
from ray_knowsim.schema.failures import bounded_detail
from ray_knowsim.schema.results import FAILURE_MODES, SIMULATION_ROLES, TRUNCATION_ROLES, SessionRow, TurnRow, truncation_column, usage_columns
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import RuleConfig
from ray_knowsim.rules.init_state import session_initial_states
from ray_knowsim.rules.prerequisites import density
from ray_knowsim.rules.trajectory import Trajectory
from ray_knowsim.rules.turn_metrics import FAILURE_MODE_VARIANTS, TurnMetrics
from ray_knowsim.rules.update import TurnUpdate, well_explained_ids
from ray_knowsim.sim.cost import session_cost
from ray_knowsim.sim.rows import turn_row
from ray_knowsim.sim.types import SessionSpec, ShardContext
from ray_knowsim.simulators import SIMULATORS, LearnerView, Simulator
from ray_knowsim.strategies import TutorStrategy, get_strategy



def _c(row: np.ndarray, name: str) -> float:
    return float(row[COUNTER_INDEX[name]])


_CASTS = {"int": int, "bool": bool, "float": float, int: int, bool: bool, float: float}


def _from_counters(cls: type, counters: np.ndarray, **given: Any) -> Any:
    """A rules dataclass (TurnUpdate, TurnMetrics) from the kernel's counter row: every scalar
    field named like a counter is read from it (cast to the field's type); the rest is ``given``."""
    values = dict(given)
    for f in dataclasses.fields(cls):
        if f.name not in values and f.name in COUNTER_INDEX:
            values[f.name] = _CASTS[f.type](_c(counters, f.name))
    return cls(**values)


@dataclass
class LiveSession:
    spec: SessionSpec
    item: Item
    graph: IUGraph
    index: GraphIndex
    tau: int
    initial: dict[str, int]
    states: dict[str, int]  # after the last completed turn
    transcript: list[list[str]] = field(default_factory=list)  # [speaker, text]
    explained: set[str] = field(default_factory=set)  # labels ever rated well_explained
    trajectory: Trajectory | None = None
    turn_rows: list[TurnRow] = field(default_factory=list)
    status: str = "live"  # live | done | failed
    stop_reason: str = "max_turns"
    error: str | None = None
    error_detail: str | None = None  # why, in the failing party's words (bounded, secrets masked)
    stop_hint: bool = False
    usage: dict[str, Usage] = field(default_factory=dict)
    calls: int = 0  # answers from a model
    cache_hits: int = 0
    truncations: int = 0
    truncations_by_role: dict[str, int] = field(default_factory=dict)  # role -> answers cut by max_tokens
    extractor_repairs: int = 0
    extractor_refusals: int = 0
    prompt_versions: dict[str, str] = field(default_factory=dict)
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
        return LearnerView(
            item=self.item, graph=self.graph, index=self.index, states=self.states, initial=self.initial,
            transcript=transcript, knowledge_level=self.spec.knowledge_level, explained=sorted(self.explained),
            stop_hint=self.stop_hint, profile=self.user_profile, prompts=prompts, connectable=connectable,
            seed=seed, request_id=request_id,
        )  # fmt: skip

    def fail(self, error: str, detail: str | None = None) -> None:
        """End the session as failed with ``error`` (``<role>_<reason>``) and, when known, the
        failure's own words (an Answer's ``detail``: the server's message, the parser's complaint)."""
        self.status, self.error, self.stop_reason = "failed", error, "error"
        self.error_detail = bounded_detail(mask_secrets(detail)) if detail else None

    def charge(
        self, role: str, usage: Usage, calls: int, prompt_version: str, *, cache_hits: int = 0, truncations: int = 0
    ) -> None:
        self.usage.setdefault(role, Usage()).add(usage)
        self.calls += calls
        self.cache_hits += cache_hits
        self.truncations += truncations
        if truncations:
            self.truncations_by_role[role] = self.truncations_by_role.get(role, 0) + truncations
        if prompt_version:
            name, _, version = prompt_version.partition("@")
            self.prompt_versions[name] = version or prompt_version

    # -- the state side -----------------------------------------------------------------------

    def record_turn(
        self,
        turn: int,
        entries: list[SignalEntry],
        counters: np.ndarray,
        post: dict[str, int],
        carries: dict[str, float],
        *,
        repairs: Sequence[str] = (),
        refusals: Sequence[str] = (),
    ) -> None:
        """Store one kernel step as the rules' TurnUpdate/TurnMetrics twins plus a TurnRow
        (``repairs`` / ``refusals``: the extractor's drift this turn, see :mod:`ray_knowsim.sim.ask`)."""
        update = _from_counters(TurnUpdate, counters, post=post, carries=carries)
        modes = {name: int(_c(counters, name)) for name in FAILURE_MODES + FAILURE_MODE_VARIANTS}
        metrics = _from_counters(TurnMetrics, counters, failure_modes=modes)
        if self.trajectory is None:
            raise RuntimeError(f"{self.spec.session_id}: a state update for a session without a trajectory (a baseline?)")
        self.trajectory.updates.append(update)
        self.trajectory.metrics.append(metrics)
        self.trajectory.entries.append(entries)
        self.states = post
        self.explained.update(self.index.label_of(v) for v in well_explained_ids(self.index, entries))
        user, assistant = self.transcript[-2][1], self.transcript[-1][1]
        self.turn_rows.append(
            turn_row(
                self.spec.session_id, turn, user, assistant, entries=entries, update=update, metrics=metrics,
                states=[post[v] for v in self.index.ids], carries=[carries[v] for v in self.index.ids],
                density=density(self.index, post),
                extractor_repairs=repairs,
                extractor_refusals=refusals,
            )
        )

    def record_baseline_turn(self, turn: int) -> None:
        user, assistant = self.transcript[-2][1], self.transcript[-1][1]
        self.turn_rows.append(
            turn_row(self.spec.session_id, turn, user, assistant, states=[0] * self.index.size, carries=[0.0] * self.index.size)
        )

    # -- result rows --------------------------------------------------------------------------

    def rows(self, ctx: ShardContext) -> tuple[SessionRow, list[TurnRow]]:
        s = self.spec
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
            "graph_size": self.index.size,
            "tau": self.tau,
            "iu_labels": list(self.index.labels),
            "initial_states": [self.initial[v] for v in self.index.ids],
            "graph_json": json.dumps(self.graph.to_json_dict(), ensure_ascii=False),
            "status": "failed" if self.status == "failed" else "ok",
            "turns": self.turns_done,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "llm_calls": self.calls,
            "llm_cache_hits": self.cache_hits,
            "llm_truncations": self.truncations,
            **{truncation_column(r): self.truncations_by_role.get(r, 0) for r in TRUNCATION_ROLES},
            "error_detail": self.error_detail,
            "extractor_repairs": self.extractor_repairs,
            "extractor_refusals": self.extractor_refusals,
            "prompt_versions": json.dumps(self.prompt_versions, sort_keys=True),
            "user_profile": self.user_profile,
        }
        for role in SIMULATION_ROLES:
            row.update(usage_columns(role, self.usage.get(role, Usage())))
        role_models = {r: st.model for r, st in ctx.roles.items()} | {"assistant": s.assistant_model}
        row["cost_usd"] = session_cost(self.usage, role_models, ctx.prices)
        if self.structured and self.trajectory is not None and self.trajectory.metrics and self.status != "failed":
            row.update(self.trajectory.summary(ctx.rules))
            for mode in FAILURE_MODES:
                row[f"fm_{mode}"] = sum(m.failure_modes[mode] for m in self.trajectory.metrics)
        if self.transcript and self.transcript[-1][0] == "user" and self.status != "failed":
            row["final_user_message"] = self.transcript[-1][1]  # a closing message no turn row holds
        turns = [t.model_copy(update={"run_id": ctx.run_id}) for t in self.turn_rows]
        return SessionRow(**row), turns


def start_session(spec: SessionSpec, item: Item, graph: IUGraph, rules: RuleConfig) -> LiveSession:
    """Initial state: the engine's (init cache or sampled), else sampled from the session's init seed
    (both by :func:`ray_knowsim.rules.init_state.session_initial_states`)."""
    index = build_index(graph, item.id)
    initial = session_initial_states(index, spec.knowledge_level, rules, spec.init_seed, spec.initial_ks)
    tau = capacity(index.size, rules.capacity_ratio, rules.capacity_floor)
    simulator = SIMULATORS.get(spec.simulator)
    profile = simulator.make_profile(spec.knowledge_level, spec.seed) if simulator.make_profile else ""
    trajectory = Trajectory(tau=tau, initial=dict(initial))
    live = LiveSession(spec, item, graph, index, tau, initial, states=dict(initial), trajectory=trajectory, user_profile=profile)
    live.simulator = simulator  # resolved once (the cached property's value)
    return live
