"""Ports for servers that tests start in another process, without bind-then-release races.

Binding port 0, closing the socket and passing the number on leaves a gap in which any other
process can take the port. Three ways out, most robust first:

- ``reserve_port()`` + hand the bound socket itself to the server process (``pass_fds``): the port
  is never released. ``python tests/doubles/ports.py vllm-on-fd FD -- <vLLM server args>`` runs
  vLLM's OpenAI server on such an inherited socket (see ``vllm_on_fd_cmd``).
- ``reserve_port(reuse_port=True)``: for a server that binds its own socket with SO_REUSEPORT (Ray
  Serve's proxy does): keep this bound, never-listening socket open while the server runs; the
  server joins the port, a process without SO_REUSEPORT cannot, and connections only go to
  listening sockets.
- ``pick_ports(n)``: for servers that bind their own ports and offer neither (Ray's head and its
  several servers): still bind-then-release, so the caller must retry the start with fresh ports
  when it fails on a bind (``BIND_FAILURE``).

Run as ``python tests/doubles/ports.py vllm-on-fd FD -- ARGS`` it is that launcher (it imports
nothing from the project, so any interpreter with vLLM can run it).
"""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path

HOST = "127.0.0.1"
# Lines that say a server could not bind its port (errno 98 as Python, asyncio, gRPC and Ray's
# own pre-check word it).
BIND_FAILURE = re.compile(r"address already in use|already occupied|failed to bind|errno 98", re.IGNORECASE)


def reserve_port(host: str = HOST, *, reuse_port: bool = False) -> socket.socket:
    """A TCP socket bound to a free port on ``host``, not listening. The caller owns (and closes)
    it; the port is ``sock.getsockname()[1]``.

    Without ``reuse_port`` no other socket can bind the port while this one is open (SO_REUSEADDR
    is off, so even servers that set it are refused): hand it to the server with ``pass_fds``.
    With ``reuse_port`` (SO_REUSEPORT only), a server of the same user that sets SO_REUSEPORT can
    bind and listen on the same port while this is held; a socket without SO_REUSEPORT is refused
    (SO_REUSEADDR alone does not get in), and connections only reach listening sockets."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if reuse_port:  # not SO_REUSEADDR: with it, a SO_REUSEADDR server could share the port too
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, 0))
    except BaseException:
        sock.close()
        raise
    return sock


def pick_ports(n: int, host: str = HOST) -> list[int]:
    """``n`` distinct ports that were free a moment ago (all held at once while picking, so they
    differ), then released. RACY by nature: only for a server that must bind its own ports, and
    only with a retry on ``BIND_FAILURE``."""
    socks = [reserve_port(host) for _ in range(n)]
    try:
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def vllm_on_fd_cmd(python: str, sock: socket.socket, server_args: list[str]) -> list[str]:
    """The command that runs ``python -m vllm.entrypoints.openai.api_server SERVER_ARGS`` on the
    already-bound ``sock`` (start it with ``pass_fds=(sock.fileno(),)``, then close ``sock`` here;
    the server holds the port until it exits). SERVER_ARGS must carry ``--host``/``--port`` equal
    to the socket's address (checked by the launcher)."""
    return [python, str(Path(__file__).resolve()), "vllm-on-fd", str(sock.fileno()), "--", *server_args]


def _vllm_on_fd(fd: int, server_args: list[str]) -> None:
    """Run vLLM's OpenAI server exactly as ``python -m vllm.entrypoints.openai.api_server`` would,
    except that where it would create and bind its listening socket it gets the inherited one.

    vLLM's single-server path binds with ``create_server_socket(addr, reuse_port=False)`` (no
    SO_REUSEPORT, so a reservation socket cannot share the port) and has no option to take a
    socket; ``setup_server`` looks that function up in its module when it runs, so it is replaced
    there. If a vLLM version moves it, this fails loudly instead of binding a port of its own."""
    import runpy

    sock = socket.socket(fileno=fd)
    from vllm.entrypoints.launchers import launcher

    if not callable(getattr(launcher, "create_server_socket", None)):
        raise SystemExit("ports.py vllm-on-fd: vllm.entrypoints.launchers.launcher.create_server_socket "
                         "is gone in this vLLM version; update tests/doubles/ports.py")
    bound = sock.getsockname()[:2]

    def create_server_socket(addr, *, reuse_port):  # noqa: ARG001 - vLLM's signature
        if (addr[0] or "0.0.0.0", addr[1]) != bound:
            raise RuntimeError(f"ports.py vllm-on-fd: vLLM asked for {addr}, the inherited socket is bound to {bound}")
        return sock

    launcher.create_server_socket = create_server_socket
    sys.argv = ["vllm.entrypoints.openai.api_server", *server_args]
    runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__", alter_sys=True)


def _main(argv: list[str]) -> None:
    if len(argv) >= 3 and argv[0] == "vllm-on-fd" and argv[2] == "--":
        _vllm_on_fd(int(argv[1]), argv[3:])
    else:
        raise SystemExit("usage: ports.py vllm-on-fd FD -- <vllm api_server args>")


if __name__ == "__main__":
    _main(sys.argv[1:])
