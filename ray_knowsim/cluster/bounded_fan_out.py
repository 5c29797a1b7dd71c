"""The one bounded fan-out of Ray tasks, and the one check that the workers see the driver's
output directory.

:class:`BoundedFanOut` keeps at most ``window()`` tasks submitted (re-read every ``refresh_s``:
nodes join and leave) and hands back the finished ones as they finish, in whatever order that is,
each as a :class:`Finished` (its item, and its value or its error). What a failure does:

* ``fail_fast=True``: the first failed task's error is raised; nothing more is submitted and the
  tasks still in flight are ended, as when the fan-out is left (below);
* ``fail_fast=False``: the failure comes back as a ``Finished`` with ``error`` and the rest go on;
  the caller may :meth:`BoundedFanOut.stop` the fan-out (nothing more is submitted, the tasks in
  flight are cancelled, and ended by force after ``cancel_grace_s`` if they have not stopped);
* a fan-out left before its end (Ctrl-C, an exception in the caller's loop, ``break``) ends
  every task still in flight at once (a forced cancel): none runs on for a driver that is gone.

Workers write their results into the driver's output directory, so it must be on storage every
node mounts at the same path. :func:`check_shared_dir` writes a probe file there and reads it back
on every alive node (one zero-CPU task pinned to each, the driver's own included: a driver may
join a one-node cluster on another machine); a node that does not see it raises
:class:`SharedDirError`. A fan-out given ``shared_dir`` checks the nodes before its first task and
every node that joins while it runs. Between two of those checks a new node can already run a task
(an autoscaler adds nodes exactly when tasks wait), so the task side checks too:
:func:`require_visible` is called by every run shard and sweep piece before it writes, and refuses
unless it reads the manifest the driver wrote for this work — a node without the shared mount would
otherwise write a private copy nobody reads.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Generic, Iterable, Iterator, TypeVar

T = TypeVar("T")

#: seconds a cancelled task gets to stop by itself before its worker is ended
CANCEL_GRACE_S = 20.0
#: seconds the probe tasks of the shared-directory check may take in all
PROBE_TIMEOUT_S = 300.0


class SharedDirError(RuntimeError):
    """Some nodes of the cluster do not see the driver's output directory."""


@dataclass
class Finished(Generic[T]):
    """One task that ended: its item, and what it returned or raised."""

    item: T
    value: Any = None
    error: BaseException | None = None
    cancelled: bool = False  # it ended after the fan-out was stopped (its error is the cancel's)

    @property
    def ok(self) -> bool:
        return self.error is None


def _reads(path: str, token: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read() == token
    except OSError:
        return False


def _node_name(node: dict[str, Any]) -> str:
    return f"{node.get('NodeManagerAddress', '?')} (node {node['NodeID'][:12]})"


def check_shared_dir(directory: Path, *, what: str = "the output directory", skip: Collection[str] = ()) -> set[str]:
    """Raise :class:`SharedDirError` unless every alive CPU node of the cluster (those in ``skip``
    excepted: node ids already checked) reads the probe file the driver writes in
    ``directory/.tmp/``; return the ids of the nodes checked. The probe is removed either way."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0 and n["NodeID"] not in skip]
    if not nodes:
        return set()
    directory = Path(directory)
    token = secrets.token_hex(8)
    probe = directory / ".tmp" / f"probe-{token}"
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text(token, encoding="utf-8")
    task = ray.remote(num_cpus=0, max_retries=0)(_reads)
    try:
        refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(str(probe), token)
                for n in nodes]
        seen = ray.get(refs, timeout=PROBE_TIMEOUT_S)
    finally:
        probe.unlink(missing_ok=True)
    blind = [_node_name(n) for n, ok in zip(nodes, seen) if not ok]
    if blind:
        raise SharedDirError(f"{what} {directory} is not visible from {len(blind)} of {len(nodes)} node(s): {', '.join(blind)}; "
                             "workers write their results there, so it must be on storage every node mounts at the same "
                             "path (docs/cluster.md)")
    return {n["NodeID"] for n in nodes}


def require_visible(manifest: Path, key: str, expected: str, *, what: str, doc: str) -> None:
    """Raise :class:`SharedDirError` unless ``manifest`` (the driver's, written before any task)
    reads here with ``manifest[key] == expected``: the task side of the check (module docstring)."""
    try:
        found = json.loads(Path(manifest).read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        found = None
    if found != expected:
        raise SharedDirError(f"node {socket.gethostname()}: {manifest} is missing or belongs to other work; {what} must "
                             f"be on a filesystem every node mounts at the same path ({doc})")


class BoundedFanOut(Generic[T]):
    """Run ``submit(item)`` (which returns a Ray object ref) for every item, at most ``window()``
    in flight; iterate to get the finished tasks, a list at a time (empty when none finished
    within ``poll_s``, so the caller's loop can do its periodic work). See the module docstring."""

    def __init__(self, items: Iterable[T], submit: Callable[[T], Any], *, window: Callable[[], int],
                 refresh_s: float = 10.0, poll_s: float = 0.25, cancel_grace_s: float = CANCEL_GRACE_S,
                 fail_fast: bool = False, shared_dir: Path | None = None, shared_what: str = "the output directory",
                 checked_nodes: Collection[str] = ()) -> None:
        self._queue: deque[T] = deque(items)
        self._submit = submit
        self._window = window
        self._refresh_s, self._poll_s, self._grace_s = refresh_s, poll_s, cancel_grace_s
        self._fail_fast = fail_fast
        self._shared_dir, self._shared_what = shared_dir, shared_what
        self._checked: set[str] = set(checked_nodes)
        self._pending: dict[Any, T] = {}
        self._stopped_at: float | None = None
        self.submitted = 0

    @property
    def in_flight(self) -> list[T]:
        """The items whose tasks are submitted and not yet handed back."""
        return list(self._pending.values())

    @property
    def checked_nodes(self) -> set[str]:
        """The nodes found to see ``shared_dir`` (those given as checked included)."""
        return set(self._checked)

    @property
    def stopped(self) -> bool:
        return self._stopped_at is not None

    def stop(self) -> list[T]:
        """Submit nothing more and cancel the tasks in flight (they come back as ``cancelled``);
        returns the items that were never submitted."""
        left = list(self._queue)
        self._queue.clear()
        if self._stopped_at is None:
            self._cancel(force=False)
            self._stopped_at = time.monotonic()
        return left

    def _cancel(self, *, force: bool) -> None:
        import ray

        for ref in list(self._pending):
            try:
                ray.cancel(ref, force=force)
            except Exception:  # noqa: BLE001 - it ended meanwhile, or Ray is going away: nothing to cancel
                pass

    def _check_nodes(self) -> None:
        if self._shared_dir is not None:
            self._checked |= check_shared_dir(self._shared_dir, what=self._shared_what, skip=self._checked)

    def __iter__(self) -> Iterator[list[Finished[T]]]:
        import ray

        try:
            self._check_nodes()
            limit, limit_at = max(1, int(self._window())), time.monotonic()
            while self._queue or self._pending:
                if time.monotonic() - limit_at >= self._refresh_s:  # nodes may have joined or left
                    self._check_nodes()
                    limit, limit_at = max(1, int(self._window())), time.monotonic()
                while self._queue and len(self._pending) < limit:
                    item = self._queue.popleft()
                    self._pending[self._submit(item)] = item
                    self.submitted += 1
                if not self._pending:
                    continue
                ready, _ = ray.wait(list(self._pending), num_returns=len(self._pending), timeout=self._poll_s, fetch_local=False)
                done: list[Finished[T]] = []
                for ref in ready:
                    item = self._pending.pop(ref)
                    try:
                        done.append(Finished(item, ray.get(ref)))
                    except Exception as exc:  # noqa: BLE001 - one task's failure is the caller's to judge
                        if self._stopped_at is not None:
                            done.append(Finished(item, error=exc, cancelled=True))
                        elif self._fail_fast:
                            raise
                        else:
                            done.append(Finished(item, error=exc))
                yield done
                if self._stopped_at is not None and self._pending and time.monotonic() - self._stopped_at > self._grace_s:
                    self._cancel(force=True)  # a task that did not react to the cancel: end its worker
                    self._stopped_at = time.monotonic()
        except BaseException:  # a failure with fail_fast, Ctrl-C, the caller's exception or break: nothing runs on
            self._queue.clear()
            self._cancel(force=True)  # no grace: the driver is leaving (and a plain cancel does not stop a sleeping task)
            self._pending.clear()
            raise


__all__ = ["CANCEL_GRACE_S", "BoundedFanOut", "Finished", "SharedDirError", "check_shared_dir", "require_visible"]
