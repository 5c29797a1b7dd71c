"""Leases on shared actors (cluster/lease.py): an actor lives while some holder renews its lease,
ends a grace period after the last one lets go or goes silent."""

from __future__ import annotations

import threading
import time

from ray_knowsim.cluster.lease import LeaseHolder, Leases


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_actor_ends_only_after_the_last_lease_and_a_grace_period():
    clock = Clock()
    leases = Leases(grace_s=5, clock=clock)
    clock.t += 6
    assert leases.finished()  # a new actor nobody ever held: ends after the grace period
    leases.renew("run-a", ttl_s=60)
    leases.renew("run-b", ttl_s=60)
    assert not leases.release("run-a")  # run b still holds it
    clock.t += 50
    assert not leases.finished()
    assert leases.release("run-b")
    clock.t += 4
    assert not leases.finished()  # within the grace period: a run starting now finds it
    leases.renew("run-c", ttl_s=60)
    clock.t += 10
    assert not leases.finished() and leases.holders() == ["run-c"]


def test_a_holder_that_goes_silent_expires():
    clock = Clock()
    leases = Leases(grace_s=5, clock=clock)
    leases.renew("dead-driver", ttl_s=60)
    leases.renew("live-driver", ttl_s=60)
    for _ in range(6):  # only the live one renews
        clock.t += 15
        leases.renew("live-driver", ttl_s=60)
    assert leases.holders() == ["live-driver"] and leases.expired == ["dead-driver"]
    clock.t += 61
    assert leases.holders() == [] and not leases.finished()
    clock.t += 5
    assert leases.finished()


def test_a_lease_holder_renews_on_a_thread_and_releases_once():
    renewed, released = [], []
    beat = threading.Event()

    def renew(holder, ttl):
        renewed.append((holder, ttl))
        if len(renewed) >= 3:
            beat.set()

    holder = LeaseHolder(renew, released.append, label="run-x", ttl_s=7, every_s=0.02)
    assert renewed and renewed[0][0].startswith("run-x@") and renewed[0][1] == 7  # taken at once
    assert beat.wait(5)
    holder.release()
    holder.release()
    time.sleep(0.1)
    n = len(renewed)
    time.sleep(0.1)
    assert released == [holder.holder] and len(renewed) == n and not holder.active  # no beat after release


def test_a_failing_renewal_is_tried_again():
    calls = []

    def renew(holder, ttl):
        calls.append(holder)
        if len(calls) == 2:
            raise ConnectionError("actor restarting")

    holder = LeaseHolder(renew, lambda h: None, every_s=0.02)
    deadline = time.monotonic() + 5
    while len(calls) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    holder.release()
    assert len(calls) >= 4
