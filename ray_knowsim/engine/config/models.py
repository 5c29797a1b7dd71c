"""Model entries of a run config, one per backend (``models.<key>: {backend: ...}``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field

from ray_knowsim.engine.config.base import Strict
from ray_knowsim.llm.http_backend import HTTPModelConfig
from ray_knowsim.engine.vllm.config import VLLMModelConfig



class OfflineModelEntry(Strict):
    """The deterministic offline model (no network, no key): demos, tests, benchmarks."""

    backend: Literal["offline"]
    name: str | None = None  # identity in caches / results; default: the model key
    options: dict[str, Any] = Field(default_factory=dict)  # passed to the offline model


class HTTPModelEntry(HTTPModelConfig):
    """Any OpenAI-compatible endpoint (see :class:`HTTPModelConfig` for every field)."""

    backend: Literal["http"]

    def http_config(self) -> HTTPModelConfig:
        return HTTPModelConfig.model_validate(self.model_dump(exclude={"backend"}))


class VLLMModelEntry(VLLMModelConfig):
    """A pool of Ray actors each running a vLLM async engine (see :class:`VLLMModelConfig`)."""

    backend: Literal["vllm"]

    def vllm_config(self) -> VLLMModelConfig:
        return VLLMModelConfig.model_validate(self.model_dump(exclude={"backend"}))


ModelEntry = Annotated[Union[OfflineModelEntry, HTTPModelEntry, VLLMModelEntry], Field(discriminator="backend")]

# Fields that change how fast or how safely a model is reached, not what it answers: they stay
# out of the config hash, so tuning them does not invalidate a run directory for resume.
OPERATIONAL = {
    "http": {"timeout_s", "max_attempts", "backoff", "max_in_flight", "requests_per_minute", "tokens_per_minute",
             "max_in_flight_global", "api_key_env", "api_key_header", "send_knowsim_headers", "offline_server"},
    "vllm": {"replicas", "num_cpus", "env", "max_restarts", "request_retries", "restart_wait_s", "max_concurrent_requests",
             "gpu_memory_utilization", "multi_node"},
    "offline": set(),
}
