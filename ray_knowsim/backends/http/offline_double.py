"""Which ``http`` model entries of a run point at ``ray-knowsim serve-offline``, the offline test
double behind a real socket, so that the run sends it the facts it answers from.

Why: the offline model never parses prompt text; it answers each role from the facts the renderers
hand it out of band (the ``knowsim_offline_facts`` body extension, sent only for an entry with
``offline_server: true``). Without them every structured request fails (``offline_unknown_prompt``)
and the stand-in tutor can only echo. A user trying the own-tutor recipe with the stand-in the
README names should not need to know that flag: serve-offline's models list marks its model
(``knowsim_offline_double: true``; llm/offline/server.py), and ``ray-knowsim run`` reads that list before
the run and sets ``offline_server: true`` on exactly those entries, saying so. No other server
sets the mark, so the facts still never reach a real model; an entry that already says
``offline_server: true`` is left alone, and ``--no-preflight`` (where the driver cannot reach the
endpoints) asks nothing, so such a run needs the setting written out (the stand-in's error says so).

The question is one ``GET {base_url}/models`` per entry, without the entry's key (the mark needs
none). A refused connection is asked again for a few seconds: a server started with ``&`` on the
line before the run is often not listening yet (the README's stand-in block, pasted, lost 14 of 14
sessions to that race before). An endpoint that still does not answer is not the double (the
pre-flight check reports it).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ray_knowsim.backends.model_set import used_model_keys
from ray_knowsim.llm.http.wire import OFFLINE_DOUBLE_FIELD

#: the longest the question waits for one endpoint (its own connect timeout when that is shorter)
ASK_TIMEOUT_S = 5.0
#: how long a refused connection is asked again (a server still starting up)
STARTING_UP_S = 10.0


def is_offline_double(base_url: str, model: str, timeout_s: float = ASK_TIMEOUT_S,
                      starting_up_s: float | None = None) -> bool:
    """Whether the endpoint's models list marks ``model`` as the offline test double; a refused
    connection is asked again every quarter second for ``starting_up_s`` (:data:`STARTING_UP_S`)."""
    deadline = time.monotonic() + (STARTING_UP_S if starting_up_s is None else starting_up_s)
    while True:
        try:
            with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout_s) as resp:
                body = json.loads(resp.read())
            break
        except (urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            if not isinstance(reason, ConnectionRefusedError) or time.monotonic() >= deadline:
                return False
            time.sleep(0.25)
        except (OSError, ValueError):
            return False
    data = body.get("data") if isinstance(body, dict) else None
    return any(isinstance(d, dict) and d.get("id") == model and d.get(OFFLINE_DOUBLE_FIELD) is True for d in data or ())


def offline_double_keys(cfg: Any) -> list[str]:
    """The used ``http`` entries without ``offline_server: true`` whose endpoint is serve-offline."""
    keys = [k for k in used_model_keys(cfg)
            if cfg.models[k].backend == "http" and not getattr(cfg.models[k], "offline_server", True)]
    if not keys:
        return []
    with ThreadPoolExecutor(max_workers=len(keys)) as pool:
        found = list(pool.map(lambda k: is_offline_double(cfg.models[k].base_url, cfg.models[k].model,
                                                          min(ASK_TIMEOUT_S, cfg.models[k].connect_timeout_s)), keys))
    return [k for k, yes in zip(keys, found) if yes]


def adopt_offline_doubles(cfg: Any) -> tuple[Any, list[str]]:
    """``cfg`` with ``offline_server: true`` on every entry whose endpoint is serve-offline, and one
    line per such entry for the terminal (the manifest records the setting with the config)."""
    keys = offline_double_keys(cfg)
    if not keys:
        return cfg, []
    models = dict(cfg.models)
    for key in keys:
        entry = models[key]
        models[key] = type(entry).model_validate({**entry.model_dump(), "offline_server": True})
    lines = [f"models.{k}: {cfg.models[k].base_url} is `ray-knowsim serve-offline` (the offline test double; its models "
             "list says so): its requests carry the facts it answers from (offline_server: true)" for k in keys]
    return cfg.model_copy(update={"models": models}), lines


__all__ = ["adopt_offline_doubles", "is_offline_double", "offline_double_keys"]
