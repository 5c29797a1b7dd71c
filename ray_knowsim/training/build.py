"""The environment's parts from a benchmark run config, built by the run's own builders.

The learner simulator's and the extractor's models come from :func:`ray_knowsim.backends.model_set.build_models`
(an HTTP endpoint gets its shared limiter, a vLLM model its pool of engine actors with
session-affine routing: Ray must be up for those), the rules, role settings and prompt set from
:func:`ray_knowsim.plan.build.make_context`, the items and graphs from the run's inputs. The
tutor is the policy, so the run config's assistant models are not built.
"""

from __future__ import annotations

import copy
from typing import Any

from ray_knowsim.training.schema import EnvironmentConfig

#: the packaged demo items and graphs, the offline model as learner and extractor
DEMO_RUN: dict[str, Any] = {
    "name": "train-demo",
    "tasks": [
        {"name": "math", "items": "pkg:demo/math.jsonl", "graphs": "pkg:demo/iu_math.json"},
        {"name": "expertqa", "items": "pkg:demo/expertqa.jsonl", "graphs": "pkg:demo/iu_expertqa.json"},
    ],
    "models": {"offline": {"backend": "offline"}},
    "roles": {"user_sim": "offline", "extractor": "offline", "judge": "offline", "assistant": {"model": "offline"}},
    "conditions": [{"strategy": "minimal"}],
    "max_turns": 8,
    "seed": 0,
}


def load_config(config: EnvironmentConfig) -> Any:
    from ray_knowsim.config.loading import apply_overrides, load_run_config, parse_run_config

    if config.run_config is None:
        return parse_run_config(apply_overrides(copy.deepcopy(DEMO_RUN), list(config.overrides)), ".", "the demo environment")
    return load_run_config(config.run_config, overrides=list(config.overrides))


def item_keys(config: EnvironmentConfig) -> list[str]:
    """The environment's items, ``"<task>/<item_id>"``, in the run config's order (what a taskset
    of episodes is drawn from)."""
    from ray_knowsim.plan.sessions import load_inputs
    from ray_knowsim.schema.items import item_key

    inputs = load_inputs(load_config(config))
    return [item_key(task, it.id) for task, its in inputs.items.items() for it in its]


def build_parts(config: EnvironmentConfig, pools: dict[str, Any] | None = None) -> tuple[Any, dict, dict, Any, Any]:
    """(shard context, items by key, graphs by key, learner model, extractor model).

    ``pools`` receives what the models hold on the cluster (a vLLM model's engine actors, an HTTP
    model's lease on its shared limiter): keep it while the models are in use and release it with
    :func:`ray_knowsim.backends.model_set.shutdown_pools` (a dropped lease lets the limiter end)."""
    from ray_knowsim.plan.build import make_context
    from ray_knowsim.backends.model_set import build_models
    from ray_knowsim.plan.sessions import load_inputs
    from ray_knowsim.llm.accounting import Accounting
    from ray_knowsim.schema.items import item_key

    cfg = load_config(config)
    inputs = load_inputs(cfg)
    keys = [k for k in (cfg.roles.user_sim.model, cfg.roles.extractor.model) if k]
    models = build_models(cfg, inputs.graphs, None, keys=list(dict.fromkeys(keys)), pools=pools if pools is not None else {})
    roles = {"user_sim": cfg.roles.user_sim.model, "extractor": cfg.roles.extractor.model}
    accounting = Accounting()
    user_sim = models.model(roles["user_sim"], accounting)
    extractor = models.model(roles["extractor"], accounting)
    config_hash = cfg.config_hash()
    ctx = make_context(cfg, f"{cfg.name}-train-{config_hash[:8]}", config_hash)
    items = {item_key(task, it.id): it for task, its in inputs.items.items() for it in its}
    return ctx, items, dict(inputs.graphs), user_sim, extractor


def shared_engine_pools(config: EnvironmentConfig) -> dict[str, Any]:
    """Start the config's vLLM engine pools (learner, extractor) once, for several environments —
    the Serve replicas of ``env serve --replicas N`` — so N replicas share one pool instead of
    starting N (each a model's replicas x GPUs); routing stays session-affine, as every replica's
    model picks the engine by the episode's session. Blocks until the engines are ready. The
    caller shuts them down (:func:`ray_knowsim.backends.model_set.shutdown_pools`). Needs Ray."""
    from ray_knowsim.backends.model_set import shutdown_pools
    from ray_knowsim.backends.vllm.pool import VLLMPool

    cfg = load_config(config)
    keys = {k for k in (cfg.roles.user_sim.model, cfg.roles.extractor.model) if k}
    if not any(cfg.models[k].backend == "vllm" for k in keys):
        return {}  # nothing to share (HTTP limiters are shared by name already)
    pools: dict[str, Any] = {}
    build_parts(config, pools)
    shared = {key: p for key, p in pools.items() if isinstance(p, VLLMPool)}
    shutdown_pools(pools, [key for key in pools if key not in shared])  # limiter leases: each environment holds its own
    return shared


__all__ = ["DEMO_RUN", "build_parts", "item_keys", "load_config", "shared_engine_pools"]
