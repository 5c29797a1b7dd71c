"""The viewer's HTTP server (aiohttp): routes, security headers, and the blocking ``serve``.

Safety, in layers:

* **What is served.** Pages are named by fixed words and entry ids (hashes), never by a file
  path. The one route that takes a path (``/file/<entry>/<path>``) accepts only a plain relative
  path with an allowed suffix, and ``view.data`` resolves it (symlinks followed) and refuses
  anything outside the entry's folder. Before routing, a request whose raw path holds a dot
  segment, a backslash, a NUL or a second layer of percent-encoding is refused outright.
* **Model text stays inert.** Every page is rendered and escaped on the server; the one script
  (/static/view.js) never writes run text into the page. Each response carries a strict
  Content-Security-Policy (scripts and styles only from /static, no inline code, images from
  the app or data: URIs, nothing framed, forms only to the app), so even a missed escape could
  not run a script. HTML files a run folder holds (the report, compare's leaderboard) are served
  sandboxed, without scripts.
* **Only the local user.** It binds 127.0.0.1 by default, and then answers only requests whose
  Host header names the loopback address it listens on (a web page elsewhere cannot reach it
  through DNS rebinding).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import threading
from importlib import resources
from typing import Awaitable, Callable
from urllib.parse import unquote

from aiohttp import web

from ray_knowsim.report.conversation_html import CONVERSATION_CSS
from ray_knowsim.report.html_page import RESULTS_CSS
from ray_knowsim.report.outcomes import CSS as OUTCOME_CSS
from ray_knowsim.view import routes
from ray_knowsim.view.pages_outputs import error_page

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
APP_STATE = web.AppKey("view_state", routes.ViewState)
HOSTS = web.AppKey("allowed_hosts", set)


def unsafe_raw_path(raw_path: str) -> bool:
    """A request path with a dot segment, a backslash, a NUL or a doubly encoded character
    (checked on the path as sent and after one decoding)."""
    path = raw_path.split("?", 1)[0]
    once = unquote(path)
    for text in (path, once):
        if "\\" in text or "\x00" in text:
            return True
        if any(seg in (".", "..") for seg in text.split("/")):
            return True
    return "%" in once  # a second encoding layer: %252e decodes to %2e


def static_assets() -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, content type): the app's stylesheet (+ the shared conversation rules) and script."""
    folder = resources.files("ray_knowsim.view") / "assets"
    css = ((folder / "view.css").read_text(encoding="utf-8") + "\n/* results tables (report/html_page.py, report/outcomes.py) */\n"
           + RESULTS_CSS + OUTCOME_CSS + "\n/* conversation (report/conversation_html.py) */\n" + CONVERSATION_CSS)
    js = (folder / "view.js").read_text(encoding="utf-8")
    return {"view.css": (css.encode(), "text/css"), "view.js": (js.encode(), "text/javascript")}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@web.middleware
async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """Refuse foreign hosts and odd paths, turn errors into pages, add the security headers."""
    hosts = request.app[HOSTS]
    try:
        if hosts and request.headers.get("Host", "").lower() not in hosts:
            raise web.HTTPMisdirectedRequest(text="this viewer answers only on the address it listens on")
        if unsafe_raw_path(request.raw_path):
            raise web.HTTPBadRequest(text="refused: the path holds '..', '.', a backslash, a NUL or a doubly encoded character")
        if request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD"])
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = web.Response(status=exc.status, text=error_page(exc.status, exc.text or exc.reason), content_type="text/html")
    except Exception as exc:  # a page that cannot be built says so; the server keeps serving
        response = web.Response(status=500, text=error_page(500, f"could not build this page: {type(exc).__name__}: {exc}"),
                                content_type="text/html")
    for key, value in HEADERS.items():
        response.headers.setdefault(key, value)
    response.headers.setdefault("Content-Security-Policy", CSP)
    return response


def make_app(state: routes.ViewState) -> web.Application:
    app = web.Application(middlewares=[guard])
    app[APP_STATE] = state
    app[HOSTS] = set()
    assets = static_assets()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="view")  # matplotlib's pyplot is not thread-safe

    def page(build: Callable[[routes.ViewState, web.Request], web.StreamResponse]):
        async def handler(request: web.Request) -> web.StreamResponse:
            return await asyncio.get_running_loop().run_in_executor(pool, build, state, request)
        return handler

    async def static(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in assets:
            raise web.HTTPNotFound(text=f"no asset {name}")
        body, ctype = assets[name]
        return web.Response(body=body, content_type=ctype, charset="utf-8")

    app.router.add_get("/", page(routes.index))
    app.router.add_get("/run/{id}", page(routes.run_overview))
    app.router.add_get("/run/{id}/sessions", page(routes.run_sessions))
    app.router.add_get("/run/{id}/conversation", page(routes.run_conversation))
    app.router.add_get("/sweep/{id}", page(routes.sweep))
    app.router.add_get("/compare/{id}", page(routes.compare))
    app.router.add_get("/file/{id}/{tail:.+}", page(routes.file))
    app.router.add_get("/static/{name}", static)

    async def closing(_app: web.Application) -> None:
        pool.shutdown(wait=False, cancel_futures=True)

    app.on_cleanup.append(closing)
    return app


async def start(state: routes.ViewState, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Start serving; returns the runner and the base URL (``port`` 0 picks a free port)."""
    app = make_app(state)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1] if site._server and site._server.sockets else port  # type: ignore[union-attr]
    if is_loopback(host):
        names = {host, "127.0.0.1", "localhost", "[::1]"}
        app[HOSTS].update(f"{n}:{bound}".lower() for n in names)
    shown = f"[{host}]" if ":" in host else host
    return runner, f"http://{shown}:{bound}/"


def serve(state: routes.ViewState, host: str, port: int, ready: Callable[[str], None],
          stop: threading.Event | None = None) -> None:
    """Serve until interrupted (or until ``stop`` is set); ``ready`` gets the URL once listening."""

    async def main() -> None:
        runner, url = await start(state, host, port)
        ready(url)
        try:
            while stop is None or not stop.is_set():
                await asyncio.sleep(0.2)
        finally:
            await runner.cleanup()

    asyncio.run(main())


__all__ = ["CSP", "is_loopback", "make_app", "serve", "start", "static_assets", "unsafe_raw_path"]
