"""The plain-http client (ray_knowsim.llm.http.plain) under the model client, against real local
servers: aiohttp's (Content-Length and chunked answers, keep-alive, Connection: close) and raw
asyncio sockets for what aiohttp's server never sends (an answer framed by the connection's end,
a cut body, a non-HTTP answer, gzip, an idle connection the server drops). Every failure must come
out under the same name and with the same attempts as through aiohttp: the scenario table runs
through both transports and compares."""

from __future__ import annotations

import asyncio
import gzip
import json

import aiohttp
import pytest
from aiohttp import web

from ray_knowsim.llm.http.client import OpenAICompatibleModel
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.http.plain import TRANSPORT_ENV, PlainHTTPPool, use_plain
from ray_knowsim.llm.retry import BackoffConfig
from ray_knowsim.llm.offline.server import serve_app_in_thread
from ray_knowsim.schema.chat import ChatRequest

FAST = BackoffConfig(initial_s=0.01, max_s=0.02, jitter=0.0)


def answer(text: str = "hello") -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def model_for(base_url: str, **kw) -> OpenAICompatibleModel:
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("backoff", FAST)
    return OpenAICompatibleModel(HTTPModelConfig(base_url=base_url, model="m", **kw))


def req(text: str = "hi") -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},))


class RawServer:
    """An asyncio TCP server on a free port answering each request with ``reply(n)`` (bytes, and
    whether to close afterwards); counts connections and requests."""

    def __init__(self, reply) -> None:
        self.reply, self.connections, self.requests = reply, 0, 0
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> "RawServer":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.base_url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        for w in self.writers:
            w.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
                json.loads(await reader.readexactly(length))
                self.requests += 1
                data, close = self.reply(self.requests)
                writer.write(data)
                await writer.drain()
                if close:
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):  # the client went, or the test ended
            writer.close()


def http_answer(body: bytes, *, status: str = "200 OK", headers: str = "", length: bool = True) -> bytes:
    framing = f"Content-Length: {len(body)}\r\n" if length else ""
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{framing}{headers}\r\n".encode() + body


OK = json.dumps(answer()).encode()


async def generate(model: OpenAICompatibleModel, *texts: str):
    try:
        return [await model.generate(req(t)) for t in texts]
    finally:
        await model.aclose()


def test_plain_http_goes_through_the_lean_client_and_https_or_the_switch_through_aiohttp(monkeypatch):
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    assert use_plain("http://127.0.0.1:8000/v1/chat/completions")
    assert not use_plain("https://api.example.com/v1/chat/completions")

    async def kinds():
        out = []
        for url in ("http://127.0.0.1:9/v1", "https://api.example.com/v1"):
            model = model_for(url)
            out.append(type(model._session()))
            await model.aclose()
        return out

    assert asyncio.run(kinds()) == [PlainHTTPPool, aiohttp.ClientSession]
    monkeypatch.setenv(TRANSPORT_ENV, "aiohttp")
    assert asyncio.run(kinds()) == [aiohttp.ClientSession, aiohttp.ClientSession]


def test_content_length_and_chunked_answers_over_one_kept_alive_connection(monkeypatch):
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    seen: list[dict] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append({"headers": dict(request.headers), "body": body})
        if body["messages"][0]["content"] == "chunked":
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            data = json.dumps(answer("in pieces")).encode()
            for k in range(0, len(data), 7):  # many small chunks
                await resp.write(data[k:k + 7])
            await resp.write_eof()
            return resp
        return web.json_response(answer("whole"))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)

    async def main(base_url):
        model = model_for(base_url, send_knowsim_headers=True)
        out = [await model.generate(req(t)) for t in ("a", "chunked", "b", "chunked", "c")]
        pool = model._session()
        opened = pool.opened
        await model.aclose()
        return out, opened

    with serve_app_in_thread(app) as h:
        out, opened = asyncio.run(main(h.base_url))
    assert [r.text for r in out] == ["whole", "in pieces", "whole", "in pieces", "whole"]
    assert all(r.error is None and r.attempts == 1 for r in out)
    assert opened == 1  # keep-alive: one connection for five requests in turn
    assert seen[0]["body"]["model"] == "m" and seen[0]["headers"]["Content-Type"] == "application/json"
    assert seen[0]["headers"]["Host"].startswith("127.0.0.1:")


def test_connection_close_idle_drops_and_concurrency_open_what_they_need(monkeypatch):
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)

    async def main():
        # the server says Connection: close on every answer, then closes: each request a new connection
        async with RawServer(lambda n: (http_answer(OK, headers="Connection: close\r\n"), True)) as s:
            out = await generate(model_for(s.base_url), "a", "b", "c")
            assert [r.error for r in out] == [None] * 3 and s.connections == 3
        # the server keeps it open, then drops it while idle: the next request finds it gone and reconnects
        async with RawServer(lambda n: (http_answer(OK), False)) as s:
            model = model_for(s.base_url)
            first = await model.generate(req("a"))
            for w in s.writers:
                w.close()
            await asyncio.sleep(0.1)
            second = await model.generate(req("b"))
            await model.aclose()
            assert first.error is None and second.error is None and second.attempts == 1 and s.connections == 2
        # concurrent requests open one connection each at most, and reuse them afterwards
        async with RawServer(lambda n: (http_answer(OK), False)) as s:
            model = model_for(s.base_url, max_in_flight=4)
            out = await asyncio.gather(*(model.generate(req(str(k))) for k in range(12)))
            opened = model._session().opened
            await model.aclose()
            assert all(r.error is None for r in out) and 1 <= opened <= 4 and s.connections == opened

    asyncio.run(main())


def test_an_answer_framed_by_the_end_of_the_connection_and_a_gzip_body_are_read(monkeypatch):
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)

    async def main():
        async with RawServer(lambda n: (http_answer(OK, length=False), True)) as s:
            until_close = await generate(model_for(s.base_url), "a", "b")
        packed = gzip.compress(json.dumps(answer("packed")).encode())
        async with RawServer(lambda n: (http_answer(packed, headers="Content-Encoding: gzip\r\n"), False)) as s:
            zipped = await generate(model_for(s.base_url), "a")
        async with RawServer(lambda n: (b"HTTP/1.1 100 Continue\r\n\r\n" + http_answer(OK), False)) as s:
            interim = await generate(model_for(s.base_url), "a")
        return until_close, zipped, interim

    until_close, zipped, interim = asyncio.run(main())
    assert [r.text for r in until_close] == ["hello", "hello"] and all(r.error is None for r in until_close)
    assert zipped[0].text == "packed" and interim[0].text == "hello"


# scenario -> raw reply(n) ; run through both transports, the outcome must be the same
SCENARIOS = {
    "cut_short": lambda n: (b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + OK[:20], True),
    "not_http": lambda n: (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", True),
    "cut_chunked": lambda n: (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789", True),
    "closed_without_answer": lambda n: (b"", True),
    "503_then_ok": lambda n: ((http_answer(b'{"error": {"message": "busy"}}', status="503 Service Unavailable")
                               if n == 1 else http_answer(OK)), False),
    "429_retry_after": lambda n: ((http_answer(b"{}", status="429 Too Many Requests", headers="Retry-After: 0\r\n")
                                   if n < 3 else http_answer(OK)), False),
    "400_with_code": lambda n: (http_answer(b'{"error": {"message": "too long", "code": "context_length_exceeded"}}',
                                            status="400 Bad Request"), False),
    "bad_200_then_ok": lambda n: ((http_answer(b"{not json") if n == 1 else http_answer(OK)), False),
    "chunked_with_trailer": lambda n: (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       + f"{len(OK):x};ext=1\r\n".encode() + OK + b"\r\n0\r\nX-Trailer: y\r\n\r\n", False),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_failures_and_retries_come_out_as_through_aiohttp(monkeypatch, scenario):
    def outcome(transport: str):
        if transport == "aiohttp":
            monkeypatch.setenv(TRANSPORT_ENV, "aiohttp")
        else:
            monkeypatch.delenv(TRANSPORT_ENV, raising=False)

        async def main():
            async with RawServer(SCENARIOS[scenario]) as s:
                (r,) = await generate(model_for(s.base_url, max_attempts=3), "a")
                return (r.text, r.error, r.attempts, r.reached_model, r.detail, s.requests)

        return asyncio.run(main())

    plain, through_aiohttp = outcome("plain"), outcome("aiohttp")
    assert plain == through_aiohttp


def test_timeouts_and_refusals_keep_their_names(monkeypatch):
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)

    async def main():
        async with RawServer(lambda n: (b"", False)) as s:  # reads the request, never answers
            (slow,) = await generate(model_for(s.base_url, timeout_s=0.2, max_attempts=2), "a")
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        (refused,) = await generate(model_for(f"http://127.0.0.1:{port}/v1", max_attempts=2), "a")
        return slow, refused

    slow, refused = asyncio.run(main())
    assert slow.error == "timeout" and slow.attempts == 2
    assert refused.error == "connection" and refused.attempts == 2 and not refused.reached_model


def test_a_header_that_would_break_the_framing_is_a_bad_request(monkeypatch):
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    pool = PlainHTTPPool("http://127.0.0.1:1/v1/chat/completions", timeout_s=1, connect_timeout_s=1)
    with pytest.raises(ValueError):
        pool.head({"X-Evil": "a\r\nInjected: 1"}, 0)
    head = pool.head({"Authorization": "Bearer x"}, 12).decode()
    assert head.startswith("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Length: 12\r\n")
    assert head.endswith("Authorization: Bearer x\r\n\r\n")
