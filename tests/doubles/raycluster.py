"""Ray clusters of separate processes on this machine, the way users start them: `ray start --head
--block`, worker nodes joined with `ray start --block --address`, jobs with `ray job submit`.

The environment notes' precautions, in one place: token auth off on loopback
(RAY_AUTH_MODE=disabled); bound to loopback; each node its own dashboard-agent and metrics ports;
every node started with --block in its own session (process group) and stopped by signalling that
group, never with `ray stop` (which kills every Ray process on the machine); worker nodes started
one at a time (two joining at once time out); the first job submit retried while the job agent
comes up. Ray binds its ports itself, so they cannot be held for it: a head that fails on a bind
is retried with fresh ports; a worker node that does not join (a bind, or a GCS that did not
answer in time on a loaded machine) is diagnosed and retried with fresh ports.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.doubles.ports import BIND_FAILURE, pick_ports

START_ATTEMPTS = 3  # starts of a node, each with fresh ports, when one fails on a bind
READY_TIMEOUT_S = 120
BIND_GRACE_S = 15  # a bind failure in the logs and still not ready this long after: give up on it


class ClusterStartError(RuntimeError):
    pass


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.read() if r.status == 200 else None
    except OSError:
        return None


def _logs(log: Path, temp: str | None) -> str:
    """A node's own output and (for a head) its session's logs, where servers report bind errors."""
    texts = []
    files = [log] + (sorted(Path(temp).glob("session_*/logs/*")) if temp else [])
    for f in files:
        try:
            texts.append(f.read_text(errors="replace"))
        except OSError:
            pass
    return "\n".join(texts)


def stop_group(proc: subprocess.Popen, grace_s: float = 15) -> None:
    """SIGINT, then SIGKILL, to the node's process group only (raylet, GCS, its workers)."""
    stop_groups([proc], grace_s)


def stop_groups(procs: Sequence[subprocess.Popen], grace_s: float = 15) -> None:
    """:func:`stop_group` for several nodes at once: each is sent SIGINT, all share one grace
    period (a cluster's nodes stopped one after another waited up to 15 s each), then what is
    left gets SIGKILL."""
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGKILL, 5)):
        live = [p for p in procs if p.poll() is None]
        for proc in live:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        for proc in live:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        if all(p.poll() is not None for p in procs):
            break


def kill_node(proc: subprocess.Popen) -> None:
    """What a spot preemption does: SIGKILL to every process of the node at once."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def cluster_env(bin_dir: Path, *, multi_node: bool) -> dict[str, str]:
    """The environment for `ray` commands of a loopback cluster run from ``bin_dir``'s Python.
    One node: bound to loopback. Several: Ray refuses a second node unless this is 1."""
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1" if multi_node else "0",
               PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for name in ("RAY_ADDRESS", "VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(name, None)
    return env


@dataclass
class LocalCluster:
    """A head (and maybe worker nodes) of `ray start` processes; see the module docstring. The
    nodes start in their temp folder, as a node started from a home directory would: a job
    without a working dir imports only what the nodes have installed."""

    ray_bin: str
    env: dict[str, str]
    temp: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="rkc", dir="/tmp"))  # short: socket paths
    head: subprocess.Popen | None = None
    url: str | None = None
    gcs: str | None = None
    workers: list[subprocess.Popen] = field(default_factory=list)

    def start_head(self, num_cpus: float = 2, extra: tuple[str, ...] = ()) -> "LocalCluster":
        for attempt in range(1, START_ATTEMPTS + 1):
            temp = os.path.join(self.temp, f"head{attempt}")  # each start reads only its own logs
            os.mkdir(temp)
            # the Ray Client server's port defaults to a fixed 10001: a second head on the machine clashes
            gcs, dash, agent, metrics, client, autoscaler = pick_ports(6)
            cmd = [self.ray_bin, "start", "--head", "--block", "--num-cpus", str(num_cpus), "--port", str(gcs),
                   "--ray-client-server-port", str(client),
                   "--node-ip-address", "127.0.0.1", "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
                   "--dashboard-port", str(dash), "--dashboard-agent-listen-port", str(agent),
                   "--metrics-export-port", str(metrics), "--temp-dir", temp, "--disable-usage-stats", *extra]
            log = Path(temp) / "head.log"
            # the autoscaler's metrics server binds a fixed port (44217) unless told otherwise: with
            # another head on the machine its harmless bind error would read as a failed start
            env = dict(self.env, AUTOSCALER_METRIC_PORT=str(autoscaler))
            with open(log, "wb") as fh:
                self.head = subprocess.Popen(cmd, env=env, cwd=self.temp, start_new_session=True, stdout=fh,
                                             stderr=subprocess.STDOUT)
            url = f"http://127.0.0.1:{dash}"
            if self._wait_ready(self.head, log, temp, lambda: _get(f"{url}/api/version") is not None and
                                _get(f"http://127.0.0.1:{agent}/api/local_raylet_healthz") == b"success"):
                self.url, self.gcs = url, f"127.0.0.1:{gcs}"
                return self
            stop_group(self.head)
            if not BIND_FAILURE.search(_logs(log, temp)) or attempt == START_ATTEMPTS:
                raise ClusterStartError(f"the Ray head did not come up (start {attempt} of at most {START_ATTEMPTS}):\n"
                                        f"{log.read_text(errors='replace')[-3000:]}")
        raise AssertionError("unreachable")

    def api(self, path: str) -> list[dict]:
        """Rows of a state-API listing (``/api/v0/nodes``, ``/api/v0/tasks?...``); [] when it does not answer."""
        body = _get(f"{self.url}{path}")
        try:
            return list(json.loads(body)["data"]["result"]["result"]) if body else []
        except (ValueError, KeyError, TypeError):
            return []

    def alive_nodes(self) -> int:
        return sum(1 for n in self.api("/api/v0/nodes") if n.get("state") == "ALIVE")

    def node_with(self, resource: str) -> str | None:
        """Id of the alive node that declares ``resource`` (a custom one given to tell nodes apart)."""
        for n in self.api("/api/v0/nodes"):
            if n.get("state") == "ALIVE" and resource in (n.get("resources_total") or {}):
                return n["node_id"]
        return None

    def running_tasks(self) -> list[dict]:
        return self.api("/api/v0/tasks?detail=1&limit=1000&filter_keys=state&filter_predicates=%3D&filter_values=RUNNING")

    def job_status(self, submission_id: str) -> str | None:
        body = _get(f"{self.url}/api/jobs/{submission_id}")
        try:
            return json.loads(body)["status"] if body else None
        except (ValueError, KeyError, TypeError):
            return None

    def wait_job(self, submission_id: str, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        status = None
        while time.monotonic() < deadline:
            status = self.job_status(submission_id)
            if status in ("SUCCEEDED", "FAILED", "STOPPED"):
                return status
            time.sleep(1)
        return status

    def job_logs(self, submission_id: str) -> str:
        body = _get(f"{self.url}/api/jobs/{submission_id}/logs")
        try:
            return json.loads(body)["logs"] if body else ""
        except (ValueError, KeyError, TypeError):
            return ""

    def add_worker(self, num_cpus: float = 2, extra: tuple[str, ...] = ()) -> subprocess.Popen:
        """One more worker node (its own session, so it can be killed as a whole); returns once
        the cluster counts it. Call it again only after it returned (one node joining at a time)."""
        before = self.alive_nodes()
        failures: list[str] = []
        for attempt in range(1, START_ATTEMPTS + 1):
            agent, metrics = pick_ports(2)
            log = Path(self.temp) / f"worker{len(self.workers)}-{attempt}.log"
            # its own temp dir: nodes sharing the head's would unpack each job's working dir into one
            # folder, deleting and rewriting files other nodes' workers are importing
            temp = os.path.join(self.temp, f"w{len(self.workers)}-{attempt}")
            cmd = [self.ray_bin, "start", "--block", "--address", self.gcs, "--num-cpus", str(num_cpus), "--temp-dir", temp,
                   "--node-ip-address", "127.0.0.1", "--dashboard-agent-listen-port", str(agent),
                   "--metrics-export-port", str(metrics), "--disable-usage-stats", *extra]
            with open(log, "wb") as fh:
                proc = subprocess.Popen(cmd, env=self.env, cwd=self.temp, start_new_session=True, stdout=fh,
                                        stderr=subprocess.STDOUT)
            if self._wait_ready(proc, log, None, lambda: self.alive_nodes() > before):
                self.workers.append(proc)
                return proc
            stop_group(proc)
            why = self.join_diagnosis(log)
            failures.append(f"start {attempt}: {why}")
            if attempt == START_ATTEMPTS:
                raise ClusterStartError(f"a worker node did not join in {START_ATTEMPTS} starts, each with fresh ports:\n  "
                                        + "\n  ".join(failures) + f"\nlast log:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(2 * attempt)  # a loaded head: give its GCS a moment before the next start
        raise AssertionError("unreachable")

    def join_diagnosis(self, log: Path) -> str:
        """Why a worker node did not join, in one line: the address it took, whether the head's
        GCS answers a TCP connect now, and the node's own last complaint."""
        text = _logs(log, None)
        took = re.findall(r"Local node IP: (\S+)", text)
        host, port = self.gcs.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                gcs = "answers"
        except OSError as exc:
            gcs = f"does not answer ({type(exc).__name__})"
        complaint = next((line.strip() for line in reversed(text.splitlines())
                          if re.search(r"error|timed out|failed", line, re.IGNORECASE)), "no error logged")
        bind = "; a port was taken (bind failure)" if BIND_FAILURE.search(text) else ""
        return (f"node address {took[-1] if took else 'not logged'}, the head's GCS {self.gcs} {gcs}, head alive "
                f"{self.head is not None and self.head.poll() is None}{bind}; {complaint[:300]}")

    def _wait_ready(self, proc: subprocess.Popen, log: Path, temp: str | None, ready) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT_S
        bind_failure_seen = None
        while True:
            if ready():
                return True
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            if bind_failure_seen is None and BIND_FAILURE.search(_logs(log, temp)):
                bind_failure_seen = time.monotonic()  # servers retry binds for a few seconds: wait a little
            if bind_failure_seen is not None and time.monotonic() - bind_failure_seen > BIND_GRACE_S:
                return False
            time.sleep(0.5)

    def submit(self, args: list[str], *, cwd: Path, working_dir: Path | None = None, timeout_s: float = 900,
               extra: tuple[str, ...] = (), no_wait: bool = False) -> subprocess.CompletedProcess:
        """`ray job submit [--working-dir DIR] -- ARGS`, retried while the job agent comes up."""
        cmd = [self.ray_bin, "job", "submit", "--address", self.url, *extra]
        if working_dir is not None:
            cmd += ["--working-dir", str(working_dir)]
        if no_wait:
            cmd.append("--no-wait")
        cmd += ["--", *args]
        deadline = time.monotonic() + 60
        while True:
            proc = subprocess.run(cmd, env=self.env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
            text = proc.stdout + proc.stderr
            if proc.returncode == 0 or time.monotonic() > deadline or "No available agent" not in text:
                return proc
            time.sleep(2)  # the job agent comes up a little after the dashboard answers

    def close(self) -> None:
        stop_groups(list(reversed(self.workers)))  # the worker nodes together, then the head they report to
        if self.head is not None:
            stop_group(self.head)
        shutil.rmtree(self.temp, ignore_errors=True)


def ray_command(bin_dir: Path) -> str | None:
    """The `ray` executable of the Python in ``bin_dir`` (else the one on PATH)."""
    return shutil.which("ray", path=str(bin_dir)) or shutil.which("ray")


@contextmanager
def started_cluster(*, multi_node: bool, head_cpus: float, head_extra: tuple[str, ...] = (),
                    workers: Sequence[tuple[float, tuple[str, ...]]] = (), env: Mapping[str, str] | None = None,
                    bin_dir: Path | None = None) -> Iterator[LocalCluster]:
    """A started :class:`LocalCluster` of ``bin_dir``'s ``ray`` (default: this Python's), closed on
    exit: a head with ``head_cpus`` and ``head_extra`` arguments, then one worker node per
    ``(num_cpus, extra)`` of ``workers``, one at a time; ``env`` is laid over :func:`cluster_env`.
    Skips the test (pytest) when the ``ray`` command is not installed."""
    import sys

    bin_dir = Path(sys.executable).parent if bin_dir is None else bin_dir
    ray_bin = ray_command(bin_dir)
    if ray_bin is None:
        import pytest

        pytest.skip("the `ray` command is not installed")
    cluster = LocalCluster(ray_bin, {**cluster_env(bin_dir, multi_node=multi_node), **(env or {})})
    try:
        cluster.start_head(num_cpus=head_cpus, extra=head_extra)
        for num_cpus, extra in workers:
            cluster.add_worker(num_cpus=num_cpus, extra=extra)
        yield cluster
    finally:
        cluster.close()
