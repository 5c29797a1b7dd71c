"""One version of the code per run: the driver and every worker must import the same ray_knowsim.

A Ray worker imports ``ray_knowsim`` from its own ``sys.path``, which Ray builds from the driver's
current directory (or a job's unpacked ``--working-dir``) and the node's installed packages. So a
driver started with the ``ray-knowsim`` console script (site-packages) in a folder that holds
another checkout, or nodes that installed another version than the job ships, would silently mix
two versions of the code. :func:`fingerprint` digests the files of the package this process
imported (every ``.py`` and packaged template/data file, by path inside the package, so an install
and the checkout it was built from agree); the driver probes every alive node before anything runs
(:func:`cluster_mismatches`), and each shard task checks again (:func:`run_checked`: a node that
joined later). A difference is refused with a message naming both copies and how to fix it.

The functions that run on workers are shipped by value (cloudpickle), so they can report even a
worker whose ``ray_knowsim`` is too old to contain this module, or cannot import at all.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path
from typing import Any, Callable

#: file kinds that make up the package: its modules and the data it ships (templates, demo items,
#: layouts, the viewer's assets); anything else in a checkout (editor files, notes) is not part of an install
PACKAGE_SUFFIXES = (".py", ".txt", ".md", ".json", ".jsonl", ".yaml", ".css", ".js")
PROBE_TIMEOUT_S = 180.0  # a worker process has to start on every node (slow on a loaded machine)

# this process's identity, computed once; keyed by process id, as the functions below travel to
# workers by value together with this dict (a worker must never read the driver's entry)
_IDENTITY: dict[int, dict[str, Any]] = {}


class CodeMismatch(RuntimeError):
    """A worker imports another version of ray_knowsim than the driver."""


def _package_files(package_dir: Path, kernels_dir: Path | None) -> list[tuple[str, Path]]:
    """(path inside the installed package, file) of every package file, in a fixed order. The
    kernels count as ``kernels/...`` wherever they live (the top-level folder of a checkout, or
    ``ray_knowsim/kernels`` of an install); a checkout's ``ray_knowsim/kernels`` stand-in is not
    part of the package."""
    out = []
    for path in package_dir.rglob("*"):
        rel = path.relative_to(package_dir)
        if rel.parts[0] == "kernels" or "__pycache__" in rel.parts or path.suffix not in PACKAGE_SUFFIXES or not path.is_file():
            continue
        out.append((rel.as_posix(), path))
    if kernels_dir is not None:
        for path in kernels_dir.rglob("*"):
            rel = path.relative_to(kernels_dir)
            if "__pycache__" in rel.parts or path.suffix not in PACKAGE_SUFFIXES or not path.is_file():
                continue
            out.append((f"kernels/{rel.as_posix()}", path))
    return sorted(out)


def fingerprint(package_dir: Path, kernels_dir: Path | None) -> str:
    """Digest of the package's files (names and contents); equal for a checkout and its wheel."""
    h = hashlib.sha256()
    for rel, path in _package_files(package_dir, kernels_dir):
        h.update(rel.encode())
        h.update(b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def identity() -> dict[str, Any]:
    """Which ray_knowsim this process imports: ``fingerprint``, ``package`` (its folder),
    ``kernels`` (the kernel modules' folder, or None with ``error`` when they cannot be imported),
    ``version``, ``python`` and ``node`` (hostname). Computed once per process (a few ms)."""
    cached = _IDENTITY.get(os.getpid())
    if cached is not None:
        return dict(cached)
    import socket

    out: dict[str, Any] = {"python": sys.executable, "node": socket.gethostname(), "error": None}
    try:
        pkg = importlib.import_module("ray_knowsim")
        package_dir = Path(pkg.__file__).resolve().parent
    except Exception as exc:  # noqa: BLE001 - reported to the driver, which refuses the run
        out.update(fingerprint=None, package=None, kernels=None, version=None, error=f"import ray_knowsim: {type(exc).__name__}: {exc}")
        return out
    kernels_dir = None
    try:
        kernels = importlib.import_module("ray_knowsim.kernels")
        kernels_dir = Path(list(kernels.__path__)[0]).resolve()
    except Exception as exc:  # noqa: BLE001 - the very failure this module exists to name
        out["error"] = f"import ray_knowsim.kernels: {type(exc).__name__}: {exc}"
    try:
        from importlib import metadata

        version = metadata.version("ray-knowsim")
    except Exception:  # noqa: BLE001 - a bare checkout has no distribution metadata
        version = None
    out.update(fingerprint=fingerprint(package_dir, kernels_dir), package=str(package_dir),
               kernels=None if kernels_dir is None else str(kernels_dir), version=version)
    if out["error"] is None:
        _IDENTITY[os.getpid()] = dict(out)
    return out


def differs(expected: dict[str, Any], here: dict[str, Any]) -> bool:
    return here.get("error") is not None or here.get("fingerprint") != expected.get("fingerprint")


def explain(expected: dict[str, Any], here: dict[str, Any], where: str) -> str:
    """What differs and how to fix it, in words a user can act on."""
    if here.get("error"):
        origin = f"; imported from {here['package']}" if here.get("package") else ""
        found = f"cannot use its ray_knowsim ({here['error']}{origin})"
    elif here.get("package") == expected.get("package"):
        return (f"{where} read other code (code {here.get('fingerprint')}) than the driver (code "
                f"{expected.get('fingerprint')}) in the same folder {here.get('package')}: its files changed between "
                "the two readings (edited during the start, or being unpacked by another node that shares this "
                "folder); start the run again once the folder holds one version")
    else:
        found = f"imports ray_knowsim from {here.get('package')} (code {here.get('fingerprint')})"
    return (
        f"{where} {found}, but the driver runs ray_knowsim from {expected.get('package')} "
        f"(code {expected.get('fingerprint')}). Ray workers import the package from the driver's current "
        "directory (or the job's --working-dir) before the installed one, so two versions would mix. Fix one of: "
        "start the run with `python -m ray_knowsim ...` from the folder whose code you mean (driver and workers "
        "then import the same copy); start it from a folder without a ray_knowsim/ subfolder; install the same "
        "version on every node (`pip install .` of this checkout); or ship the code with the job "
        "(`ray job submit --working-dir <checkout> -- python -m ray_knowsim ...`)."
    )


def run_checked(expected: dict[str, Any], fn: Callable[..., Any], *args: Any) -> Any:
    """Body of a Ray task: refuse (CodeMismatch) when this worker imports other code than the
    driver, else ``fn(*args)``. ``fn`` is unpickled only here, after the check."""
    here = identity()
    if differs(expected, here):
        import socket

        raise CodeMismatch(explain(expected, here, f"a worker on {socket.gethostname()} (pid {os.getpid()})"))
    return fn(*args)


def _probe() -> dict[str, Any]:
    return identity()


def by_value(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` of this module, to be shipped to workers with its code (not imported there)."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return fn


def cluster_mismatches(expected: dict[str, Any] | None = None,
                       timeout_s: float = PROBE_TIMEOUT_S) -> tuple[list[str], list[str]]:
    """One zero-CPU probe per alive node (every node runs our code: shards, reductions, actors).
    Returns (the explanations of nodes whose workers import other code than ``expected``, default
    this process's; the nodes that did not answer within ``timeout_s``, which the shard tasks'
    own check still covers)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    expected = expected or identity()
    probe = ray.remote(num_cpus=0, max_retries=0)(by_value(_probe))
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = {probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(): n
            for n in nodes}
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    problems, unanswered = [], []
    for ref in ready:
        node = refs[ref]
        where = f"node {node.get('NodeManagerAddress')} ({node['NodeID'][:12]})"
        try:
            here = ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - a node that cannot even run the probe
            problems.append(f"{where} could not run the code check: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}")
            continue
        if differs(expected, here):
            problems.append(explain(expected, here, where))
    for ref in late:
        ray.cancel(ref, force=True)
        node = refs[ref]
        unanswered.append(f"node {node.get('NodeManagerAddress')} ({node['NodeID'][:12]})")
    return problems, unanswered


def require_same_code(warn: Callable[[str], None]) -> None:
    """Refuse a cluster whose workers would import other ray_knowsim code than this process
    (every command that puts our code on workers calls it once Ray is up: run, score, sweep);
    nodes that did not answer are only warned about, their tasks check for themselves."""
    mismatched, unanswered = cluster_mismatches(identity())
    if mismatched:
        raise CodeMismatch("the workers would run other code than this driver:\n  " + "\n  ".join(mismatched))
    if unanswered:
        warn(f"code check: no answer from {', '.join(unanswered)}; their tasks check it when they start")


__all__ = ["CodeMismatch", "cluster_mismatches", "differs", "explain", "fingerprint", "identity", "require_same_code",
           "run_checked"]
