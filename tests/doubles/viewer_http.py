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
