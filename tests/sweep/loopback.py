"""A multi-node Ray cluster on this one machine: a head without CPUs, worker nodes added one at a time.

Why: the sweep's scaling figure and its multi-node test need several raylets (each with its own
object store, so blocks really travel between nodes) without a second machine. Follows the
environment notes: RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1 and token auth off on every process, own
dashboard-agent and metrics ports per node, nodes started one at a time (two at once time out),
each in its own session and ended through its process group (never ``ray stop``, which would end
every Ray on the machine). Ports are picked free and released just before Ray binds them (Ray
binds its own), so a start that does not come up is retried with fresh ports.

The process that uses it joins the cluster (``ray.init(address=cluster.address)``) after
``start_head``; ``add_node`` waits until that process sees the new node.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.doubles.ports import pick_ports

START_ATTEMPTS = 3
READY_S = 90


def loopback_env() -> dict[str, str]:
    """The environment every process of the cluster (and its driver) needs on loopback."""
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1", RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


class LoopbackCluster:
    def __init__(self, object_store_mb: int = 256) -> None:
        self.ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
        if self.ray_bin is None:
            raise RuntimeError("the `ray` command is not installed")
        self.env = loopback_env()
        self.temp = tempfile.mkdtemp(prefix="rks", dir="/tmp")  # short: Ray's socket paths live under it
        self.object_store = str(object_store_mb * 2**20)
        self.procs: list[subprocess.Popen] = []
        self.address = ""
        self.cpus = 0  # CPUs of the worker nodes started so far

    def _start(self, args: list[str], log: str) -> subprocess.Popen:
        agent, metrics = pick_ports(2)
        cmd = [self.ray_bin, "start", "--block", "--node-ip-address", "127.0.0.1", "--object-store-memory", self.object_store,
               "--dashboard-agent-listen-port", str(agent), "--metrics-export-port", str(metrics), "--disable-usage-stats", *args]  # fmt: skip
        with open(Path(self.temp) / log, "ab") as fh:
            proc = subprocess.Popen(cmd, env=self.env, start_new_session=True, stdout=fh, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def start_head(self) -> str:
        for _ in range(START_ATTEMPTS):
            (gcs,) = pick_ports(1)
            proc = self._start(["--head", "--num-cpus", "0", "--port", str(gcs), "--include-dashboard", "false",
                                "--temp-dir", self.temp], "head.log")  # fmt: skip
            deadline = time.monotonic() + READY_S
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", gcs), timeout=1).close()
                    self.address = f"127.0.0.1:{gcs}"
                    return self.address
                except OSError:
                    time.sleep(0.5)
            self._stop(proc)
        raise RuntimeError(f"the loopback head did not come up; see {self.temp}/head.log")

    def add_node(self, cpus: int = 1) -> None:
        """Start one worker node and wait until the calling process's Ray sees it."""
        import ray

        before = self.alive_nodes()
        for _ in range(START_ATTEMPTS):
            proc = self._start(["--address", self.address, "--num-cpus", str(cpus)], f"node{len(self.procs)}.log")
            deadline = time.monotonic() + READY_S
            while proc.poll() is None and time.monotonic() < deadline:
                if self.alive_nodes() > before and int(ray.cluster_resources().get("CPU", 0)) >= self.cpus + cpus:
                    self.cpus += cpus
                    return
                time.sleep(0.5)
            self._stop(proc)
        raise RuntimeError(f"a loopback worker node did not come up; see the logs in {self.temp}")

    @staticmethod
    def alive_nodes() -> int:
        import ray

        return sum(1 for n in ray.nodes() if n.get("Alive"))

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):  # this node's process group only
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> None:
        for proc in reversed(self.procs):  # workers first, the head last
            self._stop(proc)
        self.procs.clear()
        shutil.rmtree(self.temp, ignore_errors=True)

    def __enter__(self) -> "LoopbackCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
