"""Every request path reaches an endpoint through the one quota of that (endpoint, model, key name):

* every model that talks to an endpoint is built by the ``http`` backend's builder (the run's
  sessions, the scoring stage's judges, re-extraction, the training environment all call
  ``build_models``), and under Ray the builder hands it the cluster-wide limiter: one actor named
  for the endpoint, however many runs, shards or processes;
* a retried request waits for the quota again (two requests, each failing once with a 5xx, never
  put more than the cap in flight).

The checks' own probes are tests/preflight/test_quota.py; two runs on one cluster,
tests/cluster/test_shared_cluster.py."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

from aiohttp import web

from ray_knowsim.backends.http import HTTPModelEntry, build_http
from ray_knowsim.backends.limiter import LocalRateLimiter, RateLimits
from ray_knowsim.backends.registry import BuildContext
from ray_knowsim.llm.http.client import OpenAICompatibleModel
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.llm.offline.server import build_app, serve_app_in_thread
from ray_knowsim.schema.chat import ChatRequest

PACKAGE = Path(__file__).resolve().parents[2] / "ray_knowsim"
#: where an OpenAICompatibleModel may be made: the backend's builder, and graph extraction (whose
#: HTTPModelConfig is built from flags that set no quota)
MAKERS = {"backends/http/__init__.py", "cli/extract_graphs.py"}


def _makes_one(path: Path) -> bool:
    calls = (n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Call))
    return any(getattr(c.func, "id", getattr(c.func, "attr", None)) == "OpenAICompatibleModel" for c in calls)


def test_every_endpoint_model_is_made_by_the_backends_builder():
    makers = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if _makes_one(p)}
    assert makers == MAKERS


def test_the_builder_gives_a_model_the_cluster_wide_limiter_and_a_lease(ray_local):
    from ray_knowsim.backends.limiter.actor import LimiterLease, SharedLimiter

    entry = HTTPModelEntry(backend="http", base_url="http://127.0.0.1:9/v1", model="m", max_in_flight_global=3)
    ctx = BuildContext(key="ep", graphs={})
    model = build_http(entry, ctx)
    try:
        assert isinstance(model._limiter, SharedLimiter)
        assert model._limiter.name == HTTPModelConfig(base_url=entry.base_url, model="m").limiter_name
        assert isinstance(ctx.pools["ep"], LimiterLease)  # the run's lease, let go when it ends
        again = build_http(entry, BuildContext(key="ep", graphs={}))  # another run, shard or stage
        assert again._limiter.name == model._limiter.name
    finally:
        ctx.pools["ep"].shutdown()


def test_a_retried_request_waits_for_the_quota_again():
    state = {"in": 0, "peak": 0, "seen": set()}

    @web.middleware
    async def fail_once(request, handler):
        if not request.path.endswith("/chat/completions"):
            return await handler(request)
        body = await request.read()
        state["in"] += 1
        state["peak"] = max(state["peak"], state["in"])
        try:
            await asyncio.sleep(0.05)
            if body not in state["seen"]:
                state["seen"].add(body)
                return web.json_response({"error": {"message": "busy"}}, status=503)
            return await handler(request)
        finally:
            state["in"] -= 1

    app = build_app(OfflineModel(), served_name="m")
    app.middlewares.append(fail_once)
    with serve_app_in_thread(app) as server:
        config = HTTPModelConfig(base_url=server.base_url, model="m", max_in_flight_global=1, max_attempts=3)
        model = OpenAICompatibleModel(config, limiter=LocalRateLimiter(config.rate_limits()))

        async def two():
            requests = [ChatRequest(messages=({"role": "user", "content": f"hello {i}"},), role="assistant",
                                    request_id=f"r{i}") for i in range(2)]
            out = await asyncio.gather(*(model.generate(r) for r in requests))
            await model.aclose()
            return out

        answers = asyncio.run(two())
    assert all(a.error is None and a.attempts == 2 for a in answers), answers
    assert state["peak"] == 1  # four attempts, one at a time
