"""Shared on purpose, for as long as someone uses it: leases on a cluster-lived actor.

Some actors serve every run on a cluster at once (a rate limiter holds ONE budget per endpoint
and credential: two runs against the same API must share its quota). Such an actor outlives the
run that created it (Ray ``lifetime="detached"``), so something must end it: each run holds a
lease, renewed by a heartbeat while the run lives and released when it ends; the actor ends
itself once no lease is left for ``grace_s``. A run that dies without releasing (its driver
SIGKILLed, its node gone) stops renewing, and its lease expires after ``ttl_s``.

* :class:`Leases`: the bookkeeping (pure, clock injected);
* :class:`LeaseHolder`: a process's lease, renewed on a daemon thread (no Ray import here: it
  calls the functions it is given).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
import weakref
from typing import Callable

log = logging.getLogger(__name__)
Clock = Callable[[], float]

LEASE_TTL_S = 60.0  # a holder not heard from for this long is gone
RENEW_EVERY_S = 10.0
# an actor without leases waits this long for a new one before it ends (a run starting right
# after another finds the same budget); RAY_KNOWSIM_LEASE_GRACE_S changes it (tests: seconds)
GRACE_S = float(os.environ.get("RAY_KNOWSIM_LEASE_GRACE_S", "30"))


class Leases:
    """Who holds a lease until when; whether the actor may end."""

    def __init__(self, grace_s: float = GRACE_S, clock: Clock = time.monotonic) -> None:
        self.grace_s = grace_s
        self._clock = clock
        self._until: dict[str, float] = {}
        self._empty_since = clock()  # a new actor waits ``grace_s`` for its first lease too
        self.expired: list[str] = []  # holders dropped for silence (for stats and logs)

    def renew(self, holder: str, ttl_s: float = LEASE_TTL_S) -> None:
        self._until[holder] = self._clock() + ttl_s

    def release(self, holder: str) -> bool:
        """Drop ``holder``'s lease; True when no lease is left."""
        if self._until.pop(holder, None) is not None and not self._until:
            self._empty_since = self._clock()
        return not self._until

    def expire(self) -> list[str]:
        now = self._clock()
        gone = [h for h, t in self._until.items() if t <= now]
        for h in gone:
            del self._until[h]
        if gone:
            self.expired += gone
            if not self._until:
                self._empty_since = now
        return gone

    def holders(self) -> list[str]:
        self.expire()
        return sorted(self._until)

    def finished(self) -> bool:
        """No lease, and none for ``grace_s``: nobody uses the actor any more."""
        self.expire()
        return not self._until and self._clock() - self._empty_since >= self.grace_s


def holder_id(label: str = "") -> str:
    """A lease holder's name: what holds it (a run id), where, and a random part (one process
    may hold several)."""
    return f"{label or 'driver'}@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class LeaseHolder:
    """This process's lease: ``renew(holder, ttl_s)`` now (raising if it cannot) and then every
    ``every_s`` on a daemon thread; :meth:`release` stops it and calls ``release(holder)``. A renewal
    that fails is logged and tried again at the next beat (the caller's ``renew`` is where a lost
    actor is found again). Released too when the holder is garbage-collected."""

    def __init__(self, renew: Callable[[str, float], None], release: Callable[[str], None], *, label: str = "",
                 ttl_s: float = LEASE_TTL_S, every_s: float = RENEW_EVERY_S) -> None:
        self.holder = holder_id(label)
        self._stop = threading.Event()
        renew(self.holder, ttl_s)
        thread = threading.Thread(target=_beat, args=(renew, self.holder, ttl_s, every_s, self._stop),
                                  name=f"lease {self.holder}", daemon=True)
        thread.start()
        self._finalizer = weakref.finalize(self, _end, self._stop, release, self.holder)

    @property
    def active(self) -> bool:
        return self._finalizer.alive

    def release(self) -> None:
        self._finalizer()


def _beat(renew: Callable[[str, float], None], holder: str, ttl_s: float, every_s: float, stop: threading.Event) -> None:
    while not stop.wait(every_s):
        try:
            renew(holder, ttl_s)
        except Exception as exc:  # noqa: BLE001 - the next beat tries again; expiry is the backstop
            if stop.is_set():
                return
            log.warning("lease %s not renewed (%s: %s); trying again in %.0f s", holder, type(exc).__name__, exc, every_s)


def _end(stop: threading.Event, release: Callable[[str], None], holder: str) -> None:
    stop.set()
    try:
        release(holder)
    except Exception as exc:  # noqa: BLE001 - Ray may be gone already; the lease then expires
        log.info("lease %s not released (%s: %s); it expires by itself", holder, type(exc).__name__, exc)


__all__ = ["GRACE_S", "LEASE_TTL_S", "LeaseHolder", "Leases", "RENEW_EVERY_S", "holder_id"]
