"""A lean HTTP/1.1 client for plain ``http://`` endpoints (a self-hosted vLLM, the offline server,
a proxy on the cluster): POST a body, read the answer, keep the connection for the next request.

Why not aiohttp here: at a thousand sessions in flight its request and response machinery cost
about a third of a millisecond of client CPU per request, a quarter of everything the client does
for a request (docs/performance.md). This client does only what the model client needs: one
``asyncio.Protocol`` per connection parsing the status line, the headers and a body framed by
``Content-Length``, ``Transfer-Encoding: chunked`` or the end of the connection; keep-alive
(HTTP/1.1 unless ``Connection: close``; HTTP/1.0 only with ``Connection: keep-alive``), idle
connections reused last-in first-out and dropped when the server closes them; a total timeout over
connect, send and read (asyncio's ``TimeoutError``), a connect timeout of its own
(:class:`ConnectTimedOut`), and the failures the model client maps as it does aiohttp's:
:class:`ConnectFailed` (never sent: refused, no such host), :class:`ConnectionBroken` (reset, cut
short, unreadable framing: the server may have seen it). Hosted ``https://`` endpoints keep aiohttp
(TLS, proxies, HTTP/2-fronted providers). ``RAY_KNOWSIM_HTTP_TRANSPORT=aiohttp`` sends plain http
through aiohttp too.
"""

from __future__ import annotations

import asyncio
import os
import zlib
from typing import Mapping
from urllib.parse import urlsplit

#: the environment variable that sends plain-http endpoints through aiohttp instead
TRANSPORT_ENV = "RAY_KNOWSIM_HTTP_TRANSPORT"


def use_plain(url: str) -> bool:
    """Whether requests to ``url`` go through this client (plain http, unless the environment
    asks for aiohttp)."""
    return url.startswith("http://") and os.environ.get(TRANSPORT_ENV, "").strip().lower() != "aiohttp"


class ConnectFailed(OSError):
    """No connection could be made (refused, unknown host): the request was never sent."""


class ConnectTimedOut(Exception):
    """No connection within the connect timeout: the request was never sent."""


class ConnectionBroken(Exception):
    """The connection closed or broke before a whole answer came (or the answer was not HTTP)."""


class Response:
    """A whole answer: status, headers (lower-case names; repeated ones joined by ``", "``), body."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


_NO_BODY = frozenset({204, 304})
_BAD_HEADER_CHARS = ("\r", "\n", "\0")


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request on it at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._waiter: asyncio.Future | None = None
        self._buf = bytearray()
        self._reset()

    def _reset(self) -> None:
        self._status = 0
        self._headers: dict[str, str] | None = None
        self._keep_alive = True
        self._length: int | None = None  # Content-Length framing
        self._chunked = False
        self._chunks: list[bytes] = []
        self._chunk_left = -1  # bytes left of the current chunk (+2 for its CRLF); -1: read a size line
        self._trailers = False

    # --- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():  # bytes nobody asked for: the stream is lost
            self.close()
            return
        self._buf += data
        try:
            done = self._parse()
        except ConnectionBroken as exc:
            self._fail(exc)
            return
        if done is not None:
            waiter, self._waiter = self._waiter, None
            if not self._keep_alive:
                self.close()
            waiter.set_result(done)

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        self._waiter = None
        if self._headers is not None and self._length is None and not self._chunked:
            # framed by the end of the connection: what came is the body
            waiter.set_result(Response(self._status, self._headers, self._decoded(bytes(self._buf))))
        else:
            waiter.set_exception(ConnectionBroken(f"connection closed before the whole answer came ({exc!r})"))

    # --- the request ---------------------------------------------------------------------------

    async def request(self, data: bytes) -> Response:
        if self.closed or self.transport is None:
            raise ConnectionBroken("connection closed")
        self._reset()
        self._buf.clear()
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return await self._waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    # --- parsing -------------------------------------------------------------------------------

    def _parse(self) -> Response | None:
        """A whole response when the buffer holds one, else None (wait for more)."""
        buf = self._buf
        while self._headers is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > 1 << 20:
                    raise ConnectionBroken("response head over 1 MiB")
                return None
            head = bytes(buf[:end]).decode("latin-1")
            del buf[: end + 4]
            self._read_head(head)
            if self._headers is None:  # an interim 1xx answer: the real one follows
                continue
            if self._status in _NO_BODY or 100 <= self._status < 200:
                self._length = 0
        if self._chunked:
            return self._parse_chunks()
        if self._length is not None:
            if len(buf) < self._length:
                return None
            if len(buf) > self._length:
                raise ConnectionBroken("more bytes than Content-Length says")
            return Response(self._status, self._headers, self._decoded(bytes(buf)))
        return None  # read until the server closes

    def _read_head(self, head: str) -> None:
        lines = head.split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
            raise ConnectionBroken(f"not an HTTP/1 status line: {lines[0][:80]!r}")
        status = int(status_line[1])
        if 100 <= status < 200 and status != 101:
            return  # 100 Continue, 103 Early Hints: skip
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ConnectionBroken(f"bad header line: {line[:80]!r}")
            name, value = name.strip().lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        connection = headers.get("connection", "").lower()
        if status_line[0] == "HTTP/1.0":
            self._keep_alive = "keep-alive" in connection
        else:
            self._keep_alive = "close" not in connection
        encoding = headers.get("transfer-encoding", "").lower()
        if encoding:
            if encoding.rsplit(",", 1)[-1].strip() != "chunked":
                raise ConnectionBroken(f"unsupported Transfer-Encoding {encoding!r}")
            self._chunked = True
        elif "content-length" in headers:
            try:
                lengths = {int(v) for v in headers["content-length"].split(",")}
            except ValueError:
                raise ConnectionBroken(f"bad Content-Length {headers['content-length']!r}") from None
            if len(lengths) != 1 or min(lengths) < 0:
                raise ConnectionBroken(f"bad Content-Length {headers['content-length']!r}")
            self._length = lengths.pop()
        else:
            self._keep_alive = False  # framed by the end of the connection
        self._status, self._headers = status, headers

    def _parse_chunks(self) -> Response | None:
        buf = self._buf
        while True:
            if self._trailers:
                if buf[:2] == b"\r\n":
                    del buf[:2]
                elif (end := buf.find(b"\r\n\r\n")) >= 0:
                    del buf[: end + 4]
                else:
                    return None
                if buf:
                    raise ConnectionBroken("bytes after the last chunk")
                assert self._headers is not None
                return Response(self._status, self._headers, self._decoded(b"".join(self._chunks)))
            if self._chunk_left < 0:
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > 4096:
                        raise ConnectionBroken("chunk size line too long")
                    return None
                size_text = bytes(buf[:end]).split(b";", 1)[0].strip()
                del buf[: end + 2]
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise ConnectionBroken(f"bad chunk size {size_text[:20]!r}") from None
                if size < 0:
                    raise ConnectionBroken("negative chunk size")
                if size == 0:
                    self._trailers = True
                    continue
                self._chunk_left = size + 2
            if len(buf) < self._chunk_left:
                return None
            if buf[self._chunk_left - 2: self._chunk_left] != b"\r\n":
                raise ConnectionBroken("chunk not followed by CRLF")
            self._chunks.append(bytes(buf[: self._chunk_left - 2]))
            del buf[: self._chunk_left]
            self._chunk_left = -1

    def _decoded(self, body: bytes) -> bytes:
        assert self._headers is not None
        coding = self._headers.get("content-encoding", "identity").lower()
        if coding in ("", "identity"):
            return body
        try:
            if coding in ("gzip", "x-gzip"):
                return zlib.decompress(body, 16 + zlib.MAX_WBITS)
            if coding == "deflate":
                try:
                    return zlib.decompress(body)
                except zlib.error:
                    return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as some servers send
        except zlib.error as exc:
            raise ConnectionBroken(f"cannot decode a {coding} body: {exc}") from None
        raise ConnectionBroken(f"unsupported Content-Encoding {coding!r}")


class PlainHTTPPool:
    """The connections of one event loop to one ``http://host:port``; use it from that loop only.
    Bounded by its caller (the model client's in-flight semaphore): a request takes an idle
    connection or opens one."""

    def __init__(self, url: str, *, timeout_s: float, connect_timeout_s: float) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"PlainHTTPPool serves http:// URLs, not {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.path = parts.path or "/"
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._host_header = host if self.port == 80 else f"{host}:{self.port}"
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self._idle: list[_Connection] = []
        self.closed = False
        self.opened = 0  # connections opened so far (keep-alive shows as few)

    def head(self, headers: Mapping[str, str], length: int) -> bytes:
        """The request line and headers of a POST of ``length`` bytes (ValueError for a header
        that would break the framing, as aiohttp refuses one)."""
        lines = [f"POST {self.path} HTTP/1.1", f"Host: {self._host_header}", f"Content-Length: {length}",
                 "Accept: */*", "Accept-Encoding: gzip, deflate"]
        for name, value in headers.items():
            if any(c in name or c in value for c in _BAD_HEADER_CHARS) or ":" in name:
                raise ValueError(f"header {name!r} holds characters HTTP headers cannot")
            if name.lower() not in ("host", "content-length"):
                lines.append(f"{name}: {value}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def post(self, body: bytes, headers: Mapping[str, str]) -> Response:
        """POST ``body``; the whole answer, or TimeoutError (``timeout_s`` over connect, send and
        read), :class:`ConnectTimedOut`, :class:`ConnectFailed`, :class:`ConnectionBroken`."""
        if self.closed:
            raise RuntimeError("the HTTP pool is closed")
        data = self.head(headers, len(body)) + body
        async with asyncio.timeout(self.timeout_s):
            conn = await self._connection()
            try:
                response = await conn.request(data)
            except BaseException:
                conn.close()  # cancelled or broken mid-answer: the stream cannot be reused
                raise
        if not conn.closed and not self.closed:
            self._idle.append(conn)
        elif not conn.closed:
            conn.close()
        return response

    async def _connection(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(_Connection, self.host, self.port),
                                             self.connect_timeout_s)
        except asyncio.TimeoutError:
            raise ConnectTimedOut(f"no connection to {self.host}:{self.port} within {self.connect_timeout_s:g}s") from None
        except OSError as exc:
            raise ConnectFailed(exc.errno, f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}") from None
        self.opened += 1
        return conn

    async def close(self) -> None:
        self.closed = True
        while self._idle:
            self._idle.pop().close()


__all__ = ["ConnectFailed", "ConnectTimedOut", "ConnectionBroken", "PlainHTTPPool", "Response", "TRANSPORT_ENV", "use_plain"]
