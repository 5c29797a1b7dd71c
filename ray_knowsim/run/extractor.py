"""An extractor model built from a run config, outside a run (``validate --extractor-agreement``,
``agreement --re-extract``): the run's own builders, Ray only for a backend that starts actors or
an endpoint with a quota (its limiter is a Ray actor)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator, Mapping

from ray_knowsim.config import RunConfig, parse_run_config
from ray_knowsim.schema.graph import IUGraph


def base_dir_of(manifest: Mapping[str, Any]) -> Path:
    """The folder a run's recorded config resolves its relative paths against."""
    if manifest.get("base_dir"):
        return Path(manifest["base_dir"])
    cf = manifest.get("config_file")
    return Path(cf).resolve().parent if cf else Path.cwd()


def recorded_config(run_dir: str | Path) -> RunConfig:
    """The config a run recorded in its manifest. Raises ValueError for a folder without one."""
    from ray_knowsim.run.manifest import read_manifest
    from ray_knowsim.io.commits import RunDir

    manifest = read_manifest(RunDir(run_dir))
    if manifest is None or "config" not in manifest:
        raise ValueError(f"{run_dir} has no manifest.json with a config (is it a run directory?)")
    return parse_run_config(manifest["config"], base_dir=base_dir_of(manifest))


@contextlib.contextmanager
def extractor_model(cfg: RunConfig, key: str, graphs: Mapping[str, IUGraph], *, unit: str,
                    address: str | None = None) -> Iterator[Any]:
    """The model of ``cfg.models[key]`` with its own accounting (its engine pools shut down after)."""
    from ray_knowsim.backends.model_set import build_models, shutdown_pools
    from ray_knowsim.run.fan_out import ray_options, ray_session
    from ray_knowsim.llm.accounting import Accounting

    entry = cfg.models[key]
    # engines are Ray actors; an endpoint's quota is a cluster-wide limiter, shared with the runs
    # on the cluster (--address or RAY_ADDRESS names it), so re-extraction counts against it too
    needs_ray = entry.backend == "vllm" or (entry.backend == "http" and entry.rate_limits().enabled)
    pools: dict = {}
    with (ray_session(address, **ray_options(cfg), quiet=True) if needs_ray else contextlib.nullcontext()):
        try:
            models = build_models(cfg, graphs, None, keys=[key], pools=pools)
            yield models.model(key, Accounting(), unit=unit)
        finally:
            shutdown_pools(pools)


__all__ = ["base_dir_of", "extractor_model", "recorded_config"]
