"""Below the fan-out of a run — build: from the config to what runs (inputs, plan, run directory,
the shard context, model prices, the placement of self-hosted models). No shard runs here.

The parts of a run (a reader can follow one without the others):

* **fan-out** (:mod:`ray_knowsim.run.fan_out`): the Ray fan-out of shard tasks, resume, the
  manifest, the tables — ``run``; it imports the two parts below;
* **build** (this module): everything ``run`` derives from the config before any work starts;
  it imports neither part beside it, so the checks before spending (``ray_knowsim.preflight``)
  and the scoring stage (``ray_knowsim.score.run_stage``) use it too;
* **execute** (:mod:`ray_knowsim.run.worker`): one shard inside a Ray worker — initial
  states, the simulation loop (``engine.shard_fn``), streamed commits of finished sessions.

Nothing here starts a model: ``prepare`` runs before Ray; placement asks Ray for the cluster's
nodes but starts no engine (``plan_only``, which starts Ray for it, is in ``run.fan_out``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ray_knowsim.backends.registry import BACKENDS
from ray_knowsim.config import RunConfig
from ray_knowsim.backends.model_set import check_secrets, used_model_keys, where_secrets_were_checked
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.io.commits import RunDir
from ray_knowsim.io.decisions import DECISIONS_FILE
from ray_knowsim.schema.results import SIMULATION_ROLES
from ray_knowsim.sim.types import ShardContext


class RunError(RuntimeError):
    """A run that cannot start (bad inputs, missing keys, a run dir of another config)."""


class PlacementFailed(RunError):
    """The run's self-hosted models cannot be placed on this cluster."""


def make_context(cfg: RunConfig, run_id: str, config_hash: str, invocation: int = 0) -> ShardContext:
    roles = {}
    for role in SIMULATION_ROLES:  # the judges are a stage of their own (score/run_stage.py)
        settings = cfg.roles.settings(role)
        roles[role] = replace(settings, model="") if role == "assistant" else settings  # assistants: per condition
    return ShardContext(
        run_id=run_id,
        config_hash=config_hash,
        rules=cfg.rule_config,
        max_turns=cfg.max_turns,
        early_stop=cfg.early_stop,
        roles=roles,
        prompts=cfg.prompts.version,
        connectable=cfg.prompts.connectable,
        plugins=tuple(cfg.plugins),
        prices=model_prices(cfg),
        invocation=invocation,
    )


def model_prices(cfg: RunConfig) -> dict[str, Any]:
    """Model key -> Price: the configured one; a backend whose profile says free (the offline model)
    costs nothing unless priced."""
    from ray_knowsim.schema.price import Price

    out: dict[str, Any] = {}
    for key, entry in cfg.models.items():
        price = getattr(entry, "price", None)  # a plugin backend's entry may have no price field
        if price is None and BACKENDS.get(entry.backend).profile.free:
            price = Price.free()
        if price is not None:
            out[key] = price
    return out


def prepare(cfg: RunConfig, output: str | Path | None = None, overwrite: bool = False) -> tuple[Plan, RunDir, str, str, Any]:
    """Everything before Ray: inputs, plan, run dir checks. Raises RunError with a clear message."""
    errors = check_secrets(cfg)
    if errors:
        raise RunError("missing API keys:\n  " + "\n  ".join(errors) + f"\n({where_secrets_were_checked()})")
    try:
        inputs = load_inputs(cfg)
    except ValueError as exc:  # LoadError, GraphError
        raise RunError(str(exc)) from exc
    plan = Plan(cfg, inputs)
    config_hash = cfg.config_hash()
    run_id = f"{cfg.name}-{config_hash[:8]}"
    run_dir = RunDir(Path(output).resolve() if output else cfg.output_path())  # workers write there: their cwd is not the shell's
    if overwrite and run_dir.root.exists():
        import shutil

        for sub in ("sessions", "turns", "commits", "shards", "tables", "scores", ".tmp"):  # the content-keyed LLM cache stays
            shutil.rmtree(run_dir.root / sub, ignore_errors=True)
        run_dir.manifest.unlink(missing_ok=True)
        (run_dir.root / DECISIONS_FILE).unlink(missing_ok=True)  # an adaptive run's record
    return plan, run_dir, run_id, config_hash, inputs


def place_models(cfg: RunConfig) -> Any:
    """Place the run's vLLM models on the connected cluster (see backends/vllm/placement.py)."""
    import ray

    from ray_knowsim.config import VLLMModelEntry
    from ray_knowsim.backends.vllm.placement import PlacementError, nodes_from_ray, plan_placement

    used = used_model_keys(cfg)
    vmodels = {k: cfg.models[k].vllm_config() for k in used if isinstance(cfg.models[k], VLLMModelEntry)}
    shared = [getattr(cfg.roles, r).model for r in ("user_sim", "extractor", "judge") if getattr(cfg.roles, r) is not None]
    conds = [(cfg.condition_name(c), c.assistant or cfg.roles.assistant.model or "") for c in cfg.conditions]
    try:
        return plan_placement(vmodels, [k for k in shared if k], conds, nodes_from_ray(ray.nodes()))
    except PlacementError as exc:
        raise PlacementFailed(f"placement: {exc}") from exc


def placed_plan(cfg: RunConfig, inputs: Any, plan: Plan, vplan: Any) -> Plan:
    """The plan ordered and cut by the placement's condition groups when the self-hosted models do
    not all fit at once (pools start and stop per group), else ``plan`` itself."""
    return Plan(cfg, inputs, vplan.condition_groups()) if vplan.grouped else plan



__all__ = ["PlacementFailed", "RunError", "make_context", "model_prices", "place_models", "placed_plan", "prepare"]
