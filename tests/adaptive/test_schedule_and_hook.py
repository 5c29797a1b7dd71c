"""The adaptive layer's pure parts and its hook into the runner (no Ray): the seeded item order,
the round cells, the adaptive config, and pending_work with a session subset."""

from __future__ import annotations

import pytest

from ray_knowsim.adaptive.schedule import item_order, round_items
from ray_knowsim.engine.config import ConfigError, parse_run_config
from ray_knowsim.engine.plan import Plan, load_inputs
from ray_knowsim.engine.results import Marker
from ray_knowsim.engine.runner import pending_work
from tests.engine.conftest import small_config

ADAPTIVE = {"decide": "best", "metrics": ["kg", "dc", "co"], "alpha": 0.05, "round": {"items": 5, "trials": 1},
            "budget": {"sessions": 2000, "usd": 50}}


def test_item_order_is_seeded_and_independent_of_file_order():
    a = item_order({"math": ["i1", "i2", "i3", "i4", "i5"]}, seed=42)
    b = item_order({"math": ["i5", "i3", "i1", "i2", "i4"]}, seed=42)
    assert a == b and sorted(a["math"]) == ["i1", "i2", "i3", "i4", "i5"]
    assert item_order({"math": ["i1", "i2", "i3", "i4", "i5"]}, seed=7) != a
    # adding an item keeps the others' relative order
    c = item_order({"math": ["i1", "i2", "i3", "i4", "i5", "i6"]}, seed=42)
    assert [i for i in c["math"] if i != "i6"] == a["math"]
    assert round_items(a, 2, 1) == {"math": a["math"][:2]} and round_items(a, 2, 3) == {"math": a["math"][4:]}
    assert round_items(a, 2, 4) == {"math": []}


def test_adaptive_section_validates_and_stays_out_of_the_hash():
    plain = parse_run_config(small_config())
    cfg = parse_run_config(small_config(adaptive=ADAPTIVE, trials=2))
    assert cfg.adaptive.round.items == 5 and cfg.adaptive.budget.usd == 50.0
    assert cfg.config_hash() == parse_run_config(small_config(trials=2)).config_hash() != plain.config_hash()
    for bad, why in (({"metrics": ["kgg"]}, "unknown"), ({"decide": "pairs"}, "effect"),
                     ({"round": {"items": 0}}, "items"), ({"round": {"trials": 3}}, "round.trials")):
        with pytest.raises(ConfigError, match=why):
            parse_run_config(small_config(adaptive={**ADAPTIVE, **bad}, trials=2))


def test_pending_work_runs_only_the_wanted_sessions_and_adds_to_committed_shards():
    cfg = parse_run_config(small_config())
    plan = Plan(cfg, load_inputs(cfg))  # 24 sessions in 6 shards of 4
    ids0 = plan.shard_session_ids(0)
    wanted = {ids0[0], ids0[2], plan.shard_session_ids(3)[1]}
    todo, ok, skipped = pending_work(plan, {}, wanted)
    assert [(k, only) for k, only, _ in todo] == [(0, {ids0[0], ids0[2]}), (3, {plan.shard_session_ids(3)[1]})]
    # shard 0 committed with a subset; a later round adds a session, a failed one is rerun
    marker = Marker("shard-000000", "h", "tok", [ids0[0], ids0[2]], failed={ids0[2]: "x"})
    todo, ok, skipped = pending_work(plan, {"shard-000000": marker}, wanted | {ids0[1]})
    k, only, prev = todo[0]
    assert k == 0 and only == {ids0[1], ids0[2]} and prev.session_ids == ids0[:3] and prev.token == "tok"
    # nothing new: skipped; the full design (no subset) completes the shard
    todo, _, skipped = pending_work(plan, {"shard-000000": Marker("shard-000000", "h", "tok", ids0[:3])}, {ids0[0]})
    assert skipped == 1 and all(k != 0 for k, _, _ in todo)
    todo, _, _ = pending_work(plan, {"shard-000000": Marker("shard-000000", "h", "tok", ids0[:3])})
    assert todo[0][0] == 0 and todo[0][1] == {ids0[3]} and todo[0][2].session_ids == ids0
    assert len(todo) == 6
