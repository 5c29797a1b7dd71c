"""How to start one self-hosted model: engine arguments, placement, replicas, chat and sampling
options. Pure pydantic (no Ray, no vLLM), so configs validate anywhere.

Secrets: the engine gets exactly the settings its entry states (``engine_args()`` and the actor's
payload, ``model_dump(context=SECRETS_CONTEXT)``); redaction applies only to what is written down
(``model_dump()`` without that context: manifests, logs, ``--plan``, printed configs), where the
value of every secret is replaced by :data:`REDACTED`. What is a secret is decided by its name
(:func:`is_secret_name`): ``hf_token``, ``api_key``, ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY`` are;
``max_num_batched_tokens``, ``tokenizer`` and ``HF_HOME`` are settings. ``secret_env`` names
variables of the driver's environment whose values reach only the engine actor (as its
constructor argument, never its runtime_env).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, field_serializer, model_validator

REDACTED = "<redacted>"
#: words that make a setting's or a variable's name a secret's (after splitting it at ``_ - .`` and
#: camelCase): a hub token, an API key, a password. A word, not a substring: "tokens" and
#: "tokenizer" are no "token".
SECRET_WORDS = frozenset({"token", "secret", "password", "passwd", "passphrase", "credential", "credentials", "key",
                          "apikey", "auth", "authorization", "cookie"})
SECRETS_CONTEXT = {"secrets": True}  # model_dump(context=SECRETS_CONTEXT): the actor's payload
#: our field -> vLLM ``AsyncEngineArgs`` keyword, for the settings passed through as they are
#: a plain `vllm serve`'s structured decoding (vLLM 0.32's StructuredOutputsConfig defaults):
#: what an `http` entry against a server started without --structured-outputs-config gets
VLLM_SERVE_STRUCTURED = {"backend": "auto", "disable_any_whitespace": False}
_ENGINE_ARG_OF = {"model": "model", "tp": "tensor_parallel_size", "dtype": "dtype", "seed": "seed",
                  "enable_prefix_caching": "enable_prefix_caching", "enforce_eager": "enforce_eager",
                  "generation_config": "generation_config"}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


#: The settings of a self-hosted model that cannot change what it answers: how many replicas, how
#: they are placed, restarted and fed, which environment they see. Everything else (weights, dtype,
#: seed, parallelism, context length, chat template, structured decoding, engine arguments) can.
#: The config hash (``backends/vllm/__init__.py`` registers it as the backend's operational fields) and the response cache's key
#: (:meth:`VLLMModelConfig.answer_identity`) both use exactly this split.
OPERATIONAL_FIELDS = ("replicas", "num_cpus", "env", "max_restarts", "request_retries", "restart_wait_s",
                      "max_concurrent_requests", "gpu_memory_utilization", "multi_node")


def is_secret_name(name: str) -> bool:
    """Whether ``name`` (an engine argument or an environment variable) names a secret."""
    words = re.split(r"[_\-.\s]+", _CAMEL.sub("_", str(name)).lower())
    return any(w in SECRET_WORDS for w in words)


def redacted(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as written down: the value of every secret-named key replaced by :data:`REDACTED`."""
    return {k: (REDACTED if is_secret_name(k) else v) for k, v in values.items()}


class VLLMModelConfig(BaseModel):
    """One self-hosted model: a pool of ``replicas`` Ray actors, each owning one vLLM async engine."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: str  # local HF model dir or a hub name (hub only where the cluster can reach it)
    served_name: str | None = None  # name in caches/results; default "vllm:<model dir basename>"
    # GPUs per replica. Below 1: a share of one GPU (several small models on one device; set
    # gpu_memory_utilization to the same share). 1 or more: whole GPUs = tensor_parallel_size.
    num_gpus: float = Field(0, ge=0)
    tensor_parallel_size: int | None = Field(None, ge=1)  # default: max(1, num_gpus)
    multi_node: bool = False  # tensor-parallel workers may span nodes (vLLM's Ray executor)
    num_cpus: float = Field(1.0, ge=0)  # Ray CPUs reserved per replica (the actor)
    max_model_len: int | None = Field(None, ge=16)  # default: the model's own context length
    dtype: str = "auto"
    seed: int = 0
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)  # default 0.9, or num_gpus if < 1
    enable_prefix_caching: bool = True  # every turn re-sends the same growing conversation
    enforce_eager: bool = False  # True on CPU / in tests: skips graph capture, starts faster
    replicas: int = Field(1, ge=1)
    max_restarts: int = Field(2, ge=0)  # Ray restarts of a dead engine actor
    request_retries: int = Field(2, ge=0)  # re-sends of a request whose replica died (seeded: same answer)
    restart_wait_s: float = Field(900, gt=0)  # how long a caller waits for a restarting replica
    max_concurrent_requests: int = Field(4096, ge=1)  # in-flight generate calls per actor
    # Parity with `vllm serve`: the model's generation_config.json supplies the sampling defaults
    # (top_p, top_k, repetition_penalty, ...) a request does not set; "vllm" = vLLM's neutral ones.
    generation_config: str = "auto"
    # Chat template options, passed to apply_chat_template (thinking off for reasoning models).
    chat_template_kwargs: dict[str, Any] = Field(default_factory=lambda: {"enable_thinking": False})
    # Structured decoding, by default exactly a plain `vllm serve`'s (VLLM_SERVE_STRUCTURED): the
    # same seeds then decode alike as a `vllm` entry and as an `http` entry against a server. They
    # did not while this entry forced compact JSON: the grammar is the one token-level difference
    # of the two paths, and it changes every answer (SmolLM2, the same 4 seeded requests: the
    # learner's messages differ, the extractor's answers take 1,426 / 1,336 tokens compact and
    # 1,777 / 1,429 with whitespace), so one path truncated in turn 1 where the other did not.
    # "compact" (no free whitespace; xgrammar when the backend is "auto") spends fewer tokens and
    # guards a model that loops on whitespace inside a JSON grammar: give its server the same
    # setting (serve_flags()).
    json_whitespace: Literal["compact", "any"] = "any"
    structured_backend: Literal["auto", "xgrammar", "guidance"] = "auto"
    env: dict[str, str] = Field(default_factory=dict)  # set in the actor before vLLM starts
    # Names of the driver's environment variables to hand to the engine (a hub token): the values
    # are read when the pool starts and travel only as the actor's constructor argument.
    secret_env: list[str] = Field(default_factory=list)
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)  # passed through to AsyncEngineArgs

    @model_validator(mode="after")
    def _check_gpus(self) -> "VLLMModelConfig":
        g = self.num_gpus
        if g > 1 and not float(g).is_integer():
            raise ValueError(f"num_gpus {g}: above 1 it must be a whole number (tensor-parallel workers hold whole GPUs)")
        if self.tensor_parallel_size and self.tensor_parallel_size > 1:
            if g < 1:
                raise ValueError("tensor_parallel_size > 1 needs num_gpus >= 1 (one whole GPU per worker)")
            if int(g) != self.tensor_parallel_size:
                raise ValueError(f"num_gpus {g} != tensor_parallel_size {self.tensor_parallel_size}: each worker holds one GPU")
        if self.multi_node and self.tp == 1:
            raise ValueError("multi_node needs tensor_parallel_size > 1")
        return self

    @field_serializer("env", "engine_kwargs")
    def _ser_secrets(self, values: dict[str, Any], info: SerializationInfo) -> dict[str, Any]:
        if isinstance(info.context, dict) and info.context.get("secrets"):
            return dict(values)
        return redacted(values)

    # ------------------------------------------------------------------ derived

    @property
    def name(self) -> str:
        return self.served_name or f"vllm:{os.path.basename(self.model.rstrip('/')) or self.model}"

    @property
    def tp(self) -> int:
        return self.tensor_parallel_size or max(1, int(self.num_gpus))

    @property
    def fractional(self) -> bool:
        return 0 < self.num_gpus < 1

    def secret_values(self) -> list[str]:
        """Values that must never be written anywhere (for tests and log scrubbing)."""
        vals = [v for k, v in self.env.items() if is_secret_name(k)]
        vals += [str(v) for k, v in self.engine_kwargs.items() if is_secret_name(k)]
        return [v for v in vals if v]

    def secret_names(self) -> list[str]:
        return sorted(list(self.secret_env) + [k for k in self.env if is_secret_name(k)]
                      + [f"engine_kwargs.{k}" for k in self.engine_kwargs if is_secret_name(k)])

    def engine_args(self) -> dict[str, Any]:
        """Keyword arguments for vLLM's ``AsyncEngineArgs`` (secrets included: actor only)."""
        args: dict[str, Any] = {arg: getattr(self, name) for name, arg in _ENGINE_ARG_OF.items()}
        compact = self.json_whitespace == "compact"
        backend = "xgrammar" if compact and self.structured_backend == "auto" else self.structured_backend  # vLLM: compact needs one
        args["structured_outputs_config"] = {"backend": backend, "disable_any_whitespace": compact}
        if self.served_name:
            args["served_model_name"] = self.served_name
        if self.num_gpus > 0:
            args["gpu_memory_utilization"] = self.gpu_memory_utilization or (self.num_gpus if self.fractional else 0.9)
        if self.tp > 1:
            args["distributed_executor_backend"] = "ray"  # workers in the actor's placement group
        if self.max_model_len is not None:
            args["max_model_len"] = self.max_model_len
        args.update(self.engine_kwargs)
        return args

    def serve_flags(self) -> list[str]:
        """The `vllm serve` flags that make an OpenAI endpoint sample like our actor (docs, smoke)."""
        a = self.engine_args()
        flags = [a["model"], "--dtype", str(a["dtype"]), "--seed", str(a["seed"]),
                 "--tensor-parallel-size", str(a["tensor_parallel_size"]),
                 "--generation-config", a["generation_config"],
                 "--structured-outputs-config", json.dumps(a["structured_outputs_config"], separators=(",", ":"))]
        if "max_model_len" in a:
            flags += ["--max-model-len", str(a["max_model_len"])]
        if self.chat_template_kwargs:
            flags += ["--default-chat-template-kwargs", json.dumps(self.chat_template_kwargs, separators=(",", ":"))]
        return flags

    def answer_identity(self) -> dict[str, Any]:
        """What besides the request decides an answer of this model (all but :data:`OPERATIONAL_FIELDS`;
        secret values redacted: a cache key needs no secret)."""
        return {"backend": "vllm", **self.model_dump(mode="json", exclude=set(OPERATIONAL_FIELDS))}

    def pool_key(self) -> str:
        """Stable id of everything that shapes an engine (not replica count or restart policy)."""
        blob = self.model_dump(mode="json", context=SECRETS_CONTEXT,
                               exclude={"replicas", "max_restarts", "request_retries", "restart_wait_s", "max_concurrent_requests"})
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:10]

    def actor_name(self, index: int) -> str:
        return f"vllm-{self.pool_key()}-{index}"

    def gpu_share(self) -> float:
        """GPUs one replica occupies (fractions for shared GPUs)."""
        return self.num_gpus if self.num_gpus < 1 else float(self.tp)

    def whole_gpus(self) -> int:
        return 0 if self.num_gpus < 1 else self.tp


__all__ = ["OPERATIONAL_FIELDS", "REDACTED", "SECRETS_CONTEXT", "SECRET_WORDS", "VLLMModelConfig", "VLLM_SERVE_STRUCTURED", "is_secret_name", "redacted"]
