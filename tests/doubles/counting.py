"""A TEST DOUBLE endpoint that counts what it answered: the offline model behind an
OpenAI-compatible HTTP server (``ray_knowsim.llm.offline.server``) that tallies every chat request it
answered — requests, prompt, completion and cached prompt tokens — to compare with what a run
records as its cost.

Why it exists: the cost a run records must equal what the endpoint served, also when the run is
interrupted (Ctrl-C, ``kill -9``) and resumed. So the tally counts a request only once its answer
was written to a client still connected: the server cancels the handler of a client that went
away (``handler_cancellation``), and the response is counted after it is written, not when it is
computed. It reports ``prompt_tokens_details.cached_tokens`` (a third of the prompt), so the
cached-token column is carried end to end too. ``delay_s`` holds each answer (a run slow enough
to interrupt mid-session).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from aiohttp import web

from ray_knowsim.llm.offline.server import build_app, parse_chat_request, CONFIG_KEY, MODEL_KEY


@dataclass
class Tally:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0  # the most requests held at once
    last_answer_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens, "cached_prompt_tokens": self.cached_prompt_tokens}


def cached_of(prompt_tokens: int) -> int:
    return prompt_tokens // 3


def jitter(request_id: str) -> float:
    """0.25..1.75, fixed per request id."""
    return 0.25 + 1.5 * int(hashlib.sha256(request_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def counting_app(model: Any, tally: Tally, *, delay_s: float = 0.0) -> web.Application:
    app = build_app(model, delay_s=0.0)

    async def chat(request: web.Request) -> web.StreamResponse:
        cfg = request.app[CONFIG_KEY]
        body = await request.json()
        chat_request = parse_chat_request(body, request.headers, cfg.served_name)
        with tally.lock:
            tally.in_flight += 1
            tally.peak_in_flight = max(tally.peak_in_flight, tally.in_flight)
        try:
            if delay_s > 0:
                await asyncio.sleep(delay_s * jitter(chat_request.request_id))
            answer = await request.app[MODEL_KEY].generate(chat_request)
            if answer.error is not None:
                return web.json_response({"error": {"message": answer.error, "type": "server_error"}}, status=500)
            u = answer.usage
            payload = json.dumps({
                "id": f"chatcmpl-{chat_request.request_id}", "object": "chat.completion", "created": 0,
                "model": cfg.served_name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text},
                             "finish_reason": answer.finish_reason or "stop"}],
                "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                          "total_tokens": u.total, "prompt_tokens_details": {"cached_tokens": cached_of(u.prompt_tokens)}},
            }).encode()
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            response.content_length = len(payload)
            await response.prepare(request)
            await response.write(payload)
            await response.write_eof()
            with tally.lock:  # written to a connected client: answered
                tally.requests += 1
                tally.prompt_tokens += u.prompt_tokens
                tally.completion_tokens += u.completion_tokens
                tally.cached_prompt_tokens += cached_of(u.prompt_tokens)
                tally.last_answer_at = asyncio.get_running_loop().time()
            return response
        finally:
            with tally.lock:
                tally.in_flight -= 1

    routes = [r for r in app.router.routes()]
    fresh = web.Application(client_max_size=64 * 2**20)
    for key in (MODEL_KEY, CONFIG_KEY):
        fresh[key] = app[key]
    fresh.router.add_post("/v1/chat/completions", chat)
    for r in routes:
        if r.method == "GET":
            fresh.router.add_get(r.resource.canonical, r.handler)
    return fresh


@dataclass
class CountingEndpoint:
    base_url: str
    tally: Tally
    loop: asyncio.AbstractEventLoop

    def quiet_for(self, seconds: float, timeout: float = 60.0) -> None:
        """Wait until nothing was in flight and nothing answered for ``seconds`` (a killed run's
        workers may still be finishing a request)."""
        import time

        deadline = time.monotonic() + timeout
        last = None
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            with self.tally.lock:
                state = (self.tally.requests, self.tally.in_flight)
            if state != last or state[1]:
                last, quiet_since = state, time.monotonic()
            elif time.monotonic() - quiet_since >= seconds:
                return
            time.sleep(0.1)


@contextlib.contextmanager
def counting_endpoint(*, delay_s: float = 0.0, name: str = "counted") -> Iterator[CountingEndpoint]:
    """``with counting_endpoint(delay_s=0.2) as ep: ... ep.base_url ... ep.tally.snapshot()``"""
    from ray_knowsim.llm.offline import OfflineModel

    tally = Tally()
    app = counting_app(OfflineModel(name=name), tally, delay_s=delay_s)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["port"] = runner.addresses[0][1]
        state["stop"] = asyncio.Event()
        ready.set()
        try:
            await state["stop"].wait()
        finally:
            await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True, name="counting-endpoint")
    thread.start()
    ready.wait(30)
    try:
        yield CountingEndpoint(f"http://127.0.0.1:{state['port']}/v1", tally, loop)
    finally:
        loop.call_soon_threadsafe(state["stop"].set)
        thread.join(timeout=10)
        loop.close()


__all__ = ["CountingEndpoint", "Tally", "cached_of", "counting_endpoint"]
