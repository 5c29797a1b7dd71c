"""The limiter without Ray: the budget's exact schedules on a fake clock, fair shares, and local
share clients (FIFO, wake-one, caps under concurrency, few round trips, crash recovery)."""

from __future__ import annotations

import asyncio
import pickle
import sys

import pytest
from pydantic import ValidationError

from ray_knowsim.backends.limiter import (
    BudgetService,
    LocalRateLimiter,
    RateBudget,
    RateLimits,
    ShareClient,
    fair_targets,
    make_limiter,
)
from ray_knowsim.backends.limiter.local import _InProcessServer
from tests.doubles.limiter_windows import assert_bucket_bound, max_in_window


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the budget (pure) --------------------------------------------------------------------------


def test_burst_of_200_never_exceeds_limit_in_any_60s_window():
    clock = FakeClock()
    budget = RateBudget(RateLimits(requests_per_minute=60, request_burst=5), clock)
    ready, waits = [], []
    for k in range(200):
        clock.now += 0.001 * (k % 3)  # all arrive within a fraction of a second
        [wait] = budget.reserve([0])
        waits.append(wait)
        ready.append(clock.now + wait)
    assert [w == 0 for w in waits[:6]] == [True] * 5 + [False]  # the burst goes out at once
    assert max_in_window(ready, 60.0) <= 60
    assert_bucket_bound(ready, capacity=5, rate=55 / 60)
    assert ready[-1] - ready[0] == pytest.approx(195 / (55 / 60), rel=0.01)  # and not needlessly slow


def test_block_reservations_follow_the_same_schedule():
    clock = FakeClock()
    one_by_one = RateBudget(RateLimits(requests_per_minute=600, request_burst=5), clock)
    block = RateBudget(RateLimits(requests_per_minute=600, request_burst=5), clock)
    assert block.reserve([0] * 30) == [one_by_one.reserve([0])[0] for _ in range(30)]


def test_default_burst_and_validation():
    budget = RateBudget(RateLimits(requests_per_minute=600), FakeClock())
    waits = budget.reserve([0] * 11)
    assert waits[:10] == [0.0] * 10 and waits[10] > 0  # default burst: one second's worth
    with pytest.raises(ValidationError, match="below"):
        RateLimits(requests_per_minute=60, request_burst=60)
    with pytest.raises(ValidationError, match="is not"):
        RateLimits(token_burst=10)
    assert not RateLimits().enabled and make_limiter("x", RateLimits()) is None


def test_tokens_are_reserved_then_settled():
    clock = FakeClock()
    budget = RateBudget(RateLimits(tokens_per_minute=6100, token_burst=100), clock)  # 100 burst, 100/s
    assert budget.reserve([100]) == [0.0]
    assert budget.reserve([50]) == [pytest.approx(0.5)]
    budget.settle(20 - 100)  # the first used 20: 80 come back
    assert budget.reserve([30]) == [0.0]
    budget.settle(150 - 50)  # the second used more than reserved: charged
    assert budget.reserve([1])[0] > 0


def test_oversized_request_waits_for_its_debt_and_pause_blocks():
    clock = FakeClock()
    assert RateBudget(RateLimits(tokens_per_minute=6100, token_burst=100), clock).reserve([300]) == [pytest.approx(2.0)]
    paused = RateBudget(RateLimits(requests_per_minute=600, request_burst=5), clock)
    paused.pause(3.0)
    assert paused.reserve([0])[0] >= 3.0


def test_fair_targets_are_max_min_fair():
    assert fair_targets(10, {"a": 100, "b": 100}) == {"a": 5, "b": 5}
    assert fair_targets(10, {"a": 2, "b": 100, "c": 100}) == {"a": 2, "b": 4, "c": 4}
    assert fair_targets(10, {"a": 100, "b": 100, "c": 100}) == {"a": 4, "b": 3, "c": 3}
    assert fair_targets(10, {"a": 3, "b": 0}) == {"a": 3, "b": 0}
    for demands in ({"a": 7, "b": 1, "c": 9}, {"x": 1}, {"a": 50, "b": 50, "c": 50, "d": 1}):
        t = fair_targets(10, demands)
        assert sum(t.values()) == min(10, sum(demands.values()))
        assert all(t[c] <= demands[c] for c in demands)


# --- share clients in one process ---------------------------------------------------------------


def _clients(limits: RateLimits, n: int) -> tuple[BudgetService, list[ShareClient]]:
    service = BudgetService(limits)
    server = _InProcessServer(service)
    return service, [ShareClient(server, limits) for _ in range(n)]


def test_in_flight_cap_holds_under_concurrency_and_every_request_runs():
    limits = RateLimits(max_in_flight=7)
    in_flight = peak = done = 0

    async def one(client: ShareClient) -> None:
        nonlocal in_flight, peak, done
        grant = await client.acquire()
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.002)
        in_flight -= 1
        client.release(grant)
        done += 1

    async def main():
        service, clients = _clients(limits, 4)  # four "workers" sharing one budget
        await asyncio.gather(*(one(clients[i % 4]) for i in range(400)))
        for c in clients:
            await c.aclose()
        return service.stats()

    stats = asyncio.run(main())
    assert done == 400 and peak == 7  # the cap is reached and never exceeded
    assert stats["held"] == 0  # every slot came back


def test_slots_are_served_fifo_and_each_release_wakes_one():
    limits = RateLimits(max_in_flight=1)
    order: list[int] = []

    async def main():
        _, [client] = _clients(limits, 1)
        first = await client.acquire()

        async def waiter(k: int) -> None:
            grant = await client.acquire()
            order.append(k)
            await asyncio.sleep(0)
            client.release(grant)

        tasks = [asyncio.create_task(waiter(k)) for k in range(30)]
        await asyncio.sleep(0.01)
        assert order == [] and len(client._waiters) == 30
        client.release(first)
        await asyncio.sleep(0)  # one loop iteration after the release: exactly one waiter woke
        woken = sum(f.done() for f in client._waiters) + (30 - len(client._waiters))
        assert woken == 1
        await asyncio.gather(*tasks)
        await client.aclose()

    asyncio.run(main())
    assert order == list(range(30))


def test_a_busy_client_costs_few_round_trips():
    limits = RateLimits(max_in_flight=10)

    async def main():
        _, [client] = _clients(limits, 1)

        async def one() -> None:
            grant = await client.acquire()
            await asyncio.sleep(0)
            client.release(grant)

        await asyncio.gather(*(one() for _ in range(2000)))
        trips = client.round_trips
        await client.aclose()
        return trips

    assert asyncio.run(main()) <= 20  # 2,000 requests, a handful of budget calls


def test_shares_rebalance_to_a_late_client():
    limits = RateLimits(max_in_flight=10, lease_timeout_s=8)  # heartbeat 1 s at most
    held_b: list[int] = []

    async def main():
        service, (a, b) = _clients(limits, 2)
        stop = asyncio.Event()

        async def worker(client: ShareClient, n: int) -> None:
            async def one() -> None:
                while not stop.is_set():
                    grant = await client.acquire()
                    await asyncio.sleep(0.005)
                    client.release(grant)

            await asyncio.gather(*(one() for _ in range(n)))

        ta = asyncio.create_task(worker(a, 50))
        await asyncio.sleep(0.2)
        assert a.held == 10  # alone, A holds everything
        tb = asyncio.create_task(worker(b, 50))
        for _ in range(20):
            await asyncio.sleep(0.05)
            held_b.append(b.in_use)
        stop.set()
        await asyncio.gather(ta, tb)
        await a.aclose()
        await b.aclose()
        return service.stats()

    stats = asyncio.run(main())
    assert max(held_b[-10:]) == 5 and min(held_b[-10:]) >= 4  # B got its fair half, and keeps it
    assert stats["held"] == 0


def test_a_dead_client_s_slots_are_reclaimed_after_the_lease():
    clock = FakeClock()
    limits = RateLimits(max_in_flight=2, lease_timeout_s=30)

    async def main():
        service = BudgetService(limits, clock)
        assert await service.request("dead", 2, 0, 0) == (2, 2)  # then it never calls again
        live = ShareClient(_InProcessServer(service), limits)
        waiting = asyncio.create_task(live.acquire())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        clock.now += 31
        live._server.set_demand(live.id, 1)  # any call lets the budget notice the dead client
        await asyncio.wait_for(service.request(live.id, 1, 0, 0), 1)
        grant = await asyncio.wait_for(waiting, 2.5)
        live.release(grant)
        await live.aclose()
        return service.stats()

    assert asyncio.run(main())["reclaimed"] == 2


def test_cancelled_waiters_and_loop_end_give_slots_back():
    limits = RateLimits(max_in_flight=2)
    lim = LocalRateLimiter(limits)

    async def holder():
        await lim.acquire()
        await lim.acquire()
        blocked = asyncio.create_task(lim.acquire())
        await asyncio.sleep(0.02)
        blocked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocked
        # the loop ends with both grants unreleased (a shard that crashed)

    asyncio.run(holder())
    assert lim.stats()["held"] == 0  # the ended loop's client gave everything back

    async def next_run():
        g = await asyncio.wait_for(lim.acquire(), 1)
        lim.release(g)
        await lim.aclose()

    asyncio.run(next_run())


def test_local_acquire_sleeps_the_granted_wait():
    clock = FakeClock()
    slept: list[float] = []

    async def fake_sleep(s: float) -> None:
        slept.append(s)
        clock.now += s

    async def main():
        lim = LocalRateLimiter(RateLimits(requests_per_minute=120, request_burst=1), clock=clock, sleep=fake_sleep)
        for _ in range(3):
            lim.release(await lim.acquire())
        await lim.aclose()

    asyncio.run(main())
    assert slept == [pytest.approx(60 / 119)] * 2


def test_rate_reservations_of_one_loop_iteration_travel_together():
    limits = RateLimits(requests_per_minute=6000, request_burst=50)

    async def main():
        lim = LocalRateLimiter(limits)
        grants = await asyncio.gather(*(lim.acquire() for _ in range(40)))
        for g in grants:
            lim.release(g)
        trips = lim.client().round_trips
        await lim.aclose()
        return trips

    assert asyncio.run(main()) == 1


def test_local_limiter_refuses_to_be_copied_to_another_process():
    with pytest.raises(TypeError, match="get_or_create_limiter"):
        pickle.dumps(LocalRateLimiter(RateLimits(requests_per_minute=10)))


def test_make_limiter_is_local_without_ray(monkeypatch):
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    lim = make_limiter("x", RateLimits(requests_per_minute=10))
    assert isinstance(lim, LocalRateLimiter)
    assert "ray" not in sys.modules  # deciding did not import Ray


def test_limiter_modules_below_the_actor_do_not_import_ray():
    import subprocess

    code = ("import sys; import ray_knowsim.backends.limiter.local, ray_knowsim.llm.http.client; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_idle_slots_linger_briefly_then_go_back():
    limits = RateLimits(max_in_flight=4)

    async def main():
        service, [client] = _clients(limits, 1)
        grants = [await client.acquire() for _ in range(3)]
        for g in grants:
            client.release(g)
        await asyncio.sleep(0)
        assert client.held == 3 and service.stats()["held"] == 3  # kept for the next round
        before = client.round_trips
        again = await client.acquire()  # ...which costs no round trip
        trips = client.round_trips - before
        client.release(again)
        await asyncio.sleep(client.linger_s * 3)
        assert client.held == 0 and service.stats()["held"] == 0  # then returned
        await client.aclose()
        return trips

    assert asyncio.run(main()) == 0


def test_waiting_clients_are_served_in_arrival_order():
    limits = RateLimits(max_in_flight=2)

    async def main():
        service = BudgetService(limits)
        assert await service.request("holder", 2, 0, 0) == (2, 2)
        first = asyncio.create_task(service.request("first", 1, 0, 5.0))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(service.request("second", 1, 0, 5.0))
        await asyncio.sleep(0.01)
        assert not first.done() and not second.done()
        service.give_back("holder", 1, 1)  # one slot frees: the earlier waiter gets it
        await asyncio.sleep(0.01)
        assert first.done() and first.result()[0] == 1 and not second.done()
        service.give_back("holder", 1, 0)
        assert (await asyncio.wait_for(second, 1))[0] == 1
        assert service.stats()["held"] == 2

    asyncio.run(main())
