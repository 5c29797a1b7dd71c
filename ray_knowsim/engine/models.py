"""Role models built once per run on the driver and shared by every shard.

* ``http``: one :class:`OpenAICompatibleModel` per model key; when the config sets run-wide limits
  (requests/tokens per minute, global in-flight cap) ONE named rate-limiter actor per endpoint,
  created here on the driver so it lives as long as the run, and handed to every worker.
* ``vllm``: a pool of engine actors per model (:class:`ray_knowsim.engine.vllm.pool.VLLMPool`),
  started here and owned by the driver, which shuts every engine down at the end of the run.
* ``offline``: the deterministic offline model, given the run's IU graphs so its assistant can
  teach any item of the run.

The :class:`ModelSet` pickles (handles, not engines), is put in the object store once, and each
shard task turns it into :class:`RoleModels` with per-shard accounting and the run's response cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Mapping

from ray_knowsim.llm.accounting import Accounting, AccountedModel
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.model.graph import IUGraph
from ray_knowsim.sim.types import RoleModels

if TYPE_CHECKING:  # the config (and the HTTP/vLLM modules it imports) stays out of shard workers
    from ray_knowsim.engine.config import HTTPModelEntry, RunConfig

_CACHES: dict[str, Any] = {}  # per worker process: one ResponseCache per run directory


@dataclass
class ModelSet:
    """Every model of the run by key, and which key serves which role."""

    models: dict[str, ChatModel]
    roles: dict[str, str]  # "user_sim" / "extractor" / "judge" -> model key
    assistants: list[str]  # model keys used by conditions
    cacheable: set[str] = field(default_factory=set)  # keys whose answers go to the response cache
    cache_dir: str | None = None

    def role_models(self, accounting: Accounting) -> RoleModels:
        """The models for one shard: counted into ``accounting``, cached where configured."""
        wrapped: dict[str, ChatModel] = {}

        def get(key: str) -> ChatModel:
            if key not in wrapped:
                model = self.models[key]
                if self.cache_dir and key in self.cacheable:
                    from ray_knowsim.llm.cache import CachedModel

                    model = CachedModel(model, _response_cache(self.cache_dir))
                wrapped[key] = AccountedModel(model, accounting)
            return wrapped[key]

        return RoleModels(
            user_sim=get(self.roles["user_sim"]),
            extractor=get(self.roles["extractor"]),
            assistants={k: get(k) for k in self.assistants},
            judge=get(self.roles["judge"]) if "judge" in self.roles else None,
        )


def _response_cache(directory: str) -> Any:
    from ray_knowsim.llm.cache import ResponseCache

    cache = _CACHES.get(directory)
    if cache is None:
        cache = _CACHES[directory] = ResponseCache(directory)
    return cache


def used_model_keys(cfg: RunConfig) -> dict[str, None]:
    keys: dict[str, None] = {}
    for role in ("user_sim", "extractor", "judge"):
        rc = getattr(cfg.roles, role)
        if rc is not None and rc.model:
            keys[rc.model] = None
    for c in cfg.conditions:
        keys[c.assistant or cfg.roles.assistant.model or ""] = None
    return keys


def secret_env_names(cfg: RunConfig) -> list[str]:
    """Names (never values) of the environment variables holding API keys, and of the secret
    values of self-hosted model entries (``env`` variables, engine arguments)."""
    from ray_knowsim.engine.config import HTTPModelEntry, VLLMModelEntry

    names = {m.api_key_env for m in cfg.models.values() if isinstance(m, HTTPModelEntry) and m.api_key_env}
    for key, m in cfg.models.items():
        if isinstance(m, VLLMModelEntry):
            names.update(f"models.{key}.{n}" if n.startswith("engine_kwargs.") else n for n in m.secret_names())
    return sorted(names)


def check_secrets(cfg: RunConfig) -> list[str]:
    """Errors for API-key variables the used models need but this process lacks."""
    from ray_knowsim.engine.config import HTTPModelEntry

    from ray_knowsim.engine.config import VLLMModelEntry

    errors = []
    for key in used_model_keys(cfg):
        m = cfg.models[key]
        if isinstance(m, HTTPModelEntry) and m.api_key_env and not os.environ.get(m.api_key_env, "").strip():
            errors.append(f"models.{key}.api_key_env: environment variable {m.api_key_env} is not set")
        if isinstance(m, VLLMModelEntry):
            errors += [f"models.{key}.secret_env: environment variable {n} is not set" for n in m.secret_env
                       if not os.environ.get(n, "").strip()]
    return errors


def build_models(cfg: RunConfig, graphs: Mapping[str, IUGraph], cache_dir: str | None, *, wait_s: float = 900,
                 keys: Collection[str] | None = None, pools: dict[str, Any] | None = None) -> ModelSet:
    """Create the used models (limiters and vLLM pools included; needs Ray for those).

    ``keys``: only these model keys (one condition group of a grouped run); ``pools``: the
    driver's running vLLM pools by key, reused when present and filled with the ones started here
    (the caller shuts them down, in a ``finally``)."""
    from ray_knowsim.engine.config import HTTPModelEntry, OfflineModelEntry, VLLMModelEntry

    models: dict[str, ChatModel] = {}
    cacheable: set[str] = set()
    pools = {} if pools is None else pools
    starting: list[Any] = []
    for key in used_model_keys(cfg):
        if keys is not None and key not in keys:
            continue
        entry = cfg.models[key]
        if isinstance(entry, OfflineModelEntry):
            from ray_knowsim.llm.offline import OfflineModel

            model = OfflineModel(name=entry.name or key, **entry.options)
            model.register_graphs(dict(graphs))
            models[key] = model
        elif isinstance(entry, HTTPModelEntry):
            models[key] = _http_model(entry)
            cacheable.add(key)
        elif isinstance(entry, VLLMModelEntry):
            from ray_knowsim.engine.vllm.pool import VLLMPool

            if key not in pools:
                pools[key] = VLLMPool(entry.vllm_config())
                pools[key].start()
                starting.append(pools[key])
            models[key] = pools[key].model()
            cacheable.add(key)
        else:  # pragma: no cover - the config's union is closed
            raise TypeError(f"unknown model entry {entry!r}")
    for pool in starting:
        pool.wait_ready(timeout_s=wait_s)
    roles = {"user_sim": cfg.roles.user_sim.model or "", "extractor": cfg.roles.extractor.model or ""}
    if cfg.roles.judge is not None and cfg.roles.judge.model:
        roles["judge"] = cfg.roles.judge.model
    assistants = sorted({c.assistant or cfg.roles.assistant.model or "" for c in cfg.conditions} & set(models))
    return ModelSet(models, roles, assistants, cacheable if cfg.engine.llm_cache else set(), cache_dir)


def shutdown_pools(pools: dict[str, Any], keys: Collection[str] | None = None) -> dict[str, Any]:
    """Shut down (and forget) the named pools, or all; never raises. Returns each one's report."""
    reports = {}
    for key in list(pools) if keys is None else [k for k in keys if k in pools]:
        try:
            reports[key] = pools.pop(key).shutdown()
        except Exception as exc:  # noqa: BLE001 - shutting down the rest matters more
            reports[key] = f"shutdown failed: {type(exc).__name__}"
    return reports


def _http_model(entry: HTTPModelEntry) -> ChatModel:
    from ray_knowsim.llm.http_backend import OpenAICompatibleModel
    from ray_knowsim.llm.rate_limit import get_or_create_limiter

    hcfg = entry.http_config()
    limiter = None
    limits = hcfg.rate_limits()
    if limits.enabled:
        # one budget per endpoint for the whole run, owned by the driver
        limiter = get_or_create_limiter(f"ray_knowsim.limiter.{hcfg.endpoint_key}", limits)
    return OpenAICompatibleModel(hcfg, limiter=limiter)


__all__ = ["ModelSet", "build_models", "check_secrets", "secret_env_names", "shutdown_pools", "used_model_keys"]
