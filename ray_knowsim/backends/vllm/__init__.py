"""The ``vllm`` backend: self-hosted open-weight models, vLLM async engines in Ray actors (see
docs/cluster.md). Its entry and its builder are registered here.

* :mod:`.config` — the engine's settings (pydantic; no Ray, no vLLM);
* :mod:`.actor` — the engine actor (vLLM imported only inside it);
* :mod:`.pool` — start/stop a model's replicas; the ChatModel the shards call;
* :mod:`.placement` — fit the run's models on the cluster's GPUs, group conditions when they do not all fit;
* :mod:`.probe` — the check before spending (the context, from the entry or the model's config.json).
"""

from __future__ import annotations

from typing import Literal

from ray_knowsim.backends.registry import BackendProfile, BuildContext, register_backend
from ray_knowsim.backends.vllm.config import OPERATIONAL_FIELDS as VLLM_OPERATIONAL
from ray_knowsim.backends.vllm.config import SECRETS_CONTEXT, VLLMModelConfig
from ray_knowsim.backends.vllm.probe import probe_vllm
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.price import Price


class VLLMModelEntry(VLLMModelConfig):
    """A pool of Ray actors each running a vLLM async engine (see :class:`VLLMModelConfig`)."""

    backend: Literal["vllm"]
    price: Price | None = None  # USD per million tokens (schema/price.py), e.g. your GPU hours per token

    def vllm_config(self) -> VLLMModelConfig:
        """The engine's config: every setting as the entry states it (secrets included; the
        redacted dump is for what is written down)."""
        return VLLMModelConfig.model_validate(self.model_dump(exclude={"backend", "price"}, context=SECRETS_CONTEXT))


@register_backend(
    "vllm",
    VLLMModelEntry,
    operational=set(VLLM_OPERATIONAL),  # the one list the response cache's key also follows
    secret_env=lambda entry: list(entry.secret_env),
    secret_names=lambda entry, key: [f"models.{key}.{n}" if n.startswith("engine_kwargs.") else n for n in entry.secret_names()],
    profile=BackendProfile(latency_s=0.5, tokens_per_s=40.0),
    probe=probe_vllm,
)  # fmt: skip
def build_vllm(entry: VLLMModelEntry, ctx: BuildContext) -> ChatModel:
    """A pool of vLLM async-engine actors, started here (all pools start in parallel and are
    awaited after every model is built) or reused from the driver's running pools."""
    from ray_knowsim.backends.vllm.pool import VLLMPool

    pool = ctx.pools.get(ctx.key)
    if pool is None:
        pool = ctx.pools[ctx.key] = VLLMPool(entry.vllm_config())
        pool.start()
        ctx.after.append(lambda: pool.wait_ready(timeout_s=ctx.wait_s))
    return pool.model()


__all__ = ["VLLMModelConfig", "VLLMModelEntry", "build_vllm"]
