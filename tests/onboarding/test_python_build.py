"""The interpreter the project's venv is built on (`scripts/python_build.py`, `scripts/_venv.sh`):
the first optimised CPython found is chosen over a plain build earlier in the list, a candidate that
cannot build a venv is passed over, `$PYTHON` overrides the choice, and the project's own `.venv`
made on another interpreter is made again, while a venv the caller names is never removed.

Candidates are stand-in interpreters (shell scripts answering the probe as a real one would), so
the choice is tested without the machine having any particular Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "python_build.py"


def _stand_in(folder: Path, name: str, answer: str | None) -> Path:
    """An interpreter that answers the ``--venv`` probe with ``answer`` (None: it cannot build a
    venv, exit 1) and ``-c ...`` with its own path, and fails ``-m venv`` (so nothing is built)."""
    path = folder / name
    probe = f'echo "{answer}"; exit 0' if answer is not None else "exit 1"
    path.write_text(
        "#!/usr/bin/env bash\n"
        f'case "$2" in --venv) {probe} ;; esac\n'
        f'if [ "$1" = "-c" ]; then echo "{path}"; exit 0; fi\n'
        'echo "stand-in: $*" >&2; exit 3\n'
    )
    path.chmod(0o755)
    return path


def _pick(*candidates: Path | str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--pick", *map(str, candidates)], capture_output=True, text=True,
                          timeout=60)


def test_this_interpreter_is_described_and_probed_consistently():
    described = json.loads(subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True).stdout)
    assert described["python_version"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")
    # optimised means: configured with --enable-optimizations, or libpython inside the executable
    assert described["python_optimized_build"] == (described["python_enable_optimizations"]
                                                   or described["python_shared_libpython"] is False)
    probe = subprocess.run([sys.executable, str(SCRIPT), "--venv"], capture_output=True, text=True, check=True).stdout.split()
    assert probe == ["optimized" if described["python_optimized_build"] else "plain", described["python_executable"]]


def test_the_first_optimised_interpreter_is_chosen_over_an_earlier_plain_one(tmp_path):
    plain = _stand_in(tmp_path, "plain", "plain /opt/pyenv/bin/python3.11")
    fast = _stand_in(tmp_path, "fast", "optimized /usr/bin/python3.11")
    later = _stand_in(tmp_path, "later", "optimized /usr/local/bin/python3.12")
    done = _pick(tmp_path / "missing", plain, fast, later)
    assert (done.returncode, done.stdout.strip()) == (0, "/usr/bin/python3.11")


def test_without_an_optimised_one_the_first_that_can_build_a_venv_is_chosen(tmp_path):
    cannot = _stand_in(tmp_path, "old", None)  # e.g. Python 3.10, or no ensurepip
    plain = _stand_in(tmp_path, "plain", "plain /opt/pyenv/bin/python3.11")
    other = _stand_in(tmp_path, "other", "plain /opt/other/bin/python3.11")
    done = _pick(cannot, plain, other)
    assert (done.returncode, done.stdout.strip()) == (0, "/opt/pyenv/bin/python3.11")
    nothing = _pick(cannot, tmp_path / "missing")
    assert (nothing.returncode, nothing.stdout) == (1, "")


def _source_venv(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f'source "{root}/scripts/_venv.sh"; echo "rc=$?"'], capture_output=True,
                          text=True, env=env, timeout=60)


def _checkout_with_venv(tmp_path: Path, made_on: str) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for name in ("_venv.sh", "python_build.py"):
        shutil.copy(REPO / "scripts" / name, root / "scripts" / name)
    venv = root / ".venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text(f"home = {Path(made_on).parent}\nexecutable = {made_on}\n")
    (venv / "kept").write_text("a file of the old venv")
    return root


def test_the_projects_venv_made_on_another_interpreter_is_made_again(tmp_path):
    chosen = _stand_in(tmp_path, "python3.11", "optimized ignored")
    root = _checkout_with_venv(tmp_path, "/opt/pyenv/versions/3.11.7/bin/python3.11")
    done = _source_venv(root, {**os.environ, "PYTHON": str(chosen)})
    assert f"making {root}/.venv again on {chosen}" in done.stderr, done.stderr
    assert not (root / ".venv" / "kept").exists()
    assert f"could not create {root}/.venv with {chosen}" in done.stderr  # the stand-in builds nothing
    assert "rc=1" in done.stdout


def test_a_venv_made_on_the_chosen_interpreter_or_named_by_the_caller_is_kept(tmp_path):
    chosen = _stand_in(tmp_path, "python3.11", "optimized ignored")
    root = _checkout_with_venv(tmp_path, str(chosen))
    same = _source_venv(root, {**os.environ, "PYTHON": str(chosen)})
    assert "again" not in same.stderr and (root / ".venv" / "kept").exists()

    theirs = _checkout_with_venv(tmp_path / "theirs", "/opt/pyenv/versions/3.11.7/bin/python3.11")
    named = _source_venv(theirs, {**os.environ, "PYTHON": str(chosen), "RAY_KNOWSIM_VENV": str(theirs / ".venv")})
    assert "again" not in named.stderr and (theirs / ".venv" / "kept").exists()


def test_a_bench_on_a_plain_build_says_so_before_its_figures(monkeypatch, capsys):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import python_build
    finally:
        sys.path.remove(str(REPO / "scripts"))
    plain = {"python_executable": "/opt/pyenv/bin/python3.11", "python_version": "3.11.7", "python_optimized_build": False}
    monkeypatch.setattr(python_build, "describe", lambda: plain)
    python_build.warn_if_plain()
    assert "/opt/pyenv/bin/python3.11 (Python 3.11.7) is a plain CPython build" in capsys.readouterr().err
    monkeypatch.setattr(python_build, "describe", lambda: {**plain, "python_optimized_build": True})
    python_build.warn_if_plain()
    assert capsys.readouterr().err == ""
