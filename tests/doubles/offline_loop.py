"""A minimal KnowSim turn loop over the offline model, for tests of the LLM layer.

Not the simulation engine (that is ``ray_knowsim.sim``): one session, one request at a time, but
through the real path of every turn: render -> model -> parse -> ``rules.update.apply_turn``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.llm.parse import parse_signal_report, parse_user_turn
from ray_knowsim.schema.graph import IUGraph, build_index, capacity
from ray_knowsim.schema.items import Item
from ray_knowsim.schema.states import KNOWS_WELL
from ray_knowsim.prompts.render import render_assistant, render_extractor, render_user_sim
from ray_knowsim.rules.config import reference_rules
from ray_knowsim.rules.init_state import sample_initial_states
from ray_knowsim.rules.update import apply_turn
from ray_knowsim.strategies import get_strategy


@dataclass
class SessionStats:
    tau: int
    loads: list[float] = field(default_factory=list)
    overloaded: list[bool] = field(default_factory=list)
    mention_pre_states: list[int] = field(default_factory=list)  # pre-state of every mention entry
    upward: int = 0
    transcript: list[tuple[str, str]] = field(default_factory=list)
    final: dict[str, int] = field(default_factory=dict)
    initial: dict[str, int] = field(default_factory=dict)

    @property
    def mean_load_ratio(self) -> float:
        return sum(self.loads) / (len(self.loads) * self.tau)

    @property
    def n_overloaded(self) -> int:
        return sum(self.overloaded)

    @property
    def redundant_share(self) -> float:
        m = self.mention_pre_states
        return sum(1 for s in m if s == KNOWS_WELL) / len(m) if m else 0.0


def run_session(
    model: OfflineModel, item: Item, graph: IUGraph, level: str, strategy: str, turns: int = 8, init_seed: int = 7
) -> SessionStats:
    rules = reference_rules()
    index = build_index(graph, item.id)
    states = sample_initial_states(index, level, rules, random.Random(init_seed))
    carries: dict[str, float] = {}
    stats = SessionStats(tau=capacity(index.size, rules.capacity_ratio, rules.capacity_floor), initial=dict(states))
    explained: set[str] = set()
    for t in range(1, turns + 1):
        req = render_user_sim(item, graph, states, stats.transcript, explained=explained, index=index)
        user = parse_user_turn(model.respond(req).text)
        assert user.ok, (user.error, user.detail)
        stats.transcript.append(("user", user.value.message))
        reply = model.respond(render_assistant(item, get_strategy(strategy), stats.transcript)).text
        stats.transcript.append(("assistant", reply))
        ext_req = render_extractor(item, graph, states, stats.transcript[:-2], user.value.message, reply, index=index)
        report = parse_signal_report(model.respond(ext_req).text, index)
        assert report.ok, (report.error, report.detail)
        entries = report.value.entries
        upd = apply_turn(index, states, carries, entries, stats.tau, t, rules, max_turns=turns)
        stats.loads.append(upd.effective_load)
        stats.overloaded.append(upd.overload)
        stats.mention_pre_states.extend(states.get(e.id, 0) for e in entries if e.mentioned)
        stats.upward += sum(1 for v in index.ids if upd.post[v] > states[v])
        explained |= {index.label_of(e.id) for e in entries if e.id in index.order and e.teaching_quality == "well_explained"}
        states, carries = upd.post, upd.carries
    stats.final = dict(states)
    return stats
