"""The peak memory of a CLI command run in a child process, read so that the test process's own
size never leaks into it.

``ru_maxrss`` (``getrusage`` in the child, or ``wait4`` in the parent) is kept across ``execve`` on
Linux: a child forked (or vforked) from a pytest process that has grown to 1 GB over the suite
reports that 1 GB as its own peak before it has run a line. ``VmHWM`` in ``/proc/self/status``
belongs to the address space the child got at exec, so it is the command's own high-water mark.
"""

from __future__ import annotations

#: run ``ray_knowsim.cli.main.main(argv)`` and print its exit code's companion line ``PEAK_RSS_KB <n>``
CHILD_MAIN = (
    "import sys\n"
    "from ray_knowsim.cli.main import main\n"
    "rc = main(sys.argv[1:])\n"
    "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
    "print('PEAK_RSS_KB', int(hwm.split()[1]), flush=True)\n"
    "sys.exit(rc)\n"
)


def peak_bytes(stdout: str | bytes) -> int:
    """The ``PEAK_RSS_KB`` figure the child printed last, in bytes."""
    text = stdout.decode() if isinstance(stdout, bytes) else stdout
    return int(text.rsplit("PEAK_RSS_KB", 1)[1].split()[0]) * 1024
