"""Role models built once per run on the driver and shared by every shard.

Each model is made by its backend's registered builder (:mod:`ray_knowsim.backends.registry`;
the built-ins are the folders ``backends/offline``, ``backends/http``, ``backends/vllm``).

The :class:`ModelSet` pickles (handles, not engines), is put in the object store once, and each
shard task turns it into :class:`RoleModels` with per-shard accounting and the shard's own folder of
the run's response cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ray_knowsim.backends.registry import BACKENDS, BuildContext
from ray_knowsim.llm.accounting import Accounting, AccountedModel, SpendSink
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.sim.types import RoleModels

#: a :class:`ray_knowsim.config.RunConfig`. Not imported, not even for type checking: the config
#: sits above the backends (it validates its ``models:`` entries against their registry), so this
#: package names it only in words; what is read of it is ``models``, ``roles``, ``conditions`` and
#: ``engine.llm_cache``.
RunConfig = Any


@dataclass
class ModelSet:
    """Every model of the run by key, and which key serves which role."""

    models: dict[str, ChatModel]
    roles: dict[str, str]  # "user_sim" / "extractor" / "judge" -> model key
    assistants: list[str]  # model keys used by conditions
    cacheable: set[str] = field(default_factory=set)  # keys whose answers go to the response cache
    cache_dir: str | None = None

    def role_models(self, accounting: Accounting, unit: str = "shared", sink: SpendSink | None = None) -> RoleModels:
        """The models for one shard: counted into ``accounting`` (and told to ``sink``, the
        shard's spend journal), cached where configured in the folder of ``unit`` (the shard's
        id: the unit a resume reruns)."""
        wrapped: dict[str, ChatModel] = {}
        cache = self._cache(unit)

        def get(key: str) -> ChatModel:
            if key not in wrapped:
                wrapped[key] = self._wrap(key, accounting, cache, sink)
            return wrapped[key]

        return RoleModels(
            user_sim=get(self.roles["user_sim"]),
            extractor=get(self.roles["extractor"]),
            assistants={k: get(k) for k in self.assistants},
        )

    def model(self, key: str, accounting: Accounting, unit: str = "shared", sink: SpendSink | None = None) -> ChatModel:
        """One model, counted into ``accounting`` (and told to ``sink``) and cached where
        configured (in ``unit``'s folder)."""
        return self._wrap(key, accounting, self._cache(unit), sink)

    def _cache(self, unit: str) -> Any:
        if not self.cache_dir or not self.cacheable:
            return None
        from ray_knowsim.llm.cache import ResponseCache, unit_folder

        return ResponseCache(unit_folder(self.cache_dir, unit))

    def _wrap(self, key: str, accounting: Accounting, cache: Any, sink: SpendSink | None = None) -> ChatModel:
        model = self.models[key]
        if cache is not None and key in self.cacheable:
            from ray_knowsim.llm.cache import CachedModel

            model = CachedModel(model, cache)
        return AccountedModel(model, accounting, key=key, sink=sink)


def used_model_keys(cfg: RunConfig) -> dict[str, None]:
    keys: dict[str, None] = {}
    for role in ("user_sim", "extractor", "judge"):
        rc = getattr(cfg.roles, role)
        if rc is not None and rc.model:
            keys[rc.model] = None
    for c in cfg.conditions:
        keys[c.assistant or cfg.roles.assistant.model or ""] = None
    return keys


def _required_env(entry: Any) -> list[str]:
    value = BACKENDS.get(entry.backend).secret_env(entry)
    return [value] if isinstance(value, str) else [n for n in (value or ()) if n]


def secret_env_names(cfg: RunConfig) -> list[str]:
    """Names (never values) of the environment variables holding secrets (API keys, hub tokens)
    and of the secret-looking settings of model entries (e.g. engine arguments), for the manifest."""
    names: set[str] = set()
    for key, m in cfg.models.items():
        names.update(_required_env(m))
        names.update(BACKENDS.get(m.backend).secret_names(m, key))
    return sorted(names)


def check_secrets(cfg: RunConfig) -> list[str]:
    """Errors for API-key variables the used models need but this process lacks: unset and set
    but empty (an ``export KEY=`` or a blank secret) are told apart."""
    errors = []
    for key in used_model_keys(cfg):
        m = cfg.models[key]
        for env in _required_env(m):
            value = os.environ.get(env)
            if value is None:
                errors.append(f"models.{key}: environment variable {env} is not set")
            elif not value.strip():
                errors.append(f"models.{key}: environment variable {env} is set but empty")
    return errors


def where_secrets_were_checked() -> str:
    """Where :func:`check_secrets` looked, in words for its message: a ``ray job submit`` job's
    driver runs on the cluster, in the environment of its nodes, not in the shell that submitted
    it (Ray's job manager marks the driver's environment with ``RAY_JOB_CONFIG_JSON_ENV_VAR``)."""
    import socket

    host = socket.gethostname()
    if "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ:
        return (f"checked on the cluster, in the driver of this `ray job submit` job (node {host}), not in the shell that "
                "submitted it: set the variable in the environment of the cluster's nodes (where `ray start` runs; "
                "docs/cluster.md, Secrets), then submit again")
    if os.environ.get("RAY_ADDRESS"):
        return (f"checked on this machine ({host}), the driver joining the cluster at RAY_ADDRESS; "
                "the cluster's worker nodes need the variable in their own environment too (docs/cluster.md, Secrets)")
    return f"checked in this shell's environment on {host}"


def model_backends(cfg: RunConfig) -> dict[str, str]:
    """Which backend serves each role (assistants: ``assistant:<model key>``), for the manifest."""
    out = {}
    for role in ("user_sim", "extractor", "judge"):
        rc = getattr(cfg.roles, role)
        if rc is not None and rc.model:
            out[role] = cfg.models[rc.model].backend
    for key in sorted({c.assistant or cfg.roles.assistant.model or "" for c in cfg.conditions}):
        out[f"assistant:{key}"] = cfg.models[key].backend
    return out


def test_double_roles(cfg: RunConfig) -> list[str]:
    """The roles (as in :func:`model_backends`) served by a test-double backend, for the manifest."""
    return sorted(role for role, backend in model_backends(cfg).items() if BACKENDS.get(backend).double)


def build_models(
    cfg: RunConfig, graphs: Mapping[str, IUGraph], cache_dir: str | None, *, wait_s: float = 900,
    keys: Iterable[str] | None = None, pools: dict[str, Any] | None = None,
) -> ModelSet:
    """Create the used models (or only ``keys``: one condition group of a grouped run) with their
    registered backends' builders. Needs Ray for backends that start actors (limiters, engine
    pools). ``pools``: the driver's running engine pools by key, reused when present and filled
    with the ones started here (the caller shuts them down, in a ``finally``)."""
    models: dict[str, ChatModel] = {}
    cacheable: set[str] = set()
    after: list = []
    for key in (used_model_keys(cfg) if keys is None else keys):
        entry = cfg.models[key]
        backend = BACKENDS.get(entry.backend)
        ctx = BuildContext(key=key, graphs=graphs, wait_s=wait_s, after=after, pools=pools if pools is not None else {})
        models[key] = backend.build(entry, ctx)
        if backend.cacheable:
            cacheable.add(key)
    for wait in after:
        wait()
    roles = {"user_sim": cfg.roles.user_sim.model or "", "extractor": cfg.roles.extractor.model or ""}
    if cfg.roles.judge is not None and cfg.roles.judge.model:
        roles["judge"] = cfg.roles.judge.model
    roles = {role: key for role, key in roles.items() if key in models}
    assistants = sorted(k for k in {c.assistant or cfg.roles.assistant.model or "" for c in cfg.conditions} if k in models)
    return ModelSet(models, roles, assistants, cacheable if cfg.engine.llm_cache else set(), cache_dir)


def shutdown_pools(pools: dict[str, Any], keys: Iterable[str] | None = None) -> dict[str, Any]:
    """Shut down (and forget) the named pools, or all; never raises. Returns each one's report."""
    reports = {}
    for key in list(pools) if keys is None else [k for k in keys if k in pools]:
        try:
            reports[key] = pools.pop(key).shutdown()
        except Exception as exc:  # noqa: BLE001 - shutting down the rest matters more than one failure
            reports[key] = f"shutdown failed: {type(exc).__name__}"
    return reports


__all__ = ["ModelSet", "build_models", "check_secrets", "model_backends", "secret_env_names", "shutdown_pools", "test_double_roles", "used_model_keys", "where_secrets_were_checked"]
