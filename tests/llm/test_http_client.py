"""OpenAICompatibleModel against small local aiohttp servers: retries, errors, payloads, limits."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time

import pytest
from aiohttp import web
from pydantic import ValidationError

from ray_knowsim.llm.http.client import OpenAICompatibleModel, estimate_tokens
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.http.credentials import MissingAPIKeyError
from ray_knowsim.llm.http.wire import OFFLINE_FACTS_FIELD, ROLE_HEADER
from ray_knowsim.backends.limiter import LocalRateLimiter, RateLimits
from ray_knowsim.llm.http.client import LimiterRequiredError
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.llm.retry import BackoffConfig, backoff_delay, parse_retry_after
from ray_knowsim.llm.offline.server import serve_app_in_thread
from tests.doubles.model_calls import run

FAST = BackoffConfig(initial_s=0.01, max_s=0.05, jitter=0.0)


def ok_body(text: str = "hello", prompt: int = 11, completion: int = 5) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


class Scripted:
    """A server answering from a script: a list of (status, body, headers, delay); the last repeats."""

    def __init__(self, script):
        self.script = list(script)
        self.hits = 0
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.in_flight = 0
        self.peak = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        self.bodies.append(await request.json())
        self.headers.append(dict(request.headers))
        status, body, headers, delay = self.script[min(self.hits - 1, len(self.script) - 1)]
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if delay:
                await asyncio.sleep(delay)
        finally:
            self.in_flight -= 1
        return web.json_response(body, status=status, headers=headers or {})


def config(base_url: str, **kw) -> HTTPModelConfig:
    kw.setdefault("backoff", FAST)
    kw.setdefault("timeout_s", 5.0)
    return HTTPModelConfig(base_url=base_url, model="test-model", **kw)


def req(text: str = "hi", **kw) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},), **kw)


def test_429_with_retry_after_is_retried_and_succeeds():
    server = Scripted([(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}, 0), (200, ok_body(), None, 0)])
    with serve_app_in_thread(server.app()) as h:
        model = OpenAICompatibleModel(config(h.base_url, max_attempts=3))
        t0 = time.perf_counter()
        [resp] = run(model, [req()])
        elapsed = time.perf_counter() - t0
    assert resp.error is None and resp.text == "hello"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (11, 5)
    assert resp.finish_reason == "stop" and resp.latency_s > 0
    assert server.hits == 2
    assert elapsed >= 1.0  # waited at least what Retry-After asked (backoff alone is 0.01 s)


def test_always_500_ends_with_error_after_max_attempts():
    server = Scripted([(500, {"error": {"message": "boom"}}, None, 0)])
    with serve_app_in_thread(server.app()) as h:
        [resp] = run(OpenAICompatibleModel(config(h.base_url, max_attempts=4)), [req()])
    assert resp.error == "http_500" and resp.text == ""
    assert server.hits == 4


def test_client_error_is_not_retried_and_keeps_provider_code():
    body = {"error": {"message": "too long", "type": "invalid_request_error", "code": "context_length_exceeded"}}
    server = Scripted([(400, body, None, 0)])
    with serve_app_in_thread(server.app()) as h:
        [resp] = run(OpenAICompatibleModel(config(h.base_url, max_attempts=5)), [req()])
    assert resp.error == "http_400:context_length_exceeded"
    assert server.hits == 1


def test_timeout_is_retried_then_reported():
    server = Scripted([(200, ok_body(), None, 0.6)])
    with serve_app_in_thread(server.app()) as h:
        [resp] = run(OpenAICompatibleModel(config(h.base_url, timeout_s=0.2, max_attempts=2)), [req()])
    assert resp.error == "timeout"
    assert server.hits == 2


def test_connection_refused_is_reported():
    with socket.socket() as s:  # a port held bound but never listening: connects are refused, and
        s.bind(("127.0.0.1", 0))  # nothing else can take it while the test runs
        port = s.getsockname()[1]
        [resp] = run(OpenAICompatibleModel(config(f"http://127.0.0.1:{port}/v1", max_attempts=2)), [req()])
    assert resp.error == "connection"


def test_retry_after_beyond_limit_stops_at_once():
    server = Scripted([(429, {}, {"Retry-After": "3600"}, 0)])
    with serve_app_in_thread(server.app()) as h:
        [resp] = run(OpenAICompatibleModel(config(h.base_url, max_attempts=5)), [req()])
    assert resp.error == "rate_limited_long"
    assert server.hits == 1


def test_bad_200_body_is_retried():
    server = Scripted([(200, {"nope": 1}, None, 0), (200, ok_body("fine"), None, 0)])
    with serve_app_in_thread(server.app()) as h:
        [resp] = run(OpenAICompatibleModel(config(h.base_url)), [req()])
    assert resp.text == "fine" and server.hits == 2


def test_payload_schema_seed_extra_body_and_headers_reach_the_server():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    server = Scripted([(200, ok_body(), None, 0)])
    with serve_app_in_thread(server.app()) as h:
        model = OpenAICompatibleModel(config(h.base_url, extra_body={"top_p": 0.5}))
        run(model, [req(json_schema=schema, schema_name="user sim/turn", seed=7, temperature=0.7,
                        max_tokens=99, role="judge", prompt_version="judge@2"),
                    req("plain")])
    with_schema, plain = sorted(server.bodies, key=lambda b: "response_format" not in b)
    assert with_schema["model"] == "test-model"
    assert with_schema["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "user_sim_turn", "schema": schema, "strict": True}
    }
    assert with_schema["seed"] == 7 and with_schema["temperature"] == 0.7 and with_schema["max_tokens"] == 99
    assert with_schema["top_p"] == 0.5
    assert "seed" not in plain and "response_format" not in plain
    assert all(ROLE_HEADER not in hdr for hdr in server.headers)  # X-KnowSim-* headers are off by default
    assert all("Authorization" not in hdr for hdr in server.headers)  # no api_key_env: no key sent


def test_knowsim_headers_and_offline_facts_only_when_asked_for():
    facts = {"role": "judge", "template": "rater"}
    server = Scripted([(200, ok_body(), None, 0)])
    with serve_app_in_thread(server.app()) as h:
        plain = OpenAICompatibleModel(config(h.base_url))
        run(plain, [req(role="judge", offline_facts=facts)])
        ours = OpenAICompatibleModel(config(h.base_url, send_knowsim_headers=True, offline_server=True))
        run(ours, [req(role="judge", offline_facts=facts)])
    to_any, to_ours = server.bodies
    assert OFFLINE_FACTS_FIELD not in to_any and to_ours[OFFLINE_FACTS_FIELD] == facts
    assert ROLE_HEADER not in server.headers[0] and server.headers[1][ROLE_HEADER] == "judge"


def test_structured_output_modes():
    schema = {"type": "object"}
    r = req(json_schema=schema, schema_name="x")
    obj = OpenAICompatibleModel(config("http://h/v1", structured_output="json_object"))
    assert obj.build_payload(r)["response_format"] == {"type": "json_object", "schema": schema}
    none = OpenAICompatibleModel(config("http://h/v1", structured_output="none"))
    assert "response_format" not in none.build_payload(r)
    new_field = OpenAICompatibleModel(config("http://h/v1", max_tokens_field="max_completion_tokens"))
    body = new_field.build_payload(req(max_tokens=5))
    assert body["max_completion_tokens"] == 5 and "max_tokens" not in body


def test_max_in_flight_bounds_concurrency():
    server = Scripted([(200, ok_body(), None, 0.1)])
    with serve_app_in_thread(server.app()) as h:
        responses = run(OpenAICompatibleModel(config(h.base_url, max_in_flight=3)), [req(str(i)) for i in range(12)])
    assert all(r.error is None for r in responses)
    assert server.peak == 3


def test_rate_limiter_spaces_requests():
    server = Scripted([(200, ok_body(), None, 0)])
    limiter = LocalRateLimiter(RateLimits(requests_per_minute=120, request_burst=2))  # 2 now, then ~2/s
    with serve_app_in_thread(server.app()) as h:
        model = OpenAICompatibleModel(config(h.base_url), limiter=limiter)
        t0 = time.perf_counter()
        responses = run(model, [req(str(i)) for i in range(4)])
        elapsed = time.perf_counter() - t0
    assert all(r.error is None for r in responses) and server.hits == 4
    assert elapsed >= 0.95  # the 4th request waits for 2 refills at 118/60 per second


def test_usage_missing_is_zero_not_an_error():
    body = ok_body()
    del body["usage"]
    server = Scripted([(200, body, None, 0)])
    with serve_app_in_thread(server.app()) as h:
        [resp] = run(OpenAICompatibleModel(config(h.base_url)), [req()])
    assert resp.error is None and resp.usage.total == 0


def test_config_validation_errors_are_clear():
    with pytest.raises(ValidationError, match="extra_body may not set"):
        config("http://h/v1", extra_body={"temperature": 1})
    with pytest.raises(ValidationError, match="NAME of an environment variable"):
        config("http://h/v1", api_key_env="sk-not a name")
    with pytest.raises(ValidationError, match="must not contain credentials"):
        config("http://user:pw@h/v1")
    with pytest.raises(ValidationError, match="http"):
        config("ftp://h/v1")
    with pytest.raises(ValidationError):
        config("http://h/v1", structured_output="xml")
    assert config("http://h/v1/").base_url == "http://h/v1"


def test_missing_key_variable_names_the_variable(monkeypatch):
    monkeypatch.delenv("KNOWSIM_ABSENT_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="KNOWSIM_ABSENT_KEY"):
        OpenAICompatibleModel(config("http://h/v1", api_key_env="KNOWSIM_ABSENT_KEY"))


def test_backoff_grows_caps_and_respects_retry_after():
    cfg = BackoffConfig(initial_s=1.0, multiplier=2.0, max_s=5.0, jitter=0.5)
    rng = random.Random(0)
    for attempt, base in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)):
        d = backoff_delay(attempt, cfg, rng)
        assert base * 0.5 <= d <= base
    assert backoff_delay(1, cfg, rng, retry_after_s=7.0) == 7.0
    with pytest.raises(ValueError):
        backoff_delay(0, cfg, rng)
    with pytest.raises(ValidationError):
        BackoffConfig(initial_s=10, max_s=1)


def test_parse_retry_after_forms():
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_estimate_tokens_counts_prompt_and_budget():
    r = req("x" * 400, max_tokens=100)
    assert estimate_tokens(r) == 100 + 4 + 100


def test_config_rate_limit_needs_a_limiter_and_the_model_pickles_with_its_handle():
    import pickle

    with pytest.raises(LimiterRequiredError, match="make_limiter"):
        OpenAICompatibleModel(config("http://h/v1", requests_per_minute=120))  # no silent no-limit
    server = Scripted([(200, ok_body(), None, 0)])
    cfg_limited = None
    with serve_app_in_thread(server.app()) as h:
        cfg_limited = config(h.base_url, requests_per_minute=120)  # burst 2, then ~2/s
        model = OpenAICompatibleModel(cfg_limited, limiter=LocalRateLimiter(cfg_limited.rate_limits()))
        t0 = time.perf_counter()
        run(model, [req(str(i)) for i in range(3)])
        elapsed = time.perf_counter() - t0
    assert elapsed >= 0.45 and server.hits == 3
    plain = OpenAICompatibleModel(config("http://h/v1"))
    assert pickle.loads(pickle.dumps(plain)).config == plain.config
    with pytest.raises(TypeError, match="get_or_create_limiter"):
        pickle.dumps(model)  # a local limiter must not be copied into another process


def test_per_request_failures_never_break_the_batch():
    class BrokenLimiter:
        limits = RateLimits(requests_per_minute=1)

        async def acquire(self, tokens=0):
            raise RuntimeError("limiter actor unreachable")

        async def aclose(self):
            pass

    server = Scripted([(200, ok_body(), None, 0)])
    with serve_app_in_thread(server.app()) as h:
        unsendable = ChatRequest(messages=({"role": "user", "content": {"not", "json"}},))
        out = run(OpenAICompatibleModel(config(h.base_url)), [unsendable, req("fine")])
        broken = run(OpenAICompatibleModel(config(h.base_url), limiter=BrokenLimiter()), [req()])
    assert [r.error for r in out] == ["bad_request", None]
    assert broken[0].error == "limiter_error"
    assert server.hits == 1


# --- reasoning models ----------------------------------------------------------------------------


def test_think_blocks_never_reach_the_text_and_reasoning_tokens_are_counted():
    reported = ok_body("<think>first I consider\nthe graph</think>\n\nThe answer.", completion=40)
    reported["usage"]["completion_tokens_details"] = {"reasoning_tokens": 31}
    split_out = ok_body("Plain answer.", completion=30)
    split_out["choices"][0]["message"]["reasoning_content"] = "x" * 80  # a server with a reasoning parser
    dangling = ok_body("<think>ran out of budget while thinking", completion=50)
    dangling["choices"][0]["finish_reason"] = "length"
    opened_in_prompt = ok_body("the template opened it</think>Answer only", completion=20)
    server = Scripted([(200, reported, None, 0), (200, split_out, None, 0), (200, dangling, None, 0),
                       (200, opened_in_prompt, None, 0)])
    with serve_app_in_thread(server.app()) as h:
        model = OpenAICompatibleModel(config(h.base_url))
        out = [run(model, [req(str(i))])[0] for i in range(4)]
    assert [r.text for r in out] == ["The answer.", "Plain answer.", "", "Answer only"]
    assert [r.usage.reasoning_tokens for r in out] == [31, 20, 8, 6]  # reported; else ~4 chars/token
    assert out[0].usage.completion_tokens == 40 and out[0].usage.total == 51  # a part, not an addition
    assert out[2].finish_reason == "length" and out[2].error is None  # truncated: said so, not hidden


def test_thinking_off_through_the_chat_template_or_reasoning_effort():
    r = req()
    vllm = OpenAICompatibleModel(config("http://h/v1", thinking="off",
                                        extra_body={"chat_template_kwargs": {"custom": 1}}))
    assert vllm.build_payload(r)["chat_template_kwargs"] == {"custom": 1, "enable_thinking": False}
    api = OpenAICompatibleModel(config("http://h/v1", thinking="off", thinking_off_via="reasoning_effort",
                                       reasoning_effort_off="low"))
    body = api.build_payload(r)
    assert body["reasoning_effort"] == "low" and "chat_template_kwargs" not in body
    default = OpenAICompatibleModel(config("http://h/v1"))
    assert "chat_template_kwargs" not in default.build_payload(r)
    # thinking and chat-template options are part of what the cache keys an answer by
    assert len({str(m.cache_identity) for m in (vllm, api, default)}) == 3
    with pytest.raises(ValidationError, match="contradicts"):
        config("http://h/v1", thinking="off", extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    with pytest.raises(ValidationError, match="reasoning_effort"):
        config("http://h/v1", thinking="off", thinking_off_via="reasoning_effort",
               extra_body={"reasoning_effort": "high"})


# --- transport: retries, errors, session, timeouts ---------------------------------------------------


def test_transport_retries_resend_the_same_seeded_request_and_say_so():
    server = Scripted([(503, {}, None, 0), (502, {}, None, 0), (200, ok_body(), None, 0)])
    with serve_app_in_thread(server.app()) as h:
        [resp] = run(OpenAICompatibleModel(config(h.base_url, max_attempts=3)), [req(seed=1234, temperature=0.7)])
    assert resp.error is None and resp.attempts == 3 and resp.reached_model
    assert [b["seed"] for b in server.bodies] == [1234, 1234, 1234]
    assert server.bodies[0] == server.bodies[2]


def test_failures_after_the_last_attempt_are_named_and_say_whether_a_model_answered():
    no_choices = {"id": "x", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 0}}
    server = Scripted([(503, {}, None, 0)])
    empty = Scripted([(200, no_choices, None, 0)])
    with serve_app_in_thread(server.app()) as h, serve_app_in_thread(empty.app()) as h2:
        [unavailable] = run(OpenAICompatibleModel(config(h.base_url, max_attempts=2)), [req()])
        [bad] = run(OpenAICompatibleModel(config(h2.base_url, max_attempts=2)), [req()])
    assert unavailable.error == "http_503" and unavailable.attempts == 2 and not unavailable.reached_model
    assert bad.error == "bad_response" and bad.attempts == 2 and bad.reached_model
    assert bad.usage.prompt_tokens == 18  # what the answered attempts reported is kept


def test_one_session_per_loop_is_reused_across_calls_and_closed():
    server = Scripted([(200, ok_body(), None, 0)])
    peers: set = set()

    async def main(h):
        model = OpenAICompatibleModel(config(h.base_url))
        await model.generate(req("a"))
        first = model._session()
        await model.generate(req("b"))
        await model.generate(req("c"))
        assert model._session() is first and len(model._sessions) == 1
        await model.aclose()
        assert first.closed and not model._sessions
        await model.generate(req("d"))  # usable again after aclose: a new session
        assert model._session() is not first
        await model.aclose()

    with serve_app_in_thread(server.app()) as h:
        asyncio.run(main(h))
    assert server.hits == 4 and not peers


def test_a_read_timeout_keeps_its_slot_and_backs_off_before_resending():
    arrivals: list[tuple[str, float]] = []

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        arrivals.append((body["messages"][0]["content"], time.perf_counter()))
        if body["messages"][0]["content"] == "slow":
            await asyncio.sleep(1.0)  # the server keeps computing after the client gave up
        return web.json_response(ok_body())

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    limiter = LocalRateLimiter(RateLimits(max_in_flight=1))
    with serve_app_in_thread(app) as h:
        model = OpenAICompatibleModel(config(h.base_url, timeout_s=0.3, max_attempts=2,
                                             max_in_flight_global=1), limiter=limiter)

        async def main():
            slow = asyncio.create_task(model.generate(req("slow")))
            await asyncio.sleep(0.05)
            fast = asyncio.create_task(model.generate(req("fast")))
            out = await asyncio.gather(slow, fast)
            await model.aclose()
            return out

        slow, fast = asyncio.run(main())
    assert slow.error == "timeout" and slow.attempts == 2 and fast.error is None
    # no resend within half the timeout after it, and meanwhile the other request did not take
    # the slot of the request the server was still computing
    assert [what for what, _ in arrivals] in (["slow", "fast", "slow"], ["slow", "slow", "fast"])
    first = arrivals[0][1]
    assert all(t - first >= 0.3 + 0.15 - 0.02 for _, t in arrivals[1:])


def test_reasoning_tokens_are_recorded_in_the_run_accounting():
    from ray_knowsim.llm.accounting import AccountedModel, Accounting

    body = ok_body("<think>hmm</think>ok", completion=12)
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 9}
    server = Scripted([(200, body, None, 0)])
    accounting = Accounting()
    with serve_app_in_thread(server.app()) as h:
        model = AccountedModel(OpenAICompatibleModel(config(h.base_url)), accounting)
        run(model, [req(role="user_sim"), req("again", role="user_sim")])
    stats = accounting.to_dict()["user_sim"]
    assert stats["reasoning_tokens"] == 18 and stats["completion_tokens"] == 24


class EventSink:
    """A spend sink that keeps the order of what it is told ("sent <text>", "answered <text>")."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def sent(self, request, model_key):
        self.events.append(f"sent {request.messages[-1]['content']}")

    def answered(self, request, response, model_key):
        self.events.append(f"answered {request.messages[-1]['content']}")


def test_a_request_counts_as_sent_when_it_leaves_not_while_it_waits_for_a_slot():
    """With one in-flight slot, three requests asked at once leave one after another: the spend
    journal hears "sent" for each as it leaves (a process killed now would have ONE request in
    flight that a provider may bill, not three)."""
    from ray_knowsim.llm.accounting import AccountedModel, Accounting

    server = Scripted([(200, ok_body(), None, 0.15)])
    sink = EventSink()
    with serve_app_in_thread(server.app()) as h:
        model = AccountedModel(OpenAICompatibleModel(config(h.base_url, max_in_flight=1)), Accounting(), sink=sink)
        run(model, [req("a"), req("b"), req("c")])
    assert server.peak == 1 and server.hits == 3
    sent_while_out = [sum(1 for e in sink.events[: i + 1] if e.startswith("sent")) - sum(1 for e in sink.events[: i + 1] if e.startswith("answered"))
                      for i in range(len(sink.events))]
    assert max(sent_while_out) == 1, sink.events  # before: sent a, sent b, sent c, answered ...


def test_a_model_that_does_not_say_when_it_leaves_counts_as_sent_when_asked():
    from ray_knowsim.llm.accounting import AccountedModel, Accounting
    from ray_knowsim.llm.offline import OfflineModel
    from ray_knowsim.llm.protocol import reports_leaving

    assert reports_leaving(OpenAICompatibleModel(config("http://h/v1"))) and not reports_leaving(OfflineModel())
    sink = EventSink()
    model = AccountedModel(OfflineModel(), Accounting(), sink=sink)
    run(model, [req("a")])
    assert sink.events == ["sent a", "answered a"]


def test_portable_schema_subset_for_hosted_strict_modes():
    from ray_knowsim.demo import demo_graphs
    from ray_knowsim.schema.outputs import signal_report_schema

    graph = next(iter(demo_graphs("math").values()))
    strict = signal_report_schema(graph)
    r = req(json_schema=strict, schema_name="SignalReport")
    full = OpenAICompatibleModel(config("http://h/v1")).build_payload(r)["response_format"]["json_schema"]["schema"]
    assert full == strict  # vLLM-style servers get the whole per-request schema
    sent = OpenAICompatibleModel(config("http://h/v1", schema_subset="portable")).build_payload(r)
    text = json.dumps(sent["response_format"]["json_schema"]["schema"])
    assert "prefixItems" not in text and "maxLength" not in text and "minItems" not in text
    ids = sent["response_format"]["json_schema"]["schema"]["properties"]["iu_analysis"]["items"]["properties"]["id"]["enum"]
    assert ids == [n.id for n in graph.nodes]  # the ids stay an enum
