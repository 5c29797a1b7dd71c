"""A delaying proxy in front of an OpenAI-compatible server: hosted-API latency for benchmarks.

A constant-delay server cannot show what a heavy tail costs a scheduler; this proxy holds each
answer of ``--upstream`` (e.g. ``ray-knowsim serve-offline``) for a delay drawn from the chosen
distribution, so a benchmark sees the tail a hosted API has (log-normal with median 0.4 s and
log-sd 1.0 gives a p99 of about 4.1 s). The delay is a function of the request body and
``--seed`` only (a hash, never a shared random generator), so a rerun, or another scheduler
asking the same requests in another order, meets the same delays.

Every served delay is recorded with the request's ``X-KnowSim-Request-Id`` header
(``<session>#<turn>:<role>``, sent by the HTTP backend with ``send_knowsim_headers: true``):
``GET /delays`` returns them, so a benchmark computes its ideal from what was actually served.

    python scripts/bench/latency_proxy.py --upstream http://127.0.0.1:8011 --median-s 0.4 --log-sd 1.0

It listens on 127.0.0.1 (``--port 0``: a free port, printed as ``listening on PORT``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import statistics
import sys
import time

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

REQUEST_ID_HEADER = "X-KnowSim-Request-Id"
_NORMAL = statistics.NormalDist()


def delay_for(body: bytes, *, dist: str, median_s: float, log_sd: float, seed: int) -> float:
    """The delay of the request with this body: ``median_s`` (constant), or log-normal with median
    ``median_s`` and log-sd ``log_sd`` from a standard normal drawn by hashing (seed, body)."""
    if dist == "constant" or log_sd == 0:
        return median_s
    digest = hashlib.sha256(seed.to_bytes(8, "big", signed=True) + body).digest()
    u = (int.from_bytes(digest[:8], "big") + 0.5) / 2**64  # in (0, 1)
    return median_s * math.exp(log_sd * _NORMAL.inv_cdf(u))


def build_app(upstream: str, *, dist: str, median_s: float, log_sd: float, seed: int) -> web.Application:
    served: list[dict] = []
    app = web.Application(client_max_size=64 * 2**20)
    state: dict[str, ClientSession] = {}

    async def start(app: web.Application) -> None:
        state["client"] = ClientSession(connector=TCPConnector(limit=0), timeout=ClientTimeout(total=600))

    async def stop(app: web.Application) -> None:
        await state["client"].close()

    async def chat(request: web.Request) -> web.Response:
        body = await request.read()
        t0 = time.time()
        delay = delay_for(body, dist=dist, median_s=median_s, log_sd=log_sd, seed=seed)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with state["client"].post(upstream.rstrip("/") + "/v1/chat/completions", data=body, headers=headers) as up:
            raw, status, ctype = await up.read(), up.status, up.content_type
        await asyncio.sleep(max(0.0, delay - (time.time() - t0)))  # the answer leaves after the delay
        served.append({"request_id": request.headers.get(REQUEST_ID_HEADER, ""), "delay_s": delay,
                       "start": t0, "end": time.time(), "status": status})
        return web.Response(body=raw, status=status, content_type=ctype)

    async def delays(request: web.Request) -> web.Response:
        return web.json_response(served)

    async def passthrough_get(request: web.Request) -> web.Response:
        async with state["client"].get(upstream.rstrip("/") + request.path) as up:
            return web.Response(body=await up.read(), status=up.status, content_type=up.content_type)

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/delays", delays)
    app.router.add_get("/v1/models", passthrough_get)
    app.router.add_get("/health", passthrough_get)
    return app


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream", required=True, help="base URL of the server behind the proxy (without /v1)")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--dist", choices=("constant", "lognormal"), default="lognormal")
    p.add_argument("--median-s", type=float, default=0.4, help="the delay (constant) or its median (log-normal)")
    p.add_argument("--log-sd", type=float, default=1.0, help="log-normal: standard deviation of log(delay)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.median_s < 0 or args.log_sd < 0:
        print("latency_proxy: --median-s and --log-sd must be >= 0", file=sys.stderr)
        return 2
    app = build_app(args.upstream, dist=args.dist, median_s=args.median_s, log_sd=args.log_sd, seed=args.seed)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None,
                print=lambda _msg: print("latency proxy ready", flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
