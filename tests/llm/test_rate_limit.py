"""Token-bucket limiter: exact schedules on a fake clock, in-flight slots, and the shared Ray actor."""

from __future__ import annotations

import asyncio
import pickle
import sys
import time

import pytest
from pydantic import ValidationError

from ray_knowsim.llm.rate_limit import (
    LimiterCore,
    LocalRateLimiter,
    RateLimits,
    get_or_create_limiter,
    make_limiter,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    best, j = 0, 0
    for i in range(len(times)):
        while times[i] - times[j] >= window:
            j += 1
        best = max(best, i - j + 1)
    return best


def assert_bucket_bound(times: list[float], capacity: float, rate: float, slack_s: float = 0.0) -> None:
    """Every window [t_i, t_j] holds at most capacity + rate * (t_j - t_i + slack) grants."""
    times = sorted(times)
    for i in range(len(times)):
        for j in range(i, len(times)):
            allowed = capacity + rate * (times[j] - times[i] + slack_s) + 1e-9
            assert j - i + 1 <= allowed, (i, j, times[i], times[j])


def test_burst_of_200_never_exceeds_limit_in_any_60s_window():
    clock = FakeClock()
    core = LimiterCore(RateLimits(requests_per_minute=60, request_burst=5), clock)
    grants = []
    for k in range(200):
        clock.now += 0.001 * (k % 3)  # all arrive within a fraction of a second
        grants.append(core.grant())
    ready = [g.ready_at for g in grants]
    assert [g.wait_s == 0 for g in grants[:6]] == [True] * 5 + [False]  # the burst goes out at once
    assert max_in_window(ready, 60.0) <= 60
    assert_bucket_bound(ready, capacity=5, rate=55 / 60)
    # and the limiter is not needlessly slow: 200 grants take (200 - 5) / rate seconds
    assert ready[-1] - ready[0] == pytest.approx(195 / (55 / 60), rel=0.01)


def test_default_burst_and_validation():
    core = LimiterCore(RateLimits(requests_per_minute=600), FakeClock())
    waits = [core.grant().wait_s for _ in range(11)]
    assert waits[:10] == [0.0] * 10 and waits[10] > 0  # default burst: one second's worth
    with pytest.raises(ValidationError, match="below"):
        RateLimits(requests_per_minute=60, request_burst=60)
    with pytest.raises(ValidationError, match="is not"):
        RateLimits(token_burst=10)
    assert not RateLimits().enabled and make_limiter("x", RateLimits()) is None


def test_tokens_are_reserved_then_settled():
    clock = FakeClock()
    core = LimiterCore(RateLimits(tokens_per_minute=6100, token_burst=100), clock)  # 100 burst, 100/s
    g1 = core.grant(tokens=100)
    assert g1.wait_s == 0 and core.in_flight == 1
    g2 = core.grant(tokens=50)
    assert g2.wait_s == pytest.approx(0.5)
    core.release(g1.lease_id, tokens_used=20)  # 80 unused tokens come back
    g3 = core.grant(tokens=30)
    assert g3.wait_s == 0
    core.release(g2.lease_id, tokens_used=150)  # used more than reserved: charged
    assert core.grant(tokens=1).wait_s > 0


def test_oversized_request_waits_for_its_debt():
    clock = FakeClock()
    core = LimiterCore(RateLimits(tokens_per_minute=6100, token_burst=100), clock)
    assert core.grant(tokens=300).wait_s == pytest.approx(2.0)


def test_pause_blocks_new_grants():
    clock = FakeClock()
    core = LimiterCore(RateLimits(requests_per_minute=600, request_burst=5), clock)
    core.pause(3.0)
    assert core.grant().wait_s >= 3.0


def test_in_flight_slots_and_lease_expiry():
    clock = FakeClock()

    async def main():
        lim = LocalRateLimiter(RateLimits(max_in_flight=2, lease_timeout_s=30), clock=clock)
        a = await lim.acquire()
        b = await lim.acquire()
        third = asyncio.create_task(lim.acquire())
        await asyncio.sleep(0.05)
        assert not third.done()  # both slots taken
        await lim.release(a)
        c = await asyncio.wait_for(third, 1.0)
        assert lim.in_flight == 2
        # b's holder "dies": after the lease timeout its slot is reclaimed
        fourth = asyncio.create_task(lim.acquire())
        await asyncio.sleep(0.05)
        assert not fourth.done()
        clock.now += 31
        await asyncio.wait_for(fourth, 2.0)
        assert b.lease_id != c.lease_id

    asyncio.run(main())


def test_local_acquire_sleeps_the_granted_wait():
    clock = FakeClock()
    slept: list[float] = []

    async def fake_sleep(s: float) -> None:
        slept.append(s)
        clock.now += s

    async def main():
        lim = LocalRateLimiter(RateLimits(requests_per_minute=120, request_burst=1), clock=clock, sleep=fake_sleep)
        for _ in range(3):
            await lim.acquire()

    asyncio.run(main())
    assert slept == [pytest.approx(60 / 119)] * 2


def test_local_limiter_refuses_to_be_copied_to_another_process():
    with pytest.raises(TypeError, match="get_or_create_limiter"):
        pickle.dumps(LocalRateLimiter(RateLimits(requests_per_minute=10)))


def test_make_limiter_is_local_without_ray(monkeypatch):
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    lim = make_limiter("x", RateLimits(requests_per_minute=10))
    assert isinstance(lim, LocalRateLimiter)
    assert "ray" not in sys.modules  # deciding did not import Ray


# --- the shared Ray actor -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    started = False
    if not ray.is_initialized():
        ray.init(
            address="local", num_cpus=2, object_store_memory=256 * 2**20,
            include_dashboard=False, logging_level="WARNING",
        )
        started = True
    yield ray
    if started:
        ray.shutdown()


def _worker_class():
    """Defined in a function so Ray ships the class by value (workers cannot import tests/)."""

    class _Worker:
        """A Ray worker process that uses a limiter it finds by name (as shards do)."""

        def ready(self):
            return True

        def compete(self, name, limits_dict, start_at, deadline, loops):
            """From ``start_at``, acquire in ``loops`` concurrent loops until ``deadline``;
            returns (ready_at, observed) pairs."""
            import asyncio as aio
            import time as t

            from ray_knowsim.llm.rate_limit import RateLimits as RL
            from ray_knowsim.llm.rate_limit import get_or_create_limiter as goc

            lim = goc(name, RL(**limits_dict), create=False)
            seen = []

            async def loop():
                while True:
                    grant = await lim.acquire()
                    now = t.monotonic()
                    if now > deadline:
                        return
                    seen.append((grant.ready_at, now))

            async def main():
                await aio.sleep(max(0.0, start_at - t.monotonic()))  # both workers start together
                tasks = [aio.create_task(loop()) for _ in range(loops)]
                await aio.wait(tasks, timeout=max(0.0, deadline - t.monotonic()) + 0.5)
                for task in tasks:
                    task.cancel()

            aio.run(main())
            return seen

        def reserve_many(self, name, limits_dict, n):
            """Reserve ``n`` requests at once without sleeping; their ready_at times."""
            import asyncio as aio

            from ray_knowsim.llm.rate_limit import RateLimits as RL
            from ray_knowsim.llm.rate_limit import get_or_create_limiter as goc

            lim = goc(name, RL(**limits_dict), create=False)

            async def main():
                return [g.ready_at for g in await aio.gather(*(lim.reserve() for _ in range(n)))]

            return aio.run(main())

        def http_calls(self, model, n):
            """Send ``n`` requests through an OpenAICompatibleModel shipped from the driver."""
            import asyncio as aio

            from ray_knowsim.model.chat import ChatRequest

            reqs = [ChatRequest(messages=({"role": "user", "content": f"q{i}"},)) for i in range(n)]
            out = aio.run(model.complete(reqs))
            return [r.error for r in out], type(model._limiter).__name__

    return _Worker


@pytest.fixture(scope="module")
def ray_workers(ray_local):
    workers = [ray_local.remote(num_cpus=1)(_worker_class()).remote() for _ in range(2)]
    ray_local.get([w.ready.remote() for w in workers])
    yield workers
    for w in workers:
        ray_local.kill(w)


def test_shared_limiter_two_ray_workers_real_time(ray_local, ray_workers):
    ray = ray_local
    limits = RateLimits(requests_per_minute=60, request_burst=5)
    name = "test-limiter-realtime"
    owner = get_or_create_limiter(name, limits)  # the driver creates and holds it, as the engine does
    duration = 5.0
    start_at = time.monotonic() + 1.0
    deadline = start_at + duration
    # 3 loops each: 6 requests always waiting (more than the burst of 5), yet few enough that
    # neither worker's queued reservations lock the other out of the window
    parts = ray.get([w.compete.remote(name, limits.model_dump(), start_at, deadline, 3) for w in ray_workers])
    assert all(parts), f"each worker got grants from the shared limiter: {[len(p) for p in parts]}"
    ready = [r for part in parts for r, _ in part]
    observed = [o for part in parts for _, o in part]
    rate = 55 / 60
    assert_bucket_bound(ready, capacity=5, rate=rate)  # the actor's schedule: exact
    # nobody went before its time (same machine: one monotonic clock), so what the workers saw
    # obeys the bound up to how late they woke (a loaded machine wakes them late, never early)
    late = [o - r for r, o in zip(ready, observed)]
    assert min(late) >= -1e-3
    assert_bucket_bound(observed, capacity=5, rate=rate, slack_s=max(late) + 1e-3)
    assert max_in_window(observed, 60.0) <= 60
    # and it did let requests through beyond the burst (not just "never too many")
    assert 5 + 2 <= len(observed) <= 5 + rate * (duration + 0.2)
    assert asyncio.run(owner.stats())["granted"] >= len(observed)


def test_shared_limiter_schedule_of_a_200_burst_from_two_workers(ray_local, ray_workers):
    limits = RateLimits(requests_per_minute=60, request_burst=5)
    name = "test-limiter-schedule"
    owner = get_or_create_limiter(name, limits)  # noqa: F841 (held for the test)
    parts = ray_local.get([w.reserve_many.remote(name, limits.model_dump(), 100) for w in ray_workers])
    ready = parts[0] + parts[1]
    assert len(ready) == 200
    assert max_in_window(ready, 60.0) <= 60
    assert_bucket_bound(ready, capacity=5, rate=55 / 60)


def test_shared_limiter_conflicts_slots_and_recovery(ray_local):
    limits = RateLimits(requests_per_minute=600, max_in_flight=1)
    name = "test-limiter-slots"
    lim = get_or_create_limiter(name, limits)
    with pytest.raises(ValueError, match="already exists"):
        get_or_create_limiter(name, RateLimits(requests_per_minute=120))
    # another user of the endpoint with a longer request timeout shares the budget
    get_or_create_limiter(name, limits.model_copy(update={"lease_timeout_s": 1234.0}))
    with pytest.raises(LookupError):
        get_or_create_limiter("test-limiter-nobody-made", limits, create=False)
    clone = pickle.loads(pickle.dumps(lim))  # what a worker receives

    async def slots():
        a = await lim.acquire()
        waiting = asyncio.create_task(clone.acquire())
        await asyncio.sleep(0.2)
        assert not waiting.done()  # the only slot is taken, across handles
        await lim.release(a)
        await clone.release(await asyncio.wait_for(waiting, 2.0))

    asyncio.run(slots())

    ray_local.kill(lim._handle, no_restart=True)  # the actor dies (e.g. with its creator)

    async def after_death():
        grants = await asyncio.gather(*(clone.acquire() for _ in range(1)))
        assert grants[0].wait_s == 0  # re-created under the same name, not an error
        await clone.release(grants[0])

    asyncio.run(after_death())
    assert clone._generation == 1


def test_http_models_in_two_workers_share_the_driver_limiter(ray_local, ray_workers):
    from aiohttp import web

    from ray_knowsim.llm.http_backend import HTTPModelConfig, OpenAICompatibleModel, create_shared_limiter
    from ray_knowsim.llm.server import serve_app_in_thread

    arrivals: list[float] = []

    async def handle(request):
        arrivals.append(time.monotonic())
        return web.json_response({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    with serve_app_in_thread(app) as server:
        cfg = HTTPModelConfig(base_url=server.base_url, model="m", requests_per_minute=240)  # burst 4
        owner = create_shared_limiter(cfg)  # noqa: F841 (the driver holds it for the run)
        model = OpenAICompatibleModel(cfg)
        results = ray_local.get([w.http_calls.remote(model, 4) for w in ray_workers])
    assert [kind for _, kind in results] == ["RayRateLimiter", "RayRateLimiter"]
    assert all(err is None for errors, _ in results for err in errors)
    assert len(arrivals) == 8
    # arrival jitter on a loaded machine can squeeze grants a little; without a limiter all 8
    # would arrive within a few milliseconds
    rate = 236 / 60
    assert_bucket_bound(arrivals, capacity=4, rate=rate, slack_s=0.5)
    assert max(arrivals) - min(arrivals) >= 4 / rate - 0.5
