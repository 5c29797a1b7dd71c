"""Self-hosted models: a pool of Ray actors, each owning one ``vllm.LLM`` engine.

Why actors: an engine takes ~30 s and GBs to start, so it must outlive a shard and be shared by
all shards of a run. The pool's actors are *named* (``get_if_exists``), so the driver and every
shard task reach the same engines by calling :func:`get_or_create_vllm_pool` with the same config.

Why whole batches: a shard sends all its live sessions' requests for a role in one call; the
actor runs them through one ``LLM.chat`` (continuous batching inside vLLM). Batches that arrive
from several shards while the engine is busy are merged into the next engine call.

vLLM and Ray are imported lazily (vLLM only inside the actor), so this module imports anywhere:
configs can be validated on machines without vLLM, and layers below engine/ stay Ray-free.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ray_knowsim.model.chat import ChatRequest, ChatResponse, Usage

NAMESPACE = "ray_knowsim"


class VLLMModelConfig(BaseModel):
    """How to start one engine and how many replicas to run (one actor each)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: str  # local HF model dir or a hub name (hub only where the cluster can reach it)
    served_name: str | None = None  # name in caches/results; default "vllm:<model dir basename>"
    num_gpus: int = Field(0, ge=0)  # per replica; 0 = CPU build of vLLM
    tensor_parallel_size: int | None = Field(None, ge=1)  # default: max(1, num_gpus)
    num_cpus: float = Field(1.0, ge=0)  # Ray CPUs reserved per replica
    max_model_len: int | None = Field(None, ge=16)
    dtype: str = "auto"
    seed: int = 0
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    enable_prefix_caching: bool = True  # every turn re-sends the same growing conversation
    enforce_eager: bool = False  # True on CPU / in tests: skips graph capture, starts faster
    replicas: int = Field(1, ge=1)
    lifetime: str | None = None  # None: actors die with their creator; "detached": until killed
    max_batch_requests: int = Field(4096, ge=1)  # cap on requests merged into one engine call
    env: dict[str, str] = Field(default_factory=dict)  # actor env, e.g. VLLM_CPU_KVCACHE_SPACE
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)  # passed through to vllm.LLM

    @property
    def name(self) -> str:
        return self.served_name or f"vllm:{os.path.basename(self.model.rstrip('/')) or self.model}"

    @property
    def tp(self) -> int:
        return self.tensor_parallel_size or max(1, self.num_gpus)

    def engine_args(self) -> dict[str, Any]:
        """Keyword arguments for ``vllm.LLM``."""
        args: dict[str, Any] = dict(
            model=self.model,
            tensor_parallel_size=self.tp,
            dtype=self.dtype,
            seed=self.seed,
            enable_prefix_caching=self.enable_prefix_caching,
            enforce_eager=self.enforce_eager,
        )
        if self.num_gpus > 0:
            args["gpu_memory_utilization"] = self.gpu_memory_utilization
        if self.max_model_len is not None:
            args["max_model_len"] = self.max_model_len
        args.update(self.engine_kwargs)
        return args

    def pool_key(self) -> str:
        """Stable id of everything that shapes an engine (not the replica count)."""
        blob = self.model_dump(exclude={"replicas", "lifetime", "max_batch_requests"})
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:10]

    def actor_name(self, index: int) -> str:
        return f"vllm-{self.pool_key()}-{index}"


# --------------------------------------------------------------------------- inside the actor


def _sampling_params(req: dict[str, Any]) -> Any:
    """One request's SamplingParams, with JSON-schema-constrained decoding when asked.

    vLLM >= 0.11 takes ``structured_outputs=StructuredOutputsParams(json=...)``; older releases
    take ``guided_decoding=GuidedDecodingParams(json=...)``.
    """
    from vllm import SamplingParams

    kwargs: dict[str, Any] = dict(
        temperature=req["temperature"], max_tokens=req["max_tokens"], seed=req["seed"]
    )
    schema = req.get("json_schema")
    if schema is not None:
        try:
            from vllm.sampling_params import StructuredOutputsParams

            kwargs["structured_outputs"] = StructuredOutputsParams(json=schema)
        except ImportError:  # pragma: no cover - older vLLM
            from vllm.sampling_params import GuidedDecodingParams

            kwargs["guided_decoding"] = GuidedDecodingParams(json=schema)
    return SamplingParams(**kwargs)


@dataclass
class _Waiting:
    """One caller's batch waiting for an engine call."""

    requests: list[dict[str, Any]]
    results: list[dict[str, Any]] | None = None
    done: threading.Event = field(default_factory=threading.Event)


class VLLMEngineActor:
    """Owns one ``vllm.LLM``. Run as a threaded Ray actor (``max_concurrency`` > 1): callers'
    threads queue their batches, and whichever thread gets the engine runs everything queued in
    one ``LLM.chat`` call (group commit), so concurrent shards share a continuous batch."""

    def __init__(self, cfg: dict[str, Any], _engine: Any = None, _make_params: Any = None):
        """``_engine`` and ``_make_params`` replace vLLM in unit tests (an object with ``.chat``,
        a function from a request dict to its sampling params)."""
        self.cfg = VLLMModelConfig.model_validate(cfg)
        for k, v in self.cfg.env.items():  # before vLLM reads its env
            os.environ.setdefault(k, v)
        t = time.perf_counter()
        if _engine is None:
            from vllm import LLM

            _engine = LLM(**self.cfg.engine_args())
        self._llm = _engine
        self._make_params = _make_params or _sampling_params
        self.startup_s = time.perf_counter() - t
        self._queue: list[_Waiting] = []
        self._queue_lock = threading.Lock()
        self._engine_lock = threading.Lock()
        self._pending = 0  # requests queued or running: the pool's load signal
        self._served = 0
        self._engine_calls = 0

    def info(self) -> dict[str, Any]:
        return {
            "name": self.cfg.name,
            "startup_s": self.startup_s,
            "pending": self._pending,
            "served": self._served,
            "engine_calls": self._engine_calls,
        }

    def load(self) -> int:
        return self._pending

    def shutdown(self) -> None:
        """Stop the engine's helper processes (engine core, workers). ``ray.kill`` alone
        SIGKILLs the actor and can leave them orphaned."""
        engine = getattr(getattr(self._llm, "llm_engine", None), "engine_core", None)
        if engine is not None and hasattr(engine, "shutdown"):
            engine.shutdown()

    def generate(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Answer a batch (plain dicts in, plain dicts out, same order)."""
        mine = _Waiting(requests)
        with self._queue_lock:
            self._queue.append(mine)
            self._pending += len(requests)
        while not mine.done.is_set():
            with self._engine_lock:
                if mine.done.is_set():  # another thread ran our batch meanwhile
                    break
                with self._queue_lock:
                    taken, size = [], 0
                    while self._queue and (not taken or size + len(self._queue[0].requests)
                                           <= self.cfg.max_batch_requests):
                        w = self._queue.pop(0)
                        taken.append(w)
                        size += len(w.requests)
                flat = [r for w in taken for r in w.requests]
                try:
                    outs = self._run(flat)
                except BaseException as exc:  # never leave a waiter hanging
                    outs = [_error_dict(exc)] * len(flat)
                pos = 0
                for w in taken:
                    w.results = outs[pos: pos + len(w.requests)]
                    pos += len(w.requests)
                    w.done.set()
                with self._queue_lock:
                    self._pending -= len(flat)
                    self._served += len(flat)
        assert mine.results is not None
        return mine.results

    def _run(self, reqs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One engine call; if vLLM rejects the batch (a prompt too long, a bad schema), retry
        the requests one by one so only the culprits fail."""
        if not reqs:
            return []
        self._engine_calls += 1
        t = time.perf_counter()
        try:
            outs = self._chat(reqs)
        except Exception:
            if len(reqs) == 1:
                raise
            return [self._run_one(r) for r in reqs]
        latency = time.perf_counter() - t
        return [_output_dict(o, latency) for o in outs]

    def _run_one(self, req: dict[str, Any]) -> dict[str, Any]:
        t = time.perf_counter()
        try:
            (out,) = self._chat([req])
        except Exception as exc:
            return _error_dict(exc)
        return _output_dict(out, time.perf_counter() - t)

    def _chat(self, reqs: list[dict[str, Any]]) -> list[Any]:
        return self._llm.chat(
            [r["messages"] for r in reqs],
            sampling_params=[self._make_params(r) for r in reqs],
            use_tqdm=False,
            add_generation_prompt=True,
        )


def _output_dict(out: Any, latency: float) -> dict[str, Any]:
    comp = out.outputs[0]
    return {
        "text": comp.text,
        "prompt_tokens": len(out.prompt_token_ids or ()),
        "completion_tokens": len(comp.token_ids or ()),
        "finish_reason": comp.finish_reason,
        "latency_s": latency,
        "error": None,
    }


def _error_dict(exc: BaseException) -> dict[str, Any]:
    msg = f"{type(exc).__name__}: {exc}"
    return {"text": "", "error": msg[:500], "prompt_tokens": 0, "completion_tokens": 0,
            "finish_reason": None, "latency_s": 0.0}


# --------------------------------------------------------------------------- the pool (client)


def _remote_actor_class(cfg: VLLMModelConfig, index: int) -> Any:
    import ray

    runtime_env = {"env_vars": dict(cfg.env)} if cfg.env else None
    opts: dict[str, Any] = dict(
        num_cpus=cfg.num_cpus,
        num_gpus=cfg.num_gpus,
        max_concurrency=64,  # threads for queued batches + load()/info() while the engine runs
        name=cfg.actor_name(index),
        namespace=NAMESPACE,
        get_if_exists=True,
        max_restarts=0,
    )
    if cfg.lifetime:
        opts["lifetime"] = cfg.lifetime
    if runtime_env:
        opts["runtime_env"] = runtime_env
    return ray.remote(VLLMEngineActor).options(**opts)


def get_or_create_vllm_pool(model_cfg: VLLMModelConfig, replicas: int | None = None) -> list[Any]:
    """Handles of the pool's named actors, creating missing ones. Every caller with the same
    config (driver or shard task) gets the same engines. Creation returns at once; the engines
    start in the background and calls queue until they are up (see :func:`wait_pool_ready`).

    Create the pool from the driver first: a non-detached actor dies with the process that made it.
    """
    n = replicas or model_cfg.replicas
    payload = model_cfg.model_dump()
    return [_remote_actor_class(model_cfg, i).remote(payload) for i in range(n)]


def wait_pool_ready(actors: Sequence[Any], timeout_s: float = 600) -> list[dict[str, Any]]:
    """Block until every engine is up; returns their info (raises if one failed to start)."""
    import ray

    return ray.get([a.info.remote() for a in actors], timeout=timeout_s)


def kill_vllm_pool(model_cfg: VLLMModelConfig, replicas: int | None = None,
                   grace_s: float = 60) -> int:
    """Shut the pool's engines down and kill their actors (detached ones live until this);
    returns how many actors were found."""
    import ray

    actors = []
    for i in range(replicas or model_cfg.replicas):
        try:
            actors.append(ray.get_actor(model_cfg.actor_name(i), namespace=NAMESPACE))
        except ValueError:
            continue
    if actors:
        ray.wait([a.shutdown.remote() for a in actors], num_returns=len(actors), timeout=grace_s)
    for a in actors:
        ray.kill(a)
    return len(actors)


def _request_dict(req: ChatRequest) -> dict[str, Any]:
    return {
        "messages": [dict(m) for m in req.messages],
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "seed": req.seed,
        "json_schema": req.json_schema,
    }


def _response(d: dict[str, Any]) -> ChatResponse:
    return ChatResponse(
        text=d.get("text", ""),
        usage=Usage(d.get("prompt_tokens", 0), d.get("completion_tokens", 0)),
        latency_s=d.get("latency_s", 0.0),
        error=d.get("error"),
        finish_reason=d.get("finish_reason"),
    )


class VLLMActorModel:
    """ChatModel over a pool of :class:`VLLMEngineActor`.

    A batch is split into at most one contiguous chunk per replica (chunks of at least
    ``min_chunk`` requests), and chunks go to the least-loaded replicas (ties broken round-robin).
    An actor that dies fails only its chunk's requests (``ChatResponse.error``).
    """

    def __init__(self, cfg: VLLMModelConfig, actors: Sequence[Any] | None = None,
                 min_chunk: int = 8):
        self.cfg = cfg
        self.name = cfg.name
        self._actors = list(actors) if actors is not None else None
        self._min_chunk = max(1, min_chunk)
        self._rr = itertools.count()

    @property
    def actors(self) -> list[Any]:
        if self._actors is None:
            self._actors = get_or_create_vllm_pool(self.cfg)
        return self._actors

    async def _order_by_load(self) -> list[Any]:
        actors = self.actors
        start = next(self._rr) % len(actors)
        rotated = actors[start:] + actors[:start]
        if len(rotated) == 1:
            return rotated
        loads = await asyncio.gather(*(a.load.remote() for a in rotated), return_exceptions=True)
        key = [ld if isinstance(ld, int) else float("inf") for ld in loads]
        return [a for _, _, a in sorted(zip(key, range(len(rotated)), rotated))]

    async def complete(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        if not requests:
            return []
        payload = [_request_dict(r) for r in requests]
        actors = await self._order_by_load()
        n_chunks = max(1, min(len(actors), len(payload) // self._min_chunk))
        bounds = [round(i * len(payload) / n_chunks) for i in range(n_chunks + 1)]
        chunks = [payload[bounds[i]: bounds[i + 1]] for i in range(n_chunks)]
        results = await asyncio.gather(
            *(a.generate.remote(c) for a, c in zip(actors, chunks)), return_exceptions=True
        )
        out: list[ChatResponse] = []
        for chunk, res in zip(chunks, results):
            if isinstance(res, BaseException):
                err = _error_dict(res)
                out.extend(_response(err) for _ in chunk)
            else:
                out.extend(_response(d) for d in res)
        return out
