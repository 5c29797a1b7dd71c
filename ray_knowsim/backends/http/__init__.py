"""The ``http`` backend: any OpenAI-compatible endpoint (the client is ``ray_knowsim.llm.http``).
Its entry, its builder (with the run-wide limiter, ``backends/limiter/``) and its check before
spending (:mod:`.probe`), registered here; :mod:`.offline_double` finds the entries that point at
``ray-knowsim serve-offline``."""

from __future__ import annotations

from typing import Literal

from ray_knowsim.backends.http.probe import probe_http
from ray_knowsim.backends.registry import BackendProfile, BuildContext, register_backend
from ray_knowsim.llm.http.config import OPERATIONAL_FIELDS as HTTP_OPERATIONAL
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.price import Price


class HTTPModelEntry(HTTPModelConfig):
    """Any OpenAI-compatible endpoint (see :class:`HTTPModelConfig` for every field)."""

    backend: Literal["http"]
    price: Price | None = None  # USD per million tokens (schema/price.py)

    def http_config(self) -> HTTPModelConfig:
        return HTTPModelConfig.model_validate(self.model_dump(exclude={"backend", "price"}))


@register_backend(
    "http",
    HTTPModelEntry,
    operational=set(HTTP_OPERATIONAL),  # the one list the response cache's key also follows
    secret_env=lambda entry: entry.api_key_env,
    profile=BackendProfile(latency_s=1.0, tokens_per_s=60.0),
    probe=probe_http,
)  # fmt: skip
def build_http(entry: HTTPModelEntry, ctx: BuildContext) -> ChatModel:
    """An OpenAI-compatible endpoint; with limits, ONE named limiter actor per endpoint and
    credential for the whole cluster (every run against it shares the budget), shared by every
    worker. This run holds a lease on it, kept with the driver's pools: released when the run ends
    (or when a condition group no longer needs the model), so the limiter lives as long as the last
    run that uses it."""
    from ray_knowsim.backends.limiter.actor import LimiterLease, SharedLimiter, create_shared_limiter
    from ray_knowsim.llm.http.client import OpenAICompatibleModel

    hcfg = entry.http_config()
    held = ctx.pools.get(ctx.key)
    if isinstance(held, LimiterLease):  # an earlier condition group of this run holds it already
        return OpenAICompatibleModel(hcfg, limiter=held.limiter)
    limiter = create_shared_limiter(hcfg)  # a Ray actor when Ray is up, else in-process
    if isinstance(limiter, SharedLimiter):
        ctx.pools[ctx.key] = limiter.hold(label=f"model {ctx.key}")
    return OpenAICompatibleModel(hcfg, limiter=limiter)


__all__ = ["HTTPModelEntry", "build_http"]
