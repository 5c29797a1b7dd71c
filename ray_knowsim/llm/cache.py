"""A disk cache of model responses inside a run directory, shared by every worker of the run.

Layout: ``<dir>/<host>-<pid>-<random>.jsonl``, one append-only file per writer (process and cache
object), so any number of processes, on one machine or on a shared file system, write without
locks; every reader indexes all files and picks up other writers' new lines on a miss. A line cut
short by a crash is ignored. Only the request fingerprint (a sha256) and the answer are stored:
no messages, no headers, no keys.

What is cached: answers the reader accepted, to requests that are reproducible, i.e.
temperature 0 or an explicit seed. :class:`CachedModel` does not write an answer when it arrives:
it attaches ``ChatResponse.commit`` to every successful, non-empty, untruncated answer, and the
reader (:func:`ray_knowsim.sim.ask.ask`) calls it once the answer parsed. Unparsable,
truncated (``finish_reason == "length"``) and failed answers therefore never enter the cache. Everything that decides the answer is in the key: the model's
identity (``cache_identity`` if the model has one, else its name), sampling parameters, messages,
schema, role and prompt version.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable

from ray_knowsim.model.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.llm.protocol import ChatModel

log = logging.getLogger(__name__)

CACHE_FORMAT = 1  # bump when the key recipe or the line format changes


def is_cacheable(request: ChatRequest) -> bool:
    """Reproducible requests only: greedy decoding, or sampling with a fixed seed."""
    return request.temperature == 0 or request.seed is not None


def model_identity(model: Any) -> Any:
    identity = getattr(model, "cache_identity", None)
    return identity if identity is not None else {"name": model.name}


def cache_key(identity: Any, request: ChatRequest) -> str:
    """sha256 over everything that decides the answer (request_id excluded: it varies)."""
    material = {
        "format": CACHE_FORMAT,
        "model": identity,
        "role": request.role,
        "temperature": float(request.temperature),
        "max_tokens": int(request.max_tokens),
        "seed": request.seed,
        "messages": [dict(m) for m in request.messages],
        "json_schema": request.json_schema,
        "schema_name": request.schema_name,
        "prompt_version": request.prompt_version,
    }
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Append-only JSON-lines files in ``directory``; see the module docstring."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._index: dict[str, tuple[Path, int, int]] = {}  # key -> (file, offset, length)
        self._offsets: dict[Path, int] = {}  # how far each file has been indexed
        self._readers: dict[Path, BinaryIO] = {}
        self._writer: BinaryIO | None = None
        self._writer_path: Path | None = None
        self._writer_pid: int | None = None
        self.bad_lines = 0
        with self._lock:
            self._refresh()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.directory)!r}, entries={len(self._index)})"

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": str(self.directory)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"])  # type: ignore[misc]

    def __len__(self) -> int:
        with self._lock:
            return len(self._index)

    # --- reading ---------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Index lines appended since the last look, by any writer."""
        for path in sorted(self.directory.glob("*.jsonl")):
            start = self._offsets.get(path, 0)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size <= start:
                continue
            with open(path, "rb") as fh:
                fh.seek(start)
                chunk = fh.read(size - start)
            pos = 0
            while True:
                end = chunk.find(b"\n", pos)
                if end < 0:
                    break  # a line still being written (or cut short by a crash)
                line = chunk[pos:end]
                try:
                    key = json.loads(line)["key"]
                    if not isinstance(key, str):
                        raise TypeError("key is not a string")
                    self._index.setdefault(key, (path, start + pos, end - pos))
                except (ValueError, KeyError, TypeError):
                    self.bad_lines += 1
                    log.warning("cache file %s: skipping an unreadable line at byte %d", path, start + pos)
                pos = end + 1
            self._offsets[path] = start + pos

    def _read(self, where: tuple[Path, int, int]) -> dict[str, Any]:
        path, offset, length = where
        fh = self._readers.get(path)
        if fh is None:
            fh = self._readers[path] = open(path, "rb")
        fh.seek(offset)
        return json.loads(fh.read(length))

    def get_many(self, keys: Iterable[str]) -> dict[str, ChatResponse]:
        """Hits among ``keys`` as responses marked cached (zero new usage, original remembered)."""
        wanted = set(keys)
        with self._lock:
            if wanted - self._index.keys():
                self._refresh()
            return {k: _entry_to_response(self._read(self._index[k])) for k in wanted if k in self._index}

    def get(self, key: str) -> ChatResponse | None:
        return self.get_many([key]).get(key)

    # --- writing ---------------------------------------------------------------------------

    def _open_writer(self) -> BinaryIO:
        pid = os.getpid()
        if self._writer is None or self._writer_pid != pid:  # a forked child writes its own file
            host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40]
            self._writer_path = self.directory / f"{host}-{pid}-{secrets.token_hex(4)}.jsonl"
            self._writer = open(self._writer_path, "ab")
            self._writer_pid = pid
        return self._writer

    def put(self, key: str, response: ChatResponse, *, model: str = "", prompt_version: str = "") -> bool:
        """Store a successful, non-empty answer; returns False (and stores nothing) otherwise."""
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
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        with self._lock:
            if key in self._index:
                return True
            fh = self._open_writer()
            offset = fh.seek(0, os.SEEK_END)
            fh.write(line)
            fh.flush()  # visible to other processes at once; a crash loses only the cache line
            if self._writer_path is None:
                raise RuntimeError("response cache: no writer file after opening one")
            self._index[key] = (self._writer_path, offset, len(line) - 1)
            self._offsets[self._writer_path] = offset + len(line)
        return True

    def close(self) -> None:
        with self._lock:
            for fh in self._readers.values():
                fh.close()
            self._readers.clear()
            if self._writer is not None:
                self._writer.close()
                self._writer = None


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
    counts as a cache hit.
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

    def __repr__(self) -> str:
        return f"CachedModel({self.inner!r}, {self.cache!r})"

    async def generate(self, request: ChatRequest) -> ChatResponse:
        if not is_cacheable(request):
            return await self.inner.generate(request)
        key = cache_key(self._identity, request)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        twin = self._in_flight.get(key)
        if twin is not None:  # the same request is out already: share its answer
            src = await asyncio.shield(twin)
            if src.error is not None:
                return replace(src, usage=Usage(), commit=None)
            return replace(src, usage=Usage(), latency_s=0.0, cached=True, original_usage=replace(src.usage), commit=None)
        call = asyncio.ensure_future(self.inner.generate(request))
        self._in_flight[key] = call
        call.add_done_callback(lambda _: self._in_flight.pop(key, None))
        answer = await asyncio.shield(call)  # a cancelled caller leaves the call to its twins
        if storable(answer):
            answer = replace(answer, commit=self._committer(key, answer, request.prompt_version))
        return answer

    def _committer(self, key: str, answer: ChatResponse, prompt_version: str) -> Callable[[], bool]:
        def commit() -> bool:
            return self.cache.put(key, answer, model=self.name, prompt_version=prompt_version)

        return commit

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
