"""Ray steps that survive a lost node: what is idempotent is retried when the cluster lost a
process under it, and cluster-lived actors are placed where a lost worker node cannot take them.

A worker node that dies (a spot preemption, an OOM-killed raylet) takes its tasks and actors with
it. Ray re-runs lost shard tasks itself (``max_retries``); the steps after them are not tasks we
submit: a Ray Data read places its own actors (Parquet ``FooterReader``\\ s, spread over the nodes)
and a node that is dying but not yet declared dead still gets them. Those steps only read
committed files, so running them again is safe: :func:`retry_on_node_loss`.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_ATTEMPTS = 4
RETRY_WAIT_S = 5.0  # between attempts: Ray needs a while to declare a killed node dead


LOST = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "NodeDiedError", "ObjectLostError",
        "OwnerDiedError", "WorkerCrashedError", "LocalRayletDiedError", "ObjectFetchTimedOutError",
        "ObjectReconstructionFailedError", "RaySystemError")


def is_node_loss(exc: BaseException) -> bool:
    """Whether ``exc`` (or anything in its cause chain) says Ray lost a process or node under the
    step, as opposed to an error of our own code (a RayTaskError wrapping a Python exception).

    Three shapes are seen: a Ray exception of one of the ``LOST`` kinds; a failure Ray Data marks
    as its own or Ray Core's (raised ``from SystemException()``, never for an error of the
    functions it runs for us); and an ``UnserializableException`` whose original text names a
    ``LOST`` kind (a dead ``FooterReader`` actor surfaced that way)."""
    import ray.exceptions as rex

    lost = tuple(getattr(rex, name) for name in LOST if hasattr(rex, name))
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, lost) or type(exc).__name__ == "SystemException" and type(exc).__module__.startswith("ray.data"):
            return True
        if isinstance(exc, getattr(rex, "UnserializableException", ())) and any(n in str(exc) for n in LOST):
            return True
        cause = getattr(exc, "cause", None)  # a RayTaskError's original exception
        exc = cause if isinstance(cause, BaseException) and cause is not exc else (exc.__cause__ or exc.__context__)
    return False


def retry_on_node_loss(fn: Callable[..., T], *args: Any, what: str = "", attempts: int = RETRY_ATTEMPTS,
                       wait_s: float = RETRY_WAIT_S, warn: Callable[[str], None] | None = None, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, run again (up to ``attempts`` in all) when it failed because the
    cluster lost a process or node under it. Only for idempotent steps; any other error is raised
    at once, and so is the last loss."""
    for attempt in range(1, attempts + 1):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if attempt == attempts or not is_node_loss(exc):
                raise
            message = (f"{what or getattr(fn, '__name__', 'step')}: the cluster lost a process or node under it "
                       f"({type(exc).__name__}); running it again (attempt {attempt + 1} of {attempts})")
            (warn or log.warning)(message)
            time.sleep(wait_s * attempt)
    raise AssertionError("unreachable")


def on_head_node() -> dict[str, Any]:
    """Actor options that place a cluster-lived actor (rate limiters, shared-lifetime keepers) on
    the head node: worker nodes come and go (autoscaling, preemption), the head lives as long as
    the cluster, and a limiter that restarted elsewhere would forget every slot it had granted."""
    return {"resources": {"node:__internal_head__": 0.001}}


def on_this_node() -> dict[str, Any]:
    """Actor options that place an actor of this run (the progress board) on the driver's node,
    which outlives the run's worker nodes. Not soft: a soft affinity let Ray put the board on a
    worker node of a busy cluster (seen: it died with that node); the driver's node is alive as
    long as the run is."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)}


__all__ = ["LOST", "is_node_loss", "on_head_node", "on_this_node", "retry_on_node_loss"]
