"""Requests to a running viewer, as a browser makes them: a GET's (status, headers, text), and the
index page's entries."""

from __future__ import annotations

import re
import urllib.error
import urllib.request


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode("utf-8", "replace")


def ids(base: str) -> dict[str, str]:
    """label -> URL path of every entry on the index page."""
    _, _, body = get(base)
    return {label: path for path, label in re.findall(r'href="(/(?:run|sweep|compare)/[0-9a-f]+)"[^>]*>served/([^<]+)<', body)}


def served_run_page(folder, name: str) -> str:
    """The run page of the run ``folder/name``, as a viewer serving ``folder`` answers it (started
    on a free loopback port and stopped again)."""
    import threading

    from ray_knowsim.view.data import Files
    from ray_knowsim.view.discover import discover
    from ray_knowsim.view.routes import ViewState
    from ray_knowsim.view.server import serve

    state = ViewState(Files([folder]))
    ready: list[str] = []
    started, stop = threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(state, "127.0.0.1", 0, lambda u: (ready.append(u), started.set()), stop), daemon=True)
    thread.start()
    assert started.wait(30), "the viewer did not start"
    try:
        found = {en.path.name: en.id for en in discover(state.files)}
        status, _, body = get(f"{ready[0]}run/{found[name]}")
        assert status == 200, (status, body[:500])
        return body
    finally:
        stop.set()
        thread.join(10)
