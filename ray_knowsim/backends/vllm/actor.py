"""The engine actor: one vLLM async engine (``vllm.v1.engine.async_llm.AsyncLLM``) per Ray actor.

Every request is its own ``generate`` call (an async actor method), so requests from every shard
and every replica's caller join vLLM's continuous batch as they arrive and leave it when they
finish: nothing waits for a batch's longest generation, and no batch is assembled here.

A request that cannot run fails alone, with a named error, before it reaches the engine:

* ``vllm_chat_template_error``: the model's chat template rejects the messages;
* ``vllm_prompt_too_long``: the rendered prompt (counted with the engine's tokenizer) leaves no
  room for one output token within ``max_model_len``;
* ``vllm_request_failed``: the engine rejected this request (a bad schema, ...);
* ``vllm_engine_dead``: the engine process died (a CUDA error, the CPU build's seeded-sampling
  crash). The actor then exits so Ray restarts it (``max_restarts``); callers re-send.

Sampling parity with ``vllm serve``: a field the request does not set (top_p, top_k, min_p,
repetition/presence/frequency penalties) takes the engine's ``get_diff_sampling_param()`` value
(the model's generation_config.json unless ``generation_config: vllm``), else OpenAI's default;
``max_tokens`` is capped at what the context window leaves, exactly as the server does.

vLLM is imported only inside the actor process (``VLLMEngine``); the logic here runs against any
object with the :class:`Engine` shape, which is how the tests drive it without vLLM.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from typing import Any, AsyncIterator, Protocol

from ray_knowsim.backends.vllm.config import VLLMModelConfig

# What `vllm serve` falls back to when neither the request nor the generation config sets a field
# (ChatCompletionRequest._DEFAULT_SAMPLING_PARAMS).
OPENAI_DEFAULTS: dict[str, float] = {
    "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
    "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
}
REQUEST_FIELDS = ("temperature",)  # sampling fields our ChatRequest sets explicitly


class EngineDead(RuntimeError):
    """The engine is gone; every later request fails until the actor restarts."""


class Engine(Protocol):
    """What the actor needs from an engine (real: :class:`VLLMEngine`; tests: a fake)."""

    max_model_len: int
    default_sampling: dict[str, Any]

    def render(self, messages: list[dict[str, str]], chat_template_kwargs: dict[str, Any]) -> list[int]: ...

    def generate(self, prompt_ids: list[int], params: dict[str, Any], request_id: str) -> AsyncIterator[dict[str, Any]]: ...

    def shutdown(self) -> None: ...


def sampling_fields(req: dict[str, Any], defaults: dict[str, Any], n_prompt: int, max_model_len: int) -> dict[str, Any]:
    """The sampling parameters `vllm serve` would use for this request (see module docstring)."""
    fields = {name: (req[name] if name in REQUEST_FIELDS and req.get(name) is not None else defaults.get(name, default))
              for name, default in OPENAI_DEFAULTS.items()}
    wanted = req.get("max_tokens")
    if wanted is None:
        wanted = defaults.get("max_tokens")
    fields["max_tokens"] = min(v for v in (max_model_len - n_prompt, wanted) if v is not None)
    fields["seed"] = req.get("seed")
    fields["json_schema"] = req.get("json_schema")
    return fields


def error_dict(code: str, detail: str = "") -> dict[str, Any]:
    msg = f"{code}: {detail}" if detail else code
    return {"text": "", "error": msg[:500], "prompt_tokens": 0, "completion_tokens": 0,
            "finish_reason": None, "latency_s": 0.0}


class VLLMEngineActor:
    """Owns one engine. Run as an async Ray actor (``max_concurrency`` = max_concurrent_requests)."""

    def __init__(self, cfg: dict[str, Any], _engine: Engine | None = None):
        self.cfg = VLLMModelConfig.model_validate(cfg)
        for k, v in self.cfg.env.items():  # before vLLM reads its environment (values never logged)
            os.environ[k] = v
        t = time.perf_counter()
        self._engine: Engine | None = _engine if _engine is not None else VLLMEngine(self.cfg)
        self.startup_s = time.perf_counter() - t
        self._pending = 0
        self._served = 0
        self._failed: dict[str, int] = {}
        self._dead: str | None = None
        self._seq = 0
        self._exit = os._exit  # how the actor leaves when its engine died (tests replace it)

    # ------------------------------------------------------------------ control

    async def info(self) -> dict[str, Any]:
        """Also the readiness probe: raises while the engine is dead (the actor is about to exit)."""
        if self._dead is not None:
            raise EngineDead(self._dead)
        e = self._engine
        return {"name": self.cfg.name, "startup_s": self.startup_s, "pending": self._pending,
                "served": self._served, "failed": dict(self._failed), "pid": os.getpid(),
                "max_model_len": e.max_model_len if e else None,
                "default_sampling": dict(e.default_sampling) if e else None}

    async def load(self) -> int:
        return self._pending

    async def shutdown(self) -> dict[str, Any]:
        """Stop the engine (its processes, its GPU memory); the actor is killed right after."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.shutdown()
        del engine
        gc.collect()
        return {"released": True, **_gpu_memory()}

    # ------------------------------------------------------------------ requests

    async def generate(self, req: dict[str, Any]) -> dict[str, Any]:
        """Answer one request (a plain dict in, a plain dict out; failures are error dicts)."""
        self._pending += 1
        try:
            out = await self._generate(req)
        finally:
            self._pending -= 1
        if out["error"]:
            code = out["error"].split(":", 1)[0]
            self._failed[code] = self._failed.get(code, 0) + 1
        else:
            self._served += 1
        return out

    async def _generate(self, req: dict[str, Any]) -> dict[str, Any]:
        if self._dead is not None or self._engine is None:
            return error_dict("vllm_engine_dead", self._dead or "engine shut down")
        engine = self._engine
        t = time.perf_counter()
        try:
            ids = engine.render(req["messages"], self.cfg.chat_template_kwargs)
        except Exception as exc:  # noqa: BLE001 - a template error is this request's alone
            return error_dict("vllm_chat_template_error", f"{type(exc).__name__}: {exc}")
        n = len(ids)
        if n >= engine.max_model_len:
            return error_dict("vllm_prompt_too_long", f"{n} prompt tokens, max_model_len {engine.max_model_len}")
        params = sampling_fields(req, engine.default_sampling, n, engine.max_model_len)
        self._seq += 1
        rid = f"{req.get('request_id') or 'req'}~{os.getpid()}.{self._seq}"  # unique inside this engine
        final = None
        try:
            async for out in engine.generate(ids, params, rid):
                final = out
        except EngineDead as exc:
            return self._engine_died(str(exc))
        except Exception as exc:  # noqa: BLE001
            if _is_engine_dead(exc):
                return self._engine_died(f"{type(exc).__name__}: {exc}")
            return error_dict("vllm_request_failed", f"{type(exc).__name__}: {exc}")
        if final is None:
            return error_dict("vllm_request_failed", "the engine returned no output")
        return {"text": final["text"], "prompt_tokens": n, "completion_tokens": final["completion_tokens"],
                "finish_reason": final["finish_reason"], "latency_s": time.perf_counter() - t, "error": None,
                "cached_tokens": final.get("cached_tokens", 0)}  # prompt tokens served from the prefix cache

    def _engine_died(self, why: str) -> dict[str, Any]:
        if self._dead is None:
            self._dead = why[:300]
            # exit (not a clean exit_actor) so Ray restarts this actor with a fresh engine
            asyncio.get_running_loop().call_later(0.5, self._exit, 1)
        return error_dict("vllm_engine_dead", self._dead)


def _is_engine_dead(exc: BaseException) -> bool:
    return type(exc).__name__ in {"EngineDeadError", "EngineGenerateError"} and "dead" in (type(exc).__name__ + str(exc)).lower()


def _gpu_memory() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    return {"gpu_free_bytes": int(free), "gpu_total_bytes": int(total)}


class VLLMEngine:
    """The real engine: ``AsyncLLM`` from ``AsyncEngineArgs``; prompts rendered and counted with
    the engine's own tokenizer and sent as token ids (what is checked is what runs)."""

    def __init__(self, cfg: VLLMModelConfig):
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self._llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**cfg.engine_args()))
        self._tok = self._llm.get_tokenizer()
        self.max_model_len = int(self._llm.model_config.max_model_len)
        self.default_sampling = dict(self._llm.model_config.get_diff_sampling_param())

    def render(self, messages: list[dict[str, str]], chat_template_kwargs: dict[str, Any]) -> list[int]:
        text = self._tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **chat_template_kwargs)
        return list(self._tok.encode(text, add_special_tokens=False))

    async def generate(self, prompt_ids: list[int], params: dict[str, Any], request_id: str) -> AsyncIterator[dict[str, Any]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams
        from vllm.v1.engine.exceptions import EngineDeadError

        p = dict(params)
        schema = p.pop("json_schema", None)
        sp = SamplingParams(**p, output_kind=RequestOutputKind.FINAL_ONLY,
                            structured_outputs=StructuredOutputsParams(json=schema) if schema is not None else None)
        try:
            async for out in self._llm.generate(TokensPrompt(prompt_token_ids=prompt_ids), sp, request_id):
                c = out.outputs[0]
                yield {"text": c.text, "completion_tokens": len(c.token_ids or ()), "finish_reason": c.finish_reason,
                       "cached_tokens": int(getattr(out, "num_cached_tokens", 0) or 0)}
        except EngineDeadError as exc:
            raise EngineDead(f"EngineDeadError: {exc}") from exc

    def shutdown(self) -> None:
        self._llm.shutdown()


__all__ = ["Engine", "EngineDead", "OPENAI_DEFAULTS", "VLLMEngine", "VLLMEngineActor", "error_dict", "sampling_fields"]
