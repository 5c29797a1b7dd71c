"""A small hand-built shard over the demo items, served by the offline model."""

from __future__ import annotations

import asyncio
import hashlib

from ray_knowsim.demo import demo_graphs, demo_items
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.rules.config import reference_rules
from ray_knowsim.sim.shard import run_shard
from ray_knowsim.sim.types import RoleModels, RoleSettings, SessionSpec, ShardContext, ShardSpec, item_key

ROLE_TEMPERATURES = {"user_sim": 0.7, "assistant": 0.0, "extractor": 0.0, "judge": 0.0}


def session(item, level, strategy, simulator="structured", trial=0):
    sid = f"{item.task}/{item.id}/{level}/off:{strategy if simulator == 'structured' else simulator}/{trial}"
    seed = int(hashlib.sha256(sid.encode()).hexdigest()[:8], 16)
    return SessionSpec(
        session_id=sid, task=item.task, item_id=item.id, knowledge_level=level,
        condition=sid.split("/")[3], assistant_model="off", assistant_strategy=strategy,
        simulator=simulator, trial=trial, seed=seed, init_seed=seed // 7,
    )  # fmt: skip


def shard_of(specs):
    items = {item_key(i.task, i.id): i for i in demo_items()}
    graphs = {item_key(t, k): g for t in ("math", "expertqa") for k, g in demo_graphs(t).items()}
    return ShardSpec("shard-test", 0, tuple(specs), items, graphs)


def context(max_turns=3, early_stop="virtual", attempts=3, rules=None):
    roles = {r: RoleSettings(model="offline", temperature=t, max_tokens=2000, attempts=attempts) for r, t in ROLE_TEMPERATURES.items()}
    return ShardContext(
        run_id="run-test", config_hash="cfg", rules=rules or reference_rules(),
        max_turns=max_turns, early_stop=early_stop, roles=roles,
    )  # fmt: skip


def offline_models(model=None):
    m = model or OfflineModel()
    return RoleModels(user_sim=m, extractor=m, assistants={"off": m})


def run(shard, models, ctx):
    """Every result of the shard, in the plan's order (run_shard yields them as sessions finish)."""
    async def collect():
        return [r async for r in run_shard(shard, models, ctx)]

    results = asyncio.run(collect())
    order = {s.session_id: k for k, s in enumerate(shard.sessions)}
    assert sorted(order[r.session.session_id] for r in results) == list(range(len(order))), "each session exactly once"
    return sorted(results, key=lambda r: order[r.session.session_id])
