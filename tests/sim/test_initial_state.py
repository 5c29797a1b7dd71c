"""A session's initial state is decided in one place (``rules.init_state.session_initial_states``):
the worker filling a shard's states before the loop and the loop's own session start (a session
with no cached state) give the same state for the same init seed, under both placements."""

from __future__ import annotations

import dataclasses

import pytest

from ray_knowsim.plan.build import make_context
from ray_knowsim.config import parse_run_config
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.run.worker import with_initial_states
from ray_knowsim.rules.init_state import session_initial_states, states_to_ks
from ray_knowsim.schema.graph import build_index
from ray_knowsim.sim.session import start_session
from tests.doubles.run_config import small_config


@pytest.mark.parametrize("preset", ["reference", "paper"])  # shuffle and topological placement
def test_the_worker_and_the_loop_start_a_session_from_the_same_state(preset):
    cfg = parse_run_config(small_config(rules={"preset": preset}, trials=2))
    plan = Plan(cfg, load_inputs(cfg))
    ctx = make_context(cfg, "r", "h")
    checked, distinct = 0, set()
    for k in range(plan.n_shards):
        shard = plan.shard(k)
        filled = with_initial_states(shard, ctx)  # the worker's path
        for raw, done in zip(shard.sessions, filled.sessions):
            item, graph = shard.item_of(raw), shard.graph_of(raw)
            assert raw.initial_ks is None and done.initial_ks is not None
            by_loop = start_session(raw, item, graph, ctx.rules).knowledge.initial  # the loop samples it itself
            by_worker = start_session(done, item, graph, ctx.rules).knowledge.initial  # the loop reads the worker's
            index = build_index(graph, item.id)
            canonical = session_initial_states(index, raw.knowledge_level, ctx.rules, raw.init_seed)
            assert by_loop == by_worker == canonical, raw.session_id
            assert done.initial_ks == states_to_ks(index, canonical)
            checked += 1
            distinct.add(tuple(sorted(canonical.items())))
    assert checked == 48 and len(distinct) > 3  # not vacuous: many sessions, states that differ


def test_another_init_seed_can_give_another_state_and_a_cached_state_wins():
    cfg = parse_run_config(small_config())
    plan = Plan(cfg, load_inputs(cfg))
    shard = plan.shard(0)
    s = next(x for x in shard.sessions if x.knowledge_level == "intermediate")
    item, graph = shard.item_of(s), shard.graph_of(s)
    index = build_index(graph, item.id)
    rules = make_context(cfg, "r", "h").rules
    states = {tuple(sorted(session_initial_states(index, s.knowledge_level, rules, seed).items())) for seed in range(20)}
    assert len(states) > 1  # the seed decides the state
    cached = {v: 0 for v in index.ids}
    spec = dataclasses.replace(s, initial_ks=states_to_ks(index, cached))
    assert start_session(spec, item, graph, rules).knowledge.initial == cached
    assert session_initial_states(index, s.knowledge_level, rules, s.init_seed, spec.initial_ks) == cached
