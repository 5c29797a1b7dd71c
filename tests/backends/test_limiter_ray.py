"""The run-wide limiter as a Ray actor: two worker processes share one budget (rates and the
in-flight cap), handles survive pickling and the actor's death."""

from __future__ import annotations

import asyncio
import pickle
import time

import pytest

from ray_knowsim.backends.limiter import RateLimits, SharedLimiter, get_or_create_limiter

from tests.doubles.limiter_windows import assert_bucket_bound, max_in_window


def _worker_class():
    """Defined in a function so Ray ships the class by value (workers cannot import tests/)."""

    class _Worker:
        """A Ray worker process that uses a limiter handed over by the driver (as shards do)."""

        def ready(self):
            return True

        def compete(self, limiter, start_at, deadline, loops):
            """From ``start_at``, acquire in ``loops`` concurrent loops until ``deadline``;
            returns the times requests were allowed to go."""
            import asyncio as aio
            import time as t

            seen = []

            async def loop():
                while True:
                    grant = await limiter.acquire()
                    now = t.monotonic()
                    limiter.release(grant)
                    if now > deadline:
                        return
                    seen.append(now)

            async def main():
                await aio.sleep(max(0.0, start_at - t.monotonic()))  # both workers start together
                tasks = [aio.create_task(loop()) for _ in range(loops)]
                await aio.wait(tasks, timeout=max(0.0, deadline - t.monotonic()) + 0.5)
                for task in tasks:
                    task.cancel()
                await limiter.aclose()

            aio.run(main())
            return seen

        def http_calls(self, model, n):
            """Send ``n`` requests through an OpenAICompatibleModel shipped from the driver."""
            import asyncio as aio

            from ray_knowsim.llm.protocol import generate_all
            from ray_knowsim.schema.chat import ChatRequest

            reqs = [ChatRequest(messages=({"role": "user", "content": f"q{i}"},)) for i in range(n)]

            async def main():
                try:
                    return await generate_all(model, reqs)
                finally:
                    await model.aclose()

            out = aio.run(main())
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
    limits = RateLimits(requests_per_minute=60, request_burst=5)
    owner = get_or_create_limiter("test-limiter-realtime", limits)  # the driver creates and holds it
    duration = 5.0
    start_at = time.monotonic() + 1.0
    deadline = start_at + duration
    parts = ray_local.get([w.compete.remote(owner, start_at, deadline, 3) for w in ray_workers])
    assert all(parts), f"each worker got grants from the shared limiter: {[len(p) for p in parts]}"
    observed = [o for part in parts for o in part]
    rate = 55 / 60
    # a worker waits from when the reservation's answer arrived, so it never goes early; two
    # answers travelling for different times can bring grants closer by that difference only
    assert_bucket_bound(observed, capacity=5, rate=rate, slack_s=0.25)
    assert max_in_window(observed, 60.0) <= 60
    assert 5 + 2 <= len(observed) <= 5 + rate * (duration + 0.3)  # it did let requests through
    assert asyncio.run(owner.stats())["granted"] >= len(observed)


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
    assert isinstance(clone, SharedLimiter)

    async def slots():
        a = await lim.acquire()
        waiting = asyncio.create_task(clone.acquire())
        await asyncio.sleep(0.3)
        assert not waiting.done()  # the only slot is taken, across handles (two clients)
        lim.release(a)
        clone.release(await asyncio.wait_for(waiting, 3.0))
        await lim.aclose()
        await clone.aclose()

    asyncio.run(slots())

    ray_local.kill(lim._handle, no_restart=True)  # the actor dies (e.g. with its creator)

    async def after_death():
        grant = await asyncio.wait_for(clone.acquire(), 30)  # re-created under the same name
        clone.release(grant)
        await clone.aclose()

    asyncio.run(after_death())
    assert clone._generation == 1


def _serve_counting(delay: float):
    from aiohttp import web

    state = {"arrivals": [], "in_flight": 0, "peak": 0}

    async def handle(request):
        state["arrivals"].append(time.monotonic())
        state["in_flight"] += 1
        state["peak"] = max(state["peak"], state["in_flight"])
        try:
            await asyncio.sleep(delay)
        finally:
            state["in_flight"] -= 1
        return web.json_response({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    return app, state


def test_http_models_in_two_workers_share_the_driver_limiter(ray_local, ray_workers):
    from ray_knowsim.backends.limiter import create_shared_limiter
    from ray_knowsim.llm.http.client import OpenAICompatibleModel
    from ray_knowsim.llm.http.config import HTTPModelConfig
    from ray_knowsim.llm.offline.server import serve_app_in_thread

    app, state = _serve_counting(0.0)
    with serve_app_in_thread(app) as server:
        cfg = HTTPModelConfig(base_url=server.base_url, model="m", requests_per_minute=240)  # burst 4
        limiter = create_shared_limiter(cfg)  # the driver holds it for the run
        model = OpenAICompatibleModel(cfg, limiter=limiter)
        results = ray_local.get([w.http_calls.remote(model, 4) for w in ray_workers])
    assert [kind for _, kind in results] == ["SharedLimiter", "SharedLimiter"]
    assert all(err is None for errors, _ in results for err in errors)
    arrivals = state["arrivals"]
    assert len(arrivals) == 8
    rate = 236 / 60
    assert_bucket_bound(arrivals, capacity=4, rate=rate, slack_s=0.5)
    assert max(arrivals) - min(arrivals) >= 4 / rate - 0.5  # without a limiter: a few milliseconds


def test_run_wide_in_flight_cap_across_two_workers(ray_local, ray_workers):
    from ray_knowsim.backends.limiter import create_shared_limiter
    from ray_knowsim.llm.http.client import OpenAICompatibleModel
    from ray_knowsim.llm.http.config import HTTPModelConfig
    from ray_knowsim.llm.offline.server import serve_app_in_thread

    app, state = _serve_counting(0.03)
    with serve_app_in_thread(app) as server:
        cfg = HTTPModelConfig(base_url=server.base_url, model="m", max_in_flight=50, max_in_flight_global=6)
        model = OpenAICompatibleModel(cfg, limiter=create_shared_limiter(cfg))
        results = ray_local.get([w.http_calls.remote(model, 60) for w in ray_workers])
    assert all(err is None for errors, _ in results for err in errors)
    assert len(state["arrivals"]) == 120
    assert state["peak"] == 6  # reached, never exceeded, with 100 requests waiting across two processes


def _gone(ray, name: str, timeout_s: float) -> bool:
    from ray_knowsim.backends.limiter.actor import NAMESPACE

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return True
        time.sleep(0.25)
    return False


@pytest.mark.slow  # ~13 s: the reaper beats every 2 s, waited past several times
def test_a_shared_limiter_lives_while_some_run_holds_a_lease(ray_local):
    """Two runs (two holders) share one limiter; the first ending does not end it under the
    second; it ends a grace period after the last lets go, and after a holder that went silent."""
    from ray_knowsim.backends.limiter.actor import NAMESPACE, REAP_EVERY_S

    limits = RateLimits(max_in_flight=2)
    name = "test-limiter-leases"
    run_a = get_or_create_limiter(name, limits, grace_s=1.0)
    lease_a = run_a.hold("run-a")
    run_b = get_or_create_limiter(name, limits, grace_s=1.0)  # the second run finds the same actor
    assert run_b._handle._actor_id == run_a._handle._actor_id
    lease_b = run_b.hold("run-b")
    assert sorted(h.split("@")[0] for h in run_a.leases()["holders"]) == ["run-a", "run-b"]

    lease_a.shutdown()  # run a ends
    time.sleep(1.0 + 2 * REAP_EVERY_S + 0.5)  # past the grace period and the reaper's beats
    assert ray_local.get_actor(name, namespace=NAMESPACE)._actor_id == run_a._handle._actor_id

    async def use():
        grant = await asyncio.wait_for(run_b.acquire(), 10)
        run_b.release(grant)
        await run_b.aclose()

    asyncio.run(use())  # run b's budget is the same one, still there
    lease_b.shutdown()
    assert _gone(ray_local, name, 1.0 + 3 * REAP_EVERY_S + 5)

    # a run that dies without letting go: its lease expires
    ghost = get_or_create_limiter(name, limits, grace_s=1.0)
    assert ray_local.get(ghost._handle.renew_lease.remote("dead-driver", 1.0))
    time.sleep(REAP_EVERY_S)
    assert ghost.leases()["holders"] == ["dead-driver"] or ghost.leases()["expired"] == ["dead-driver"]
    assert _gone(ray_local, name, 1.0 + 1.0 + 3 * REAP_EVERY_S + 5)
