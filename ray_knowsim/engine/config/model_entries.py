"""Model entries of a run config, one per backend (``models.<key>: {backend: ...}``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Mapping, Union

from pydantic import Field, TypeAdapter

from ray_knowsim.engine.config.base import Strict
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.engine.vllm.config import SECRETS_CONTEXT, VLLMModelConfig
from ray_knowsim.schema.price import Price


class OfflineModelEntry(Strict):
    """The deterministic offline model (no network, no key): demos, tests, benchmarks."""

    backend: Literal["offline"]
    name: str | None = None  # identity in caches / results; default: the model key
    options: dict[str, Any] = Field(default_factory=dict)  # passed to the offline model
    price: Price | None = None  # USD per million tokens (schema/price.py); offline: free when unset


class HTTPModelEntry(HTTPModelConfig):
    """Any OpenAI-compatible endpoint (see :class:`HTTPModelConfig` for every field)."""

    backend: Literal["http"]
    price: Price | None = None  # USD per million tokens (schema/price.py)

    def http_config(self) -> HTTPModelConfig:
        return HTTPModelConfig.model_validate(self.model_dump(exclude={"backend", "price"}))


class VLLMModelEntry(VLLMModelConfig):
    """A pool of Ray actors each running a vLLM async engine (see :class:`VLLMModelConfig`)."""

    backend: Literal["vllm"]
    price: Price | None = None  # USD per million tokens (schema/price.py), e.g. your GPU hours per token

    def vllm_config(self) -> VLLMModelConfig:
        """The engine's config: every setting as the entry states it (secrets included; the
        redacted dump is for what is written down)."""
        return VLLMModelConfig.model_validate(self.model_dump(exclude={"backend", "price"}, context=SECRETS_CONTEXT))


def model_entry_type() -> Any:
    """The discriminated union of every registered backend's entry class (built-ins and plugins)."""
    from ray_knowsim.engine.backends import BACKENDS

    entries = tuple(BACKENDS.get(name).entry for name in BACKENDS.names())
    return Annotated[Union[entries], Field(discriminator="backend")]  # type: ignore[valid-type]


_ADAPTERS: dict[tuple[type, ...], TypeAdapter] = {}


def validate_model_entries(raw: Any) -> dict[str, Any]:
    """``models:`` of a run config validated against the backends registered now. Errors carry
    the key path (``models.<key>.<backend>.<field>``; the tag is dropped when formatting)."""
    from ray_knowsim.engine.backends import BACKENDS

    key = tuple(BACKENDS.get(name).entry for name in BACKENDS.names())
    adapter = _ADAPTERS.get(key)
    if adapter is None:
        adapter = _ADAPTERS[key] = TypeAdapter(dict[str, model_entry_type()])  # type: ignore[misc]
    return adapter.validate_python(raw)


# A type for annotations and documentation; validation goes through :func:`validate_model_entries`.
ModelEntry = Union[OfflineModelEntry, HTTPModelEntry, VLLMModelEntry]


def operational_fields(backend: str) -> frozenset[str]:
    """Fields of ``backend``'s entries that stay out of the config hash (see :class:`Backend`)."""
    from ray_knowsim.engine.backends import BACKENDS

    return BACKENDS.get(backend).operational


def answer_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A model entry (as JSON) without its operational fields: what decides what it answers (the
    config hash, a score set's judge and compare's run identity all compare this). An entry of a
    backend that is not registered here keeps everything but its price."""
    from ray_knowsim.engine.backends import ALWAYS_OPERATIONAL, BACKENDS

    backend = entry.get("backend") or ""
    drop = operational_fields(backend) if backend in BACKENDS else ALWAYS_OPERATIONAL
    return {k: v for k, v in entry.items() if k not in drop}


# Fields that decide answers but were added later: left out of the config hash while at these
# defaults, so run directories made before they existed stay resumable.
HASHED_IF_SET = {
    "http": {"thinking": "default", "thinking_off_via": "chat_template_kwargs", "reasoning_effort_off": "minimal"},
}
