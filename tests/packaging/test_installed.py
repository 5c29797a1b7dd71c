"""The project as users deploy it: the wheel installed (not editable) in a fresh environment, runs
started from the checkout's root and from another folder, and jobs submitted with
`--working-dir` to a local head running that install — the launch forms docs/cluster.md lists.

Editable installs map `kernels/` to `ray_knowsim.kernels` with an import hook; an install does
not, and Ray workers import `ray_knowsim` from the driver's folder (or the job's working dir)
first, so every test here would fail without the source tree's `ray_knowsim/kernels` stand-in or
without the code check that refuses a mix of two versions.

The fresh environment is built once for the module (pip's cache makes the dependencies quick);
`KNOWSIM_INSTALLED_TIMINGS=path` writes how long each step took as JSON.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ray_knowsim.cluster.codecheck import fingerprint
from tests.doubles.raycluster import LocalCluster, cluster_env
from tests.doubles.docs_install import docs_pip_list

pytestmark = [pytest.mark.slow, pytest.mark.ray_cluster, pytest.mark.wheel, pytest.mark.timeout(1800)]  # generous: a loaded machine
ROOT = Path(__file__).resolve().parents[2]
# 7 sessions (every demo item once, one level, one condition), 2 turns
TINY = ["--quiet", "--set", "trials=1", "--set", "max_turns=2", "--set", "levels=[novice]",
        "--set", "conditions=[{strategy: minimal}]", "--set", "engine.shard_size=4"]
TINY_DONE = "complete (all 7 planned sessions committed, none failed)"
# what a copy of the source tree leaves out (environments, outputs, caches)
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "runs", ".numba_cache", "*.egg-info",
                                    "__pycache__", ".pytest_cache", ".hypothesis", ".gl", ".whl")
TIMINGS: dict[str, float] = {}


def source_fingerprint(tree: Path) -> str:
    return fingerprint(tree / "ray_knowsim", tree / "kernels")


def copy_source(dst: Path) -> Path:
    shutil.copytree(ROOT, dst, ignore=NOT_SOURCE)
    return dst


def sh(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


class Installed:
    def __init__(self, base: Path):
        self.base = base
        self.bin = base / "venv" / "bin"
        self.python = self.bin / "python"
        self.env = cluster_env(self.bin, multi_node=False)
        self.env["NUMBA_CACHE_DIR"] = str(base / "numba")

    def run(self, args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
        return sh(args, cwd=cwd, env=self.env, timeout=timeout)

    def site_packages(self) -> Path:
        out = self.run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=self.base)
        return Path(out.stdout.strip())


def timed(name: str):
    class _T:
        def __enter__(self):
            self.t0 = time.monotonic()

        def __exit__(self, *exc):
            TIMINGS[name] = round(time.monotonic() - self.t0, 1)
            path = os.environ.get("KNOWSIM_INSTALLED_TIMINGS")
            if path:
                Path(path).write_text(json.dumps(TIMINGS, indent=1))

    return _T()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """The wheel of this checkout (built from a clean copy: setuptools' build/ keeps stale files)
    installed into a fresh venv with its dependencies."""
    base = tmp_path_factory.mktemp("installed")
    inst = Installed(base)
    with timed("wheel_s"):
        tree = copy_source(base / "src")
        wheel = sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", base / "dist", tree], cwd=base, env=inst.env)
        assert wheel.returncode == 0, wheel.stderr[-3000:]
    [whl] = (base / "dist").glob("ray_knowsim-*.whl")
    with timed("venv_install_s"):
        made = sh([sys.executable, "-m", "venv", base / "venv"], cwd=base, env=inst.env)
        assert made.returncode == 0, made.stderr
        # --no-compile: byte-compiling all of Ray's files at install costs more than compiling
        # the modules a run imports when it imports them
        pip = inst.run([inst.python, "-m", "pip", "install", "-q", "--no-compile", whl], cwd=base, timeout=900)
        assert pip.returncode == 0, pip.stderr[-3000:]
    inst.wheel = whl
    site = inst.site_packages()
    where = inst.run([inst.python, "-c", "import ray_knowsim.kernels.sessions as b; print(b.__file__)"], cwd=base)
    assert where.returncode == 0, where.stderr[-2000:]
    assert Path(where.stdout.strip()).is_relative_to(site)  # a real install, not the checkout
    assert not list(site.glob("__editable__*"))
    return inst


@pytest.fixture(scope="module")
def installed_cluster(installed):
    """Two nodes started from the fresh environment, both running that install: a head without
    CPUs (it runs the jobs' drivers) and a worker node that runs every shard."""
    cluster = LocalCluster(str(installed.bin / "ray"), dict(cluster_env(installed.bin, multi_node=True),
                                                           NUMBA_CACHE_DIR=installed.env["NUMBA_CACHE_DIR"]))
    store = ("--object-store-memory", str(150 * 2**20))
    try:
        with timed("cluster_start_s"):
            cluster.start_head(num_cpus=0, extra=store)
            cluster.add_worker(num_cpus=2, extra=store)
        yield cluster
    finally:
        cluster.close()


def manifest_code(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["invocations"][-1]["code"]


def test_demo_from_the_checkout_root_and_from_another_folder(installed, tmp_path):
    # from the checkout's root: the console script imports the install, Ray's workers the
    # checkout (the driver's current directory); the same code, so the run goes ahead
    with timed("demo_from_root_s"):
        root_run = installed.run([installed.bin / "ray-knowsim", "run", "configs/demo.yaml", "-o", tmp_path / "a", *TINY], cwd=ROOT)
    assert root_run.returncode == 0, (root_run.stdout + root_run.stderr)[-3000:]
    assert TINY_DONE in root_run.stdout
    code = manifest_code(tmp_path / "a")
    assert Path(code["package"]).is_relative_to(installed.site_packages())
    assert code["fingerprint"] == source_fingerprint(ROOT)  # the wheel holds exactly the checkout's code

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with timed("demo_elsewhere_s"):
        other = installed.run([installed.bin / "ray-knowsim", "run", ROOT / "configs" / "demo.yaml", "-o", tmp_path / "b", *TINY],
                              cwd=elsewhere)
    assert other.returncode == 0, (other.stdout + other.stderr)[-3000:]
    assert TINY_DONE in other.stdout
    for table in ("level_means.csv", "marginal.csv"):
        assert (tmp_path / "a" / "tables" / table).read_text() == (tmp_path / "b" / "tables" / table).read_text()


def test_driver_and_workers_on_two_versions_is_refused(installed, tmp_path):
    changed = copy_source(tmp_path / "changed")
    template = changed / "ray_knowsim" / "prompts" / "templates" / "assistant_minimal.v1.txt"
    template.write_text(template.read_text() + "\n")
    with timed("refusal_s"):
        proc = installed.run([installed.bin / "ray-knowsim", "run", "configs/demo.yaml", "-o", tmp_path / "out", *TINY], cwd=changed)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-3000:]
    assert "the workers would run other code than this driver" in text
    assert str(changed / "ray_knowsim") in text and str(installed.site_packages() / "ray_knowsim") in text
    assert not (tmp_path / "out" / "sessions").exists() or not any((tmp_path / "out" / "sessions").iterdir())


def test_job_with_working_dir_on_nodes_running_the_install(installed, installed_cluster, tmp_path):
    with timed("job_working_dir_s"):
        proc = installed_cluster.submit(["ray-knowsim", "run", "configs/demo.yaml", "-o", str(tmp_path / "out"), *TINY],
                                        cwd=ROOT, working_dir=ROOT)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "succeeded" in text and TINY_DONE in text, text[-3000:]
    code = manifest_code(tmp_path / "out")
    # the driver ran the shipped copy, not the nodes' install, and every worker was checked to run the same
    assert not Path(code["package"]).is_relative_to(installed.site_packages())
    assert code["fingerprint"] == source_fingerprint(ROOT)


def test_job_without_working_dir_runs_the_nodes_install(installed, installed_cluster, tmp_path):
    with timed("job_no_working_dir_s"):
        proc = installed_cluster.submit(["ray-knowsim", "run", str(ROOT / "configs" / "demo.yaml"), "-o", str(tmp_path / "out"),
                                         *TINY], cwd=tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "succeeded" in text and TINY_DONE in text, text[-3000:]
    assert Path(manifest_code(tmp_path / "out")["package"]).is_relative_to(installed.site_packages())


def test_a_driver_joining_the_cluster_with_address(installed, installed_cluster, tmp_path):
    with timed("address_run_s"):
        proc = installed.run([installed.bin / "ray-knowsim", "run", ROOT / "configs" / "demo.yaml", "-o", tmp_path / "out",
                              "--address", installed_cluster.gcs, *TINY], cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert TINY_DONE in proc.stdout
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["invocations"][-1]["address"] == installed_cluster.gcs


def test_code_shipped_only_through_the_working_dir(installed, installed_cluster, tmp_path):
    """Nodes with Ray but neither the project nor the dependencies Ray does not bring: the job's
    working dir is the code, `python -m ray_knowsim` the entry point, and the job's `pip` runtime
    environment (docs/cluster.md's, read from there) the rest. Ray builds that environment on
    every node for the job; the nodes' own environment stays without them."""
    pip = docs_pip_list()
    names = [re.split(r"[<>=!~\[ ]", r, maxsplit=1)[0] for r in pip]
    gone = installed.run([installed.python, "-m", "pip", "uninstall", "-y", "-q", "ray-knowsim", *names], cwd=tmp_path)
    assert gone.returncode == 0, gone.stderr
    try:
        missing = installed.run([installed.python, "-c", "import numba"], cwd=tmp_path)
        assert missing.returncode != 0  # the nodes really lack them
        with timed("job_working_dir_only_s"):
            proc = installed_cluster.submit(["python", "-m", "ray_knowsim", "run", "configs/demo.yaml", "-o", str(tmp_path / "out"), *TINY],
                                            cwd=ROOT, working_dir=ROOT, extra=("--runtime-env-json", json.dumps({"pip": pip})))
        text = proc.stdout + proc.stderr
        assert proc.returncode == 0 and TINY_DONE in text, text[-3000:]
        assert manifest_code(tmp_path / "out")["fingerprint"] == source_fingerprint(ROOT)
    finally:  # later tests of the module get the install back
        back = installed.run([installed.python, "-m", "pip", "install", "-q", "--no-compile", installed.wheel], cwd=tmp_path, timeout=900)
        assert back.returncode == 0, back.stderr
