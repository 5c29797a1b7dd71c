"""The built-in model backends: ``offline``, ``http``, ``vllm`` (see :mod:`.backends`)."""

from __future__ import annotations

from ray_knowsim.engine.backends import BackendProfile, BuildContext, register_backend
from ray_knowsim.engine.config.model_entries import HTTPModelEntry, OfflineModelEntry, VLLMModelEntry
from ray_knowsim.engine.vllm.config import OPERATIONAL_FIELDS as VLLM_OPERATIONAL
from ray_knowsim.llm.http.config import OPERATIONAL_FIELDS as HTTP_OPERATIONAL
from ray_knowsim.llm.offline import ntokens
from ray_knowsim.llm.protocol import ChatModel

#: the offline model's per-request completion lengths (whitespace words), measured on the demo items
#: (the assistant's: each strategy's ``offline_reply_words``)
OFFLINE_COMPLETION = {"user_sim": 55.0, "judge": 60.0, "judge_termination": 40.0, "extractor_per_iu": 35.0}
OFFLINE_PROFILE = BackendProfile(latency_s=0.03, tokens_per_s=0.0, in_process=True, free=True,
                                 completion_tokens=OFFLINE_COMPLETION, reply_length="offline_reply_words", count_tokens=ntokens,
                                 token_count_name="offline model's own count (whitespace-separated words)")


def _preflight():  # noqa: ANN202 - imported when a run checks its endpoints, not when configs load
    from ray_knowsim.engine import preflight

    return preflight


@register_backend("offline", OfflineModelEntry, cacheable=False, double=True, profile=OFFLINE_PROFILE)
def build_offline(entry: OfflineModelEntry, ctx: BuildContext) -> ChatModel:
    """The deterministic offline model, given the run's IU graphs so it can teach any item."""
    from ray_knowsim.llm.offline import OfflineModel

    model = OfflineModel(name=entry.name or ctx.key, **entry.options)
    model.register_graphs(dict(ctx.graphs))
    return model


@register_backend(
    "http",
    HTTPModelEntry,
    operational=set(HTTP_OPERATIONAL),  # the one list the response cache's key also follows
    secret_env=lambda entry: entry.api_key_env,
    profile=BackendProfile(latency_s=1.0, tokens_per_s=60.0),
    probe=lambda entry, key: _preflight().probe_http(entry, key),
)  # fmt: skip
def build_http(entry: HTTPModelEntry, ctx: BuildContext) -> ChatModel:
    """An OpenAI-compatible endpoint; with limits, ONE named limiter actor per endpoint and
    credential for the whole cluster (every run against it shares the budget), shared by every
    worker. This run holds a lease on it, kept with the driver's pools: released when the run ends
    (or when a condition group no longer needs the model), so the limiter lives as long as the last
    run that uses it."""
    from ray_knowsim.engine.limiter.actor import LimiterLease, SharedLimiter, create_shared_limiter
    from ray_knowsim.llm.http.client import OpenAICompatibleModel

    hcfg = entry.http_config()
    held = ctx.pools.get(ctx.key)
    if isinstance(held, LimiterLease):  # an earlier condition group of this run holds it already
        return OpenAICompatibleModel(hcfg, limiter=held.limiter)
    limiter = create_shared_limiter(hcfg)  # a Ray actor when Ray is up, else in-process
    if isinstance(limiter, SharedLimiter):
        ctx.pools[ctx.key] = limiter.hold(label=f"model {ctx.key}")
    return OpenAICompatibleModel(hcfg, limiter=limiter)


@register_backend(
    "vllm",
    VLLMModelEntry,
    operational=set(VLLM_OPERATIONAL),  # the one list the response cache's key also follows
    secret_env=lambda entry: list(entry.secret_env),
    secret_names=lambda entry, key: [f"models.{key}.{n}" if n.startswith("engine_kwargs.") else n for n in entry.secret_names()],
    profile=BackendProfile(latency_s=0.5, tokens_per_s=40.0),
    probe=lambda entry, key: _preflight().probe_vllm(entry, key),
)  # fmt: skip
def build_vllm(entry: VLLMModelEntry, ctx: BuildContext) -> ChatModel:
    """A pool of vLLM async-engine actors, started here (all pools start in parallel and are
    awaited after every model is built) or reused from the driver's running pools."""
    from ray_knowsim.engine.vllm.pool import VLLMPool

    pool = ctx.pools.get(ctx.key)
    if pool is None:
        pool = ctx.pools[ctx.key] = VLLMPool(entry.vllm_config())
        pool.start()
        ctx.after.append(lambda: pool.wait_ready(timeout_s=ctx.wait_s))
    return pool.model()
