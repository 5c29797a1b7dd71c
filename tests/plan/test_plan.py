"""Deterministic planning: stable ids and seeds (by id, not position), paired initial states,
every session in exactly one shard."""

from __future__ import annotations

from ray_knowsim.config import parse_run_config
from ray_knowsim.plan.sessions import Plan, derive_seed, load_inputs
from ray_knowsim.run.worker import with_initial_states
from ray_knowsim.plan.build import make_context
from tests.doubles.run_config import small_config


def plan_of(**over) -> Plan:
    cfg = parse_run_config(small_config(**over))
    return Plan(cfg, load_inputs(cfg))


def test_ids_seeds_and_order_are_deterministic():
    a, b = plan_of(), plan_of()
    sa, sb = list(a.iter_sessions()), list(b.iter_sessions())
    assert sa == sb and len(sa) == 24 == a.n_sessions
    assert len({s.session_id for s in sa}) == 24 and len({s.seed for s in sa}) == 24
    first = sa[0]
    assert first.session_id == "math/demo_math_01/novice/sim:adaptive/0"
    assert first.seed == derive_seed(42, first.session_id) and 0 <= first.seed < 2**31
    assert plan_of(seed=7).session(0).seed != first.seed


def test_seeds_follow_the_session_not_its_position():
    base = {s.session_id: s for s in plan_of().iter_sessions()}
    more = plan_of(conditions=[{"strategy": "minimal"}, {"strategy": "adaptive"}, {"strategy": "socratic"}], trials=2)
    moved = 0
    for i, s in enumerate(more.iter_sessions()):
        if s.session_id in base:
            assert s.seed == base[s.session_id].seed and s.init_seed == base[s.session_id].init_seed
            moved += list(base).index(s.session_id) != i
    assert moved > 0  # positions changed, seeds did not


def test_conditions_share_the_initial_state_seed():
    p = plan_of(trials=2)
    groups: dict[tuple, set[int]] = {}
    for s in p.iter_sessions():
        groups.setdefault((s.item_id, s.knowledge_level, s.trial), set()).add(s.init_seed)
    assert all(len(v) == 1 for v in groups.values())
    assert len({next(iter(v)) for v in groups.values()}) == len(groups)  # but differ across trials/items


def test_shards_cover_every_session_once_and_subsets_rerun():
    p = plan_of(engine={"shard_size": 5})
    assert p.n_shards == 5
    seen = [s.session_id for k in range(p.n_shards) for s in p.shard(k).sessions]
    assert seen == [s.session_id for s in p.iter_sessions()]
    shard = p.shard(1)
    assert shard.shard_id == "shard-000001" and set(shard.items) == {s.item_key for s in shard.sessions} == set(shard.graphs)
    only = {shard.sessions[0].session_id, shard.sessions[3].session_id}
    assert [s.session_id for s in p.shard(1, only).sessions] == [shard.sessions[0].session_id, shard.sessions[3].session_id]
    assert p.shard_session_ids(1) == [s.session_id for s in shard.sessions]


def test_initial_states_come_from_the_cache_or_a_paired_sample(tmp_path):
    import json

    cache = {"competition_math": {"demo_math_01": {"novice": {"X1: a": {"state": "knows_well"}}}}}
    path = tmp_path / "init.json"
    path.write_text(json.dumps(cache))
    cfg = parse_run_config(small_config(init_cache=str(path)))
    p = Plan(cfg, load_inputs(cfg))
    s0 = p.session(0)
    assert s0.initial_ks == {"X1: a": {"state": "knows_well"}}
    shard = with_initial_states(p.shard(0), make_context(cfg, "r", "h"))
    assert shard.sessions[0].initial_ks == s0.initial_ks
    sampled = [s for s in with_initial_states(p.shard(1), make_context(cfg, "r", "h")).sessions]
    assert all(s.initial_ks for s in sampled)
    by_cell: dict[tuple, list] = {}
    for s in sampled:
        by_cell.setdefault((s.item_id, s.knowledge_level, s.trial), []).append(s.initial_ks)
    assert all(all(ks == v[0] for ks in v) for v in by_cell.values())  # conditions paired
