"""The one way into Ray for every command (run, score, adaptive rounds, sweep): join a cluster,
or start a local one and stop it afterwards.

A local cluster is told one thing before ``ray.init``. Ray 2.60 turns token authentication on for a cluster that ``ray.init()`` starts while
``RAY_AUTH_MODE`` is unset, and then logs a warning about it on every start. Nothing is wrong;
the mode was just never chosen. So the run chooses Ray's own default explicitly, token
authentication (the token in ``~/.ray/auth_token``, created when missing), and Ray starts
without the warning. A ``RAY_AUTH_MODE`` the user set is left as it is.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator

AUTH_MODE_ENV = "RAY_AUTH_MODE"
#: the name under which ``ray.init(log_to_driver=True)`` registers the driver's printer of forwarded lines
_PRINTER = "ray_print_logs"


def choose_auth_mode() -> None:
    """Call right before ``ray.init(address="local", ...)``."""
    if AUTH_MODE_ENV in os.environ:
        return
    os.environ[AUTH_MODE_ENV] = "token"
    from ray._raylet import Config

    Config.initialize("")  # re-read the environment, as ray.init does itself when it turns token auth on


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None, object_store_mb: int = 384,
                quiet: bool = False) -> Iterator[bool]:
    """Join ``address`` (or RAY_ADDRESS, which ``ray job submit`` sets), else start a local Ray
    with ``num_cpus`` (all cores when None) and stop it afterwards; an embedding process that
    already runs Ray (tests, notebooks) keeps it. Yields whether this process started Ray."""
    import ray
    from ray.data import DataContext

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-dataset INFO lines on the terminal
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)  # "progress bars disabled"
    if ray.is_initialized():
        DataContext.get_current().enable_progress_bars = False
        yield False
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        ray.init(address=address, logging_level="WARNING", log_to_driver=not quiet)
    else:
        choose_auth_mode()  # token auth, chosen (Ray's default) rather than defaulted with a warning
        ray.init(address="local", num_cpus=num_cpus, object_store_memory=object_store_mb * 2**20,
                 include_dashboard=False, logging_level="WARNING", log_to_driver=not quiet)  # fmt: skip
    try:
        DataContext.get_current().enable_progress_bars = False
        yield not address
    finally:
        ray.shutdown()


def split_forwarded(data: dict[str, Any], divert: Callable[[str], bool]) -> tuple[dict[str, Any] | None, list[str]]:
    """(the batch Ray forwarded without the lines ``divert`` picks -- None when none is left, the
    picked lines): pure, so what is kept off the terminal is tested without a cluster."""
    lines = list(data.get("lines") or [])
    picked = [line for line in lines if divert(line)]
    if not picked:
        return data, []
    kept = [line for line in lines if not divert(line)]
    return ({**data, "lines": kept} if kept else None), picked


def divert_forwarded_lines(divert: Callable[[str], bool], write: Callable[[str], None]) -> bool:
    """Send the lines Ray forwards to this driver (workers', the GCS's) that ``divert`` picks to
    ``write`` instead of the terminal; the rest print as before. Ray's printer is wrapped under its
    own name, so ``ray.shutdown`` removes the wrapper with it. False where nothing is forwarded
    (``log_to_driver=False``: a quiet run) or it is wrapped already."""
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

    printers = [h for name, h in dispatcher.handlers if name == _PRINTER]
    if len(printers) != 1 or getattr(printers[0], "diverts", False):
        return False

    def printer(data: dict[str, Any], _print: Callable[[dict[str, Any]], None] = printers[0]) -> None:
        kept, picked = split_forwarded(data, divert)
        for line in picked:
            write(f"({data.get('pid')}) {line}")
        if kept is not None:
            _print(kept)

    printer.diverts = True  # type: ignore[attr-defined]
    with dispatcher._lock:  # one swap: no batch is printed by neither
        dispatcher.handlers = [(name, printer if name == _PRINTER else h) for name, h in dispatcher.handlers]
    return True


__all__ = ["choose_auth_mode", "divert_forwarded_lines", "ray_session", "split_forwarded"]
