"""A disk cache of model responses inside a run directory, one folder per shard.

Layout: ``<cache dir>/<unit>/<host>-<pid>-<random>.jsonl``. A *unit* is what resumes as one piece:
a shard of the simulation (its id), or a scoring pass. A unit's cache is opened by the one task
that runs the unit, which reads that unit's files once (every earlier attempt's: a shard retried
by Ray on another node, or resumed by a later command, finds what the attempts before it stored)
and then answers from memory: a miss is a miss, no other worker's file is ever read. Each writer
appends to a file of its own, so attempts never share a file and no lock is needed; a line cut
short by a crash is ignored. No file I/O happens on the event loop: the unit is read in a thread
(:meth:`ResponseCache.aget`), and lines are written by a writer thread fed from a queue.

What is cached: answers the reader accepted, to requests that are reproducible, i.e.
temperature 0 or an explicit seed. :class:`CachedModel` does not write an answer when it arrives:
it attaches ``ChatResponse.commit`` to every successful, non-empty, untruncated answer, and the
reader (:func:`ray_knowsim.sim.ask.ask`) calls it once the answer parsed. Unparsable, truncated
(``finish_reason == "length"``) and failed answers therefore never enter the cache.

The key covers everything that changes an answer and nothing that does not: the model's answer
identity (``cache_identity``: for an endpoint its URL, model, output and thinking settings,
:data:`ray_knowsim.llm.http.config.ANSWER_FIELDS`; never its timeouts, limits, key or price) and
the request's :data:`REQUEST_FIELDS`. Only the key (a sha256) and the answer are stored: no
messages, no headers, no keys.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import queue
import re
import secrets
import socket
import threading
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Callable

from ray_knowsim.llm.protocol import ChatModel, reports_leaving
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage

log = logging.getLogger(__name__)

CACHE_FORMAT = 2  # bump when the key recipe or the layout changes (2: per-unit folders, answer identities)

#: Every field of a :class:`ChatRequest`, by whether it can change the answer. In the key: the
#: messages, the role (different parsers and, for our own server, different answers), sampling
#: (temperature, seed, the token cap), the output schema and its name, and the prompt version.
REQUEST_FIELDS = ("messages", "role", "temperature", "max_tokens", "seed", "json_schema", "schema_name", "prompt_version")
#: Not in the key: the request id names a session's turn, not what is asked (a resumed or
#: re-planned run asks the same thing under the same or another id); the offline facts are the
#: test double's view of what the messages already say.
REQUEST_IGNORED = ("request_id", "offline_facts")

_UNIT_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def is_cacheable(request: ChatRequest) -> bool:
    """Reproducible requests only: greedy decoding, or sampling with a fixed seed."""
    return request.temperature == 0 or request.seed is not None


def model_identity(model: Any) -> Any:
    """What besides the request decides ``model``'s answers: its ``cache_identity`` if it has one
    (every built-in backend does), else its name."""
    identity = getattr(model, "cache_identity", None)
    return identity if identity is not None else {"name": model.name}


def _field_value(request: ChatRequest, name: str) -> Any:
    value = getattr(request, name)
    if name == "messages":
        return [dict(m) for m in value]
    if name == "temperature":
        return float(value)  # 0 and 0.0 are one key
    return value


def cache_key(identity: Any, request: ChatRequest) -> str:
    """sha256 over the model's answer identity and the request's :data:`REQUEST_FIELDS`."""
    material = {"format": CACHE_FORMAT, "model": identity, **{n: _field_value(request, n) for n in REQUEST_FIELDS}}
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _check_request_fields() -> None:
    """Every request field is decided on: a new one must be put in the key or left out, knowingly."""
    names = {f.name for f in fields(ChatRequest)}
    decided = set(REQUEST_FIELDS) | set(REQUEST_IGNORED)
    if names != decided:
        raise RuntimeError(f"llm/cache.py: ChatRequest fields {sorted(names ^ decided)} are not classified for the cache key")


_check_request_fields()


def unit_folder(cache_dir: str | os.PathLike[str], unit: str) -> Path:
    """The folder of one unit (a shard id, a scoring pass) inside a run's cache folder."""
    name = _UNIT_BAD.sub("_", unit).strip(".") or "_"
    return Path(cache_dir) / name


class ResponseCache:
    """One unit's answers: its files read once, new answers appended by a writer thread."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] | None = None  # key -> stored entry, once loaded
        self._queue: queue.SimpleQueue[bytes | None] | None = None
        self._writer: threading.Thread | None = None
        self._writer_pid: int | None = None
        self._write_errors = 0
        self.bad_lines = 0

    def __repr__(self) -> str:
        n = "?" if self._entries is None else len(self._entries)
        return f"ResponseCache({str(self.directory)!r}, entries={n})"

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": str(self.directory)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"])  # type: ignore[misc]

    def __len__(self) -> int:
        return len(self._load())

    # --- reading ---------------------------------------------------------------------------

    def _load(self) -> dict[str, dict[str, Any]]:
        """Read this unit's files (once; later calls return what is in memory)."""
        with self._lock:
            if self._entries is not None:
                return self._entries
            entries: dict[str, dict[str, Any]] = {}
            for path in sorted(self.directory.glob("*.jsonl")) if self.directory.is_dir() else []:
                for number, line in enumerate(path.read_bytes().split(b"\n")):
                    if not line:
                        continue
                    try:
                        entry = json.loads(line)
                        if not isinstance(entry.get("key"), str):
                            raise TypeError("key is not a string")
                    except (ValueError, TypeError, AttributeError):
                        self.bad_lines += 1  # a line cut short by a crash, most likely
                        log.warning("cache file %s: skipping unreadable line %d", path, number + 1)
                        continue
                    entries.setdefault(entry["key"], entry)
            self._entries = entries
            return entries

    def get(self, key: str) -> ChatResponse | None:
        """A hit as a response marked cached (zero new usage, the original usage remembered).
        Reads the unit's files on first use: call :meth:`aget` from an event loop."""
        entry = self._load().get(key)
        return None if entry is None else _entry_to_response(entry)

    async def aget(self, key: str) -> ChatResponse | None:
        """:meth:`get` for an event loop: the first call reads the unit's files in a thread."""
        if self._entries is None:
            await asyncio.to_thread(self._load)
        return self.get(key)

    # --- writing ---------------------------------------------------------------------------

    def put(self, key: str, response: ChatResponse, *, model: str = "", prompt_version: str = "") -> bool:
        """Store a successful, non-empty answer (in memory at once, on disk by the writer thread);
        returns False (and stores nothing) otherwise. Never waits for the disk."""
        if not storable(response):
            return False
        entry = {
            "key": key,
            "model": model,
            "prompt_version": prompt_version,
            "text": response.text,
            "finish_reason": response.finish_reason,
            "usage": [response.usage.prompt_tokens, response.usage.completion_tokens],
            "latency_s": response.latency_s,
            "created": time.time(),
        }
        entries = self._load() if self._entries is None else self._entries
        with self._lock:
            if key in entries:
                return True
            entries[key] = entry
            self._writer_queue().put(json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
        return True

    def _writer_queue(self) -> queue.SimpleQueue[bytes | None]:
        pid = os.getpid()
        if self._queue is None or self._writer_pid != pid:  # a forked child writes its own file
            host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40]
            path = self.directory / f"{host}-{pid}-{secrets.token_hex(4)}.jsonl"
            self._queue = queue.SimpleQueue()
            self._writer = threading.Thread(target=self._write, args=(path, self._queue), name="knowsim-cache-writer",
                                            daemon=True)
            self._writer_pid = pid
            self._writer.start()
        return self._queue

    def _write(self, path: Path, lines: queue.SimpleQueue[bytes | None]) -> None:
        """The writer thread: append each line as it comes (a crash loses only lines not yet written)."""
        fh = None
        try:
            while (line := lines.get()) is not None:
                try:
                    if fh is None:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        fh = open(path, "ab")
                    fh.write(line)
                    fh.flush()
                except OSError as exc:  # a full or gone disk: answers stay in memory, the run goes on
                    self._write_errors += 1
                    if self._write_errors == 1:
                        log.warning("response cache %s: cannot write (%s); later runs will ask again", path, exc)
        finally:
            if fh is not None:
                fh.close()

    def close(self) -> None:
        """Write what is queued and stop the writer thread (the cache can be written to again)."""
        with self._lock:
            lines, writer = self._queue, self._writer
            self._queue = self._writer = self._writer_pid = None
        if lines is not None and writer is not None:
            lines.put(None)
            writer.join()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def storable(response: ChatResponse) -> bool:
    """A fresh, successful, non-empty answer that was not cut by max_tokens."""
    return response.error is None and bool(response.text) and not response.cached and response.finish_reason != "length"


def _entry_to_response(entry: dict[str, Any]) -> ChatResponse:
    prompt, completion = entry["usage"]
    return ChatResponse(
        text=entry["text"],
        usage=Usage(),
        latency_s=0.0,
        cached=True,
        finish_reason=entry.get("finish_reason"),
        original_usage=Usage(int(prompt), int(completion)),
    )


class CachedModel:
    """A ChatModel that answers reproducible requests from a ResponseCache before asking ``inner``.

    A request identical to one still in flight is not sent again: it waits for that answer, and
    counts as a cache hit. ``aclose`` closes the cache too (its writer thread drains).
    """

    def __init__(self, inner: ChatModel, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self._identity = model_identity(inner)
        self._in_flight: dict[str, asyncio.Future[ChatResponse]] = {}

    @property
    def cache_identity(self) -> Any:
        return self._identity

    @property
    def reports_leaving(self) -> bool:
        return reports_leaving(self.inner)  # a hit never leaves; a miss is the inner model's request

    def __repr__(self) -> str:
        return f"CachedModel({self.inner!r}, {self.cache!r})"

    async def generate(self, request: ChatRequest) -> ChatResponse:
        if not is_cacheable(request):
            return await self.inner.generate(request)
        key = cache_key(self._identity, request)
        twin = self._in_flight.get(key)
        if twin is not None:  # the same request is being answered already: share its answer
            src, _ = await asyncio.shield(twin)
            if src.cached or src.error is not None:
                return replace(src, usage=Usage(), commit=None)
            return replace(src, usage=Usage(), latency_s=0.0, cached=True, original_usage=replace(src.usage), commit=None)
        # registered before the first await: the lookup is part of the unit a twin waits for, so
        # identical requests issued together go out once however long the lookup takes
        call = asyncio.ensure_future(self._look_up_or_ask(key, request))
        self._in_flight[key] = call
        call.add_done_callback(lambda _: self._in_flight.pop(key, None))
        answer, asked = await asyncio.shield(call)  # a cancelled caller leaves the call to its twins
        if asked and storable(answer):
            answer = replace(answer, commit=self._committer(key, answer, request.prompt_version))
        return answer

    async def _look_up_or_ask(self, key: str, request: ChatRequest) -> tuple[ChatResponse, bool]:
        """(the answer, whether the model was asked)."""
        hit = await self.cache.aget(key)
        if hit is not None:
            return hit, False
        return await self.inner.generate(request), True

    def _committer(self, key: str, answer: ChatResponse, prompt_version: str) -> Callable[[], bool]:
        def commit() -> bool:
            return self.cache.put(key, answer, model=self.name, prompt_version=prompt_version)

        return commit

    async def aclose(self) -> None:
        await self.cache.aclose()
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


__all__ = ["CACHE_FORMAT", "REQUEST_FIELDS", "REQUEST_IGNORED", "CachedModel", "ResponseCache", "cache_key", "is_cacheable",
           "model_identity", "storable", "unit_folder"]
