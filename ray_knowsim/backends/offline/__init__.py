"""The ``offline`` backend: the deterministic offline model (``ray_knowsim.llm.offline``) in every
role it is named for, in the shard's own process. Its entry (``models.<key>: {backend: offline}``),
its planner profile and its builder, registered here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ray_knowsim.backends.registry import BackendProfile, BuildContext, register_backend
from ray_knowsim.llm.offline import ntokens
from ray_knowsim.llm.protocol import ChatModel
from ray_knowsim.schema.price import Price


class OfflineModelEntry(BaseModel):
    """The deterministic offline model (no network, no key): demos, tests, benchmarks."""

    model_config = ConfigDict(extra="forbid")  # as every config section (config/base.py's Strict)

    backend: Literal["offline"]
    name: str | None = None  # identity in caches / results; default: the model key
    options: dict[str, Any] = Field(default_factory=dict)  # passed to the offline model
    price: Price | None = None  # USD per million tokens (schema/price.py); offline: free when unset


#: the offline model's per-request completion lengths (whitespace words), measured on the demo items
#: (the assistant's: each strategy's ``offline_reply_words``)
OFFLINE_COMPLETION = {"user_sim": 55.0, "judge": 60.0, "judge_termination": 40.0, "extractor_per_iu": 35.0}
OFFLINE_PROFILE = BackendProfile(latency_s=0.03, tokens_per_s=0.0, in_process=True, free=True,
                                 completion_tokens=OFFLINE_COMPLETION, reply_length="offline_reply_words", count_tokens=ntokens,
                                 token_count_name="offline model's own count (whitespace-separated words)")


@register_backend("offline", OfflineModelEntry, cacheable=False, double=True, profile=OFFLINE_PROFILE)
def build_offline(entry: OfflineModelEntry, ctx: BuildContext) -> ChatModel:
    """The deterministic offline model, given the run's IU graphs so it can teach any item."""
    from ray_knowsim.llm.offline import OfflineModel

    model = OfflineModel(name=entry.name or ctx.key, **entry.options)
    model.register_graphs(dict(ctx.graphs))
    return model


__all__ = ["OFFLINE_COMPLETION", "OFFLINE_PROFILE", "OfflineModelEntry", "build_offline"]
