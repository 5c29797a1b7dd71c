"""The checks' own chat requests (the speed probe, the tiny request to an endpoint without a models
list) count against the endpoint's quota, as the run's requests do: a user who declares
``max_in_flight_global: 4`` means the endpoint refuses a fifth request from anyone.

Found on 2026-12-07: two runs on one cluster put 8 requests in flight at an endpoint capped at 4,
and all 8 were one run's speed probe (8 copies at once, sent before Ray was up, outside the
limiter). The cluster-wide case is ``tests/cluster/test_shared_cluster.py``."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

from aiohttp import web

from ray_knowsim.backends.http import HTTPModelEntry
from ray_knowsim.backends.http.probe import probe_http
from ray_knowsim.backends.limiter import LocalRateLimiter, RateLimits
from ray_knowsim.config import parse_run_config
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.llm.offline.server import build_app, serve_app_in_thread
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.preflight.checks import check_before_spending, probe_speed, speed_concurrency
from tests.doubles.counting import Tally, counting_app
from tests.doubles.run_config import small_config


class RecordingLimiter(LocalRateLimiter):
    """An in-process limiter that counts its grants."""

    def __init__(self, limits: RateLimits) -> None:
        super().__init__(limits)
        self.grants = 0

    async def acquire(self, tokens: int = 0):
        grant = await super().acquire(tokens)
        self.grants += 1
        return grant


def entry(base_url: str, **fields) -> HTTPModelEntry:
    return HTTPModelEntry(backend="http", base_url=base_url, model="offline", **fields)


def test_the_speed_probe_never_sends_more_than_the_quota_at_once():
    tally = Tally()
    limiter = RecordingLimiter(RateLimits(max_in_flight=2))
    with serve_app_in_thread(counting_app(OfflineModel(), tally, delay_s=0.2)) as server:
        speed = asyncio.run(probe_speed(entry(server.base_url), concurrency=6, limiter=limiter))
    assert speed.requests == 6 and tally.requests == 6
    assert limiter.grants == 6
    assert tally.peak_in_flight == 2  # bound by the quota (6 were sent together)


def test_the_speed_probe_sends_no_more_copies_than_the_cluster_wide_cap():
    plan = type("P", (), {"n_sessions": 48})()
    assert speed_concurrency(entry("http://x/v1", max_in_flight=16), plan) == 8
    assert speed_concurrency(entry("http://x/v1", max_in_flight=16, max_in_flight_global=3), plan) == 3
    assert speed_concurrency(entry("http://x/v1", max_in_flight=2, max_in_flight_global=3), plan) == 2


def test_the_tiny_request_to_an_endpoint_without_a_models_list_takes_a_grant():
    app = build_app(OfflineModel(), served_name="offline")
    seen: Counter = Counter()

    @web.middleware
    async def no_models_list(request, handler):
        seen[request.path] += 1
        if request.path.endswith("/models"):
            return web.Response(status=404)
        return await handler(request)

    app.middlewares.append(no_models_list)
    limiter = RecordingLimiter(RateLimits(max_in_flight=1))
    with serve_app_in_thread(app) as server:
        cap = asyncio.run(probe_http(entry(server.base_url), "tutor", limiter))
    assert cap.checked == "one tiny request" and cap.error is None
    assert seen["/v1/chat/completions"] == 1 and limiter.grants == 1


def test_the_checks_hold_each_endpoints_quota_for_their_requests(monkeypatch):
    """check_before_spending hands each rate-limited HTTP entry's limiter to its probes (the one
    the run's models get: ``create_shared_limiter``)."""
    import ray_knowsim.backends.limiter.actor as actor

    made: list[RecordingLimiter] = []

    def shared(config):
        made.append(RecordingLimiter(config.rate_limits()))
        return made[-1]

    monkeypatch.setattr(actor, "create_shared_limiter", shared)
    tally = Tally()
    with serve_app_in_thread(counting_app(OfflineModel(), tally, delay_s=0.05)) as server:
        data = small_config(models={"ep": {"backend": "http", "base_url": server.base_url, "model": "offline",
                                           "offline_server": True, "timeout_s": 60, "max_in_flight_global": 2}},
                            roles={"user_sim": "ep", "extractor": "ep", "judge": "ep", "assistant": {"model": "ep"}})
        cfg = parse_run_config(data)
        inputs = load_inputs(cfg)
        check_before_spending(cfg, Plan(cfg, inputs), inputs)
    assert len(made) == 1 and made[0].grants == tally.requests == 2  # the speed probe: 2 copies, under the cap
    assert tally.peak_in_flight <= 2


def test_re_extraction_joins_ray_for_an_endpoint_with_a_quota(monkeypatch):
    """``agreement --re-extract`` and ``validate --extractor-agreement`` build the extractor outside
    a run: with a quota, its limiter must be the cluster's (Ray joined), not one of its own."""
    import ray_knowsim.backends.model_set as model_set
    import ray_knowsim.run.fan_out as fan_out
    from ray_knowsim.run.extractor import extractor_model

    joined: list[str | None] = []

    @contextlib.contextmanager
    def session(address=None, **_):
        joined.append(address)
        yield False

    monkeypatch.setattr(fan_out, "ray_session", session)
    monkeypatch.setattr(model_set, "build_models", lambda *a, **k: type("M", (), {"model": lambda *a, **k: "model"})())
    base = {"backend": "http", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    for fields, expected in (({}, []), ({"max_in_flight_global": 4}, ["head:6379"]), ({"requests_per_minute": 60}, ["head:6379"])):
        joined.clear()
        cfg = parse_run_config(small_config(models={"ep": {**base, **fields}},
                                            roles={"user_sim": "ep", "extractor": "ep", "judge": "ep", "assistant": {"model": "ep"}}))
        with extractor_model(cfg, "ep", {}, unit="t", address="head:6379") as model:
            assert model == "model"
        assert joined == expected, fields
