"""Model entries of a run config, one per backend (``models.<key>: {backend: ...}``), validated
against the backends registered now (built-ins and plugins).

Each built-in entry class lives with its backend (``backends/offline``, ``backends/http``,
``backends/vllm``), beside the builder that reads it: the backends sit below the config (the config
validates its entries against their registry), so the config imports them and never the reverse."""

from __future__ import annotations

from typing import Annotated, Any, Mapping, Union

from pydantic import Field, TypeAdapter

from ray_knowsim.backends.http import HTTPModelEntry
from ray_knowsim.backends.offline import OfflineModelEntry
from ray_knowsim.backends.registry import ALWAYS_OPERATIONAL, BACKENDS
from ray_knowsim.backends.vllm import VLLMModelEntry


def model_entry_type() -> Any:
    """The discriminated union of every registered backend's entry class (built-ins and plugins)."""
    entries = tuple(BACKENDS.get(name).entry for name in BACKENDS.names())
    return Annotated[Union[entries], Field(discriminator="backend")]  # type: ignore[valid-type]


_ADAPTERS: dict[tuple[type, ...], TypeAdapter] = {}


def validate_model_entries(raw: Any) -> dict[str, Any]:
    """``models:`` of a run config validated against the backends registered now. Errors carry
    the key path (``models.<key>.<backend>.<field>``; the tag is dropped when formatting)."""
    key = tuple(BACKENDS.get(name).entry for name in BACKENDS.names())
    adapter = _ADAPTERS.get(key)
    if adapter is None:
        adapter = _ADAPTERS[key] = TypeAdapter(dict[str, model_entry_type()])  # type: ignore[misc]
    return adapter.validate_python(raw)


# A type for annotations and documentation; validation goes through :func:`validate_model_entries`.
ModelEntry = Union[OfflineModelEntry, HTTPModelEntry, VLLMModelEntry]


def operational_fields(backend: str) -> frozenset[str]:
    """Fields of ``backend``'s entries that stay out of the config hash (see :class:`Backend`)."""
    return BACKENDS.get(backend).operational


def answer_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A model entry (as JSON) without its operational fields: what decides what it answers (the
    config hash, a score set's judge and compare's run identity all compare this). An entry of a
    backend that is not registered here keeps everything but its price."""
    backend = entry.get("backend") or ""
    drop = operational_fields(backend) if backend in BACKENDS else ALWAYS_OPERATIONAL
    return {k: v for k, v in entry.items() if k not in drop}


# Fields that decide answers but were added later: left out of the config hash while at these
# defaults, so run directories made before they existed stay resumable.
HASHED_IF_SET = {
    "http": {"thinking": "default", "thinking_off_via": "chat_template_kwargs", "reasoning_effort_off": "minimal"},
}
