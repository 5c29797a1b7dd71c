"""The adaptive layer's pure parts and its hook into the runner (no Ray): the seeded item order,
the round cells, the adaptive config, and the resume rule (run/resume.plan_work) with a
session subset."""

from __future__ import annotations

import pytest

from ray_knowsim.adaptive.schedule import item_order, round_items
from ray_knowsim.config import ConfigError, parse_run_config
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.run.resume import Attempt, ResumePolicy, plan_work
from ray_knowsim.io.commits import SessionEntry
from tests.doubles.run_config import small_config

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


def test_plan_work_runs_only_the_wanted_sessions_and_adds_to_committed_shards():
    cfg = parse_run_config(small_config())
    plan = Plan(cfg, load_inputs(cfg))  # 24 sessions in 6 shards of 4
    ids0, ids3 = plan.shard_session_ids(0), plan.shard_session_ids(3)
    policy = ResumePolicy()
    wanted = {ids0[0], ids0[2], ids3[1]}
    work = plan_work(plan, {}, policy, wanted)
    assert {k: set(s) for k, s in work.shards.items()} == {0: {ids0[0], ids0[2]}, 3: {ids3[1]}}
    assert work.new == 3 and work.skipped_shards == 4  # the others are neither run nor counted
    # shard 0 committed with a subset (one ok, one infra failure); a later round adds a session
    done = {ids0[0]: SessionEntry(status="ok"),
            ids0[2]: SessionEntry(status="failed", error="assistant_http_503", failure_class="infra")}
    work = plan_work(plan, done, policy, wanted | {ids0[1]})
    assert work.shards[0] == {ids0[1]: Attempt(1), ids0[2]: Attempt(2, ("assistant_http_503",))}
    assert work.ok == 1 and work.new == 2 and work.rerun["infra"] == 1
    # nothing new asked for: the shard is skipped; the full design (no subset) completes it
    done[ids0[2]] = SessionEntry(status="ok", attempt=2)
    work = plan_work(plan, done, policy, {ids0[0], ids0[2]})
    assert work.shards == {} and work.ok == 2 and work.skipped_shards == 6
    work = plan_work(plan, done, policy)
    assert set(work.shards[0]) == {ids0[1], ids0[3]} and len(work.shards) == 6 and work.new == 22
