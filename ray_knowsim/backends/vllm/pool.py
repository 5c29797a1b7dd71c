"""A model's replicas on the cluster (driver side: start, wait, shut down) and the ChatModel the
shards use to reach them (:class:`VLLMActorModel`).

Routing is session-affine: a request goes to the replica chosen by rendezvous hashing of its
session (the part of ``request_id`` before ``#``), so every turn of a session lands where its
prefix is cached, and when a replica dies only that replica's sessions move.

A replica that dies (the actor, or the engine inside it: ``vllm_engine_dead``) is restarted by Ray
(``max_restarts``); callers wait for it (``restart_wait_s``) and re-send their requests, which are
seeded, so the answers are the ones an undisturbed run gets. A replica that stays dead is dropped
from this caller's pool and its sessions move to the others. Failures are per request
(``ChatResponse.error``), never an exception for the batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from typing import Any, Sequence

from ray_knowsim.backends.vllm.actor import VLLMEngineActor, error_dict
from ray_knowsim.backends.vllm.config import SECRETS_CONTEXT, VLLMModelConfig
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage

log = logging.getLogger(__name__)
NAMESPACE = "ray_knowsim"
RETRYABLE = ("vllm_engine_dead", "vllm_replica_died")


class NoReplicaError(RuntimeError):
    pass


def session_key(request_id: str) -> str:
    """The session part of a request id (``<session>#<turn>:<role>``)."""
    return request_id.split("#", 1)[0]


def pick_replica(key: str, live: Sequence[int]) -> int:
    """Rendezvous (highest-random-weight) hashing: stable per key, minimal moves when one dies."""
    if not live:
        raise NoReplicaError("no live replica")
    return max(live, key=lambda i: hashlib.blake2b(f"{key}\x1f{i}".encode(), digest_size=8).digest())


def request_dict(req: ChatRequest) -> dict[str, Any]:
    return {"messages": [dict(m) for m in req.messages], "temperature": req.temperature,
            "max_tokens": req.max_tokens, "seed": req.seed, "json_schema": req.json_schema,
            "request_id": req.request_id}


def to_response(d: dict[str, Any]) -> ChatResponse:
    """The actor's answer as a ChatResponse; ``cached_tokens`` (prompt tokens the engine served from
    its prefix cache, part of ``prompt_tokens``) become ``Usage.cached_prompt_tokens``, so a
    price's ``cached_input`` applies to them."""
    usage = Usage(d.get("prompt_tokens", 0), d.get("completion_tokens", 0), int(d.get("cached_tokens") or 0))
    return ChatResponse(text=d.get("text", ""), usage=usage, latency_s=d.get("latency_s", 0.0), error=d.get("error"),
                        finish_reason=d.get("finish_reason"))


def _actor_gone(exc: BaseException) -> bool:
    """The actor died under the call (it may be restarting)."""
    import ray.exceptions

    return isinstance(exc, ray.exceptions.RayActorError)


def _restarting(exc: BaseException) -> bool:
    """Ray answers calls to a restarting actor at once with ActorUnavailableError (no queueing)."""
    import ray.exceptions

    return isinstance(exc, ray.exceptions.ActorUnavailableError)


class VLLMActorModel:
    """ChatModel over a pool of :class:`VLLMEngineActor` handles: each request is one actor call
    (the engine batches concurrent requests continuously)."""

    def __init__(self, cfg: VLLMModelConfig, actors: Sequence[Any]):
        if not actors:
            raise ValueError(f"{cfg.name}: a pool needs at least one actor")
        self.cfg = cfg
        self.name = cfg.name
        self._actors = list(actors)
        self._dead: set[int] = set()
        self._probes: dict[int, asyncio.Future] = {}
        self.retried = 0  # requests re-sent after a replica died (this process)

    def __getstate__(self) -> dict[str, Any]:  # travels to shards without per-process state
        return {"cfg": self.cfg, "name": self.name, "_actors": self._actors}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._dead, self._probes, self.retried = set(), {}, 0

    @property
    def cache_identity(self) -> dict[str, Any]:
        """What besides the request decides the answer (for CachedModel keys)."""
        return self.cfg.answer_identity()

    @property
    def live(self) -> list[int]:
        return [i for i in range(len(self._actors)) if i not in self._dead]

    def replica_for(self, request_id: str) -> int:
        return pick_replica(session_key(request_id), self.live)

    async def generate(self, req: ChatRequest) -> ChatResponse:
        payload = request_dict(req)
        for attempt in range(self.cfg.request_retries + 1):
            try:
                idx = self.replica_for(req.request_id)
            except NoReplicaError:
                return to_response(error_dict("vllm_no_replica", f"every replica of {self.name} is dead"))
            try:
                d = await self._actors[idx].generate.remote(payload)
            except Exception as exc:  # noqa: BLE001 - becomes this request's error
                if not _actor_gone(exc):
                    return to_response(error_dict("vllm_request_failed", f"{type(exc).__name__}: {str(exc)[:300]}"))
                d = error_dict("vllm_replica_died", f"{type(exc).__name__}")
            code = (d.get("error") or "").split(":", 1)[0]
            if code not in RETRYABLE or attempt == self.cfg.request_retries:
                return to_response(d)
            self.retried += 1
            await self._wait_replica(idx)
        raise AssertionError("unreachable")

    async def _wait_replica(self, idx: int) -> None:
        """One probe per replica at a time: wait until it answers again (restarted) or mark it dead."""
        fut = self._probes.get(idx)
        if fut is None or fut.done():
            fut = self._probes[idx] = asyncio.ensure_future(self._probe(idx))
        await asyncio.shield(fut)

    async def _probe(self, idx: int) -> None:
        deadline = time.monotonic() + self.cfg.restart_wait_s
        gone = 0
        while time.monotonic() < deadline:
            try:
                await asyncio.wait_for(_awaitable(self._actors[idx].info.remote()),
                                       timeout=max(1.0, deadline - time.monotonic()))
                return  # answering again (restarted, fresh engine)
            except asyncio.TimeoutError:
                break
            except Exception as exc:  # noqa: BLE001
                # restarting (or its dying engine still answering): wait; died for good: 3 in a row
                gone = gone + 1 if _actor_gone(exc) and not _restarting(exc) else 0
                if gone >= 3:  # dead and not coming back (restarts used up)
                    break
                await asyncio.sleep(1.0)
        self._dead.add(idx)


async def _awaitable(ref: Any) -> Any:
    """An ObjectRef (or a test double's awaitable) as a coroutine ``wait_for`` can cancel."""
    return await ref


# --------------------------------------------------------------------------- driver side


class VLLMPool:
    """One model's replicas for ONE run: placement groups (tensor parallel), actors, shutdown.

    The engines belong to the run that started them: their names carry this pool's own token (two
    runs on one cluster with the same model get two pools; one run's shutdown never touches the
    other's), and the driver owns them, so they also end with it. A model served to several runs
    at once is a standing endpoint reached with the ``http`` backend (docs/cluster.md)."""

    actor_class: Any = VLLMEngineActor  # tests swap in an actor with a fake engine

    def __init__(self, cfg: VLLMModelConfig):
        import secrets

        self.cfg = cfg
        self.token = secrets.token_hex(4)  # this pool's (this run's) part of the actor names
        self.actors: list[Any] = []
        self._pgs: list[Any] = []

    def actor_name(self, index: int) -> str:
        """``vllm-<engine config>-<this pool>-<replica>``: listed by ``ray list actors`` under
        the namespace ``ray_knowsim``, never found by another run."""
        return f"{self.cfg.actor_name(index)}-{self.token}"

    def _options(self, index: int) -> dict[str, Any]:
        cfg = self.cfg
        opts: dict[str, Any] = dict(
            num_cpus=cfg.num_cpus, num_gpus=cfg.num_gpus if cfg.tp == 1 else 0,
            max_concurrency=cfg.max_concurrent_requests, name=self.actor_name(index), namespace=NAMESPACE,
            max_restarts=cfg.max_restarts, max_task_retries=0,
        )
        if cfg.tp > 1:
            from ray.util.placement_group import placement_group
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            # bundle 0 hosts the engine actor (Ray refuses an empty bundle), the others one GPU
            # worker each: vLLM's Ray executor finds them through the captured placement group
            bundles = [{"CPU": cfg.num_cpus or 0.01}] + [{"GPU": 1.0} for _ in range(cfg.tp)]
            pg = placement_group(bundles, strategy="PACK" if cfg.multi_node else "STRICT_PACK",
                                 name=f"{self.actor_name(index)}-pg")
            self._pgs.append(pg)
            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True)
        return opts

    def start(self) -> list[Any]:
        """Create the actors (returns at once; engines start in the background)."""
        import ray

        payload = self.cfg.model_dump(context=SECRETS_CONTEXT)  # constructor argument, never runtime_env
        missing = [n for n in self.cfg.secret_env if not os.environ.get(n)]
        if missing:
            raise RuntimeError(f"{self.cfg.name}: secret_env variables not set on the driver: {missing}")
        payload["env"] = {**payload["env"], **{n: os.environ[n] for n in self.cfg.secret_env}}
        cls = ray.remote(self.actor_class)
        self.actors = [cls.options(**self._options(i)).remote(payload) for i in range(self.cfg.replicas)]
        return self.actors

    def wait_ready(self, timeout_s: float = 900) -> list[dict[str, Any]]:
        import ray

        return ray.get([a.info.remote() for a in self.actors], timeout=timeout_s)

    def model(self) -> VLLMActorModel:
        return VLLMActorModel(self.cfg, self.actors)

    def shutdown(self, grace_s: float = 60) -> list[dict[str, Any]]:
        """Stop every engine (GPU memory released inside the actor), kill the actors without
        restart, remove their placement groups. Safe to call twice and on half-started pools."""
        import ray

        reports: list[dict[str, Any]] = []
        actors, self.actors = self.actors, []
        if actors:
            refs = [a.shutdown.remote() for a in actors]
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=grace_s)
            for r in done:
                try:
                    reports.append(ray.get(r))
                except Exception as exc:  # noqa: BLE001 - a dead replica has nothing to release
                    reports.append({"released": False, "error": type(exc).__name__})
            for a in actors:
                try:
                    ray.kill(a, no_restart=True)
                except Exception as exc:  # noqa: BLE001 - most often: the actor is already gone
                    log.warning("vLLM pool %s: could not kill a replica actor (%s: %s)", self.cfg.model, type(exc).__name__, exc)
        for pg in self._pgs:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(pg)
            except Exception as exc:  # noqa: BLE001 - the others are still removed
                log.warning("vLLM pool %s: could not remove a placement group (%s: %s)", self.cfg.model, type(exc).__name__, exc)
        self._pgs = []
        return reports


__all__ = ["NAMESPACE", "NoReplicaError", "VLLMActorModel", "VLLMPool", "pick_replica", "request_dict", "session_key", "to_response"]
