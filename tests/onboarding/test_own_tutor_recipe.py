"""The README's recipe "Evaluate your own tutor", run from the README's own text: the block that
lets ``ray-knowsim serve-offline`` stand in for both endpoints is read out of README.md and run
verbatim in bash (the stand-ins started with ``&``, the key exported, the check run at once, the
stand-ins stopped), with only its two port numbers replaced by free ones (and the exported placeholder key by a fake
one the leak check can find); the recipe's dry-run
line runs as written too. ``configs/own_tutor.yaml`` is used unchanged (a byte-identical copy in a
temporary folder, so the runs land there) and carries no ``offline_server`` flag: ``run`` finds
the stand-ins from their models lists and says so.

Also checks the onboarding's promise of a quiet terminal: no Ray token-auth warning, no warning
line at all on stderr, and the API key never reaches the run folder.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ray_knowsim.io.rundir import RunReader
from tests.doubles.ports import pick_ports

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
CLI = str(Path(sys.executable).with_name("ray-knowsim"))
KEY = "sk-recipe-test-0123456789abcdef"
README_PORTS = ("8000", "8001")  # the ports the README's stand-in block names


def _lines(block: str) -> list[str]:
    return [code for code in (line.split(" #", 1)[0].strip() for line in block.splitlines()) if code]


def _block(marker: str) -> list[str]:
    [block] = [b for b in BLOCKS if marker in b]
    return _lines(block)


@pytest.mark.slow
@pytest.mark.ray  # the run starts its own local Ray
@pytest.mark.timeout(900)
def test_the_readme_recipe_runs_as_written_against_serve_offline(tmp_path):
    """The block runs verbatim in bash, as a person pastes it: the stand-ins start with ``&`` and
    the run follows at once, whichever comes up first (the run asks a refused endpoint again)."""
    [block] = [b for b in BLOCKS if "ray-knowsim serve-offline --port" in b]
    assert "configs/own_tutor.yaml" in block and "kill %1 %2" in block, block
    ports = [str(p) for p in pick_ports(2)]
    script = re.sub(rf"\b{README_PORTS[0]}\b", ports[0], re.sub(rf"\b{README_PORTS[1]}\b", ports[1], block))
    script = script.replace("export OPENROUTER_API_KEY=unused", f"export OPENROUTER_API_KEY={KEY}")  # a key the leak check can find
    assert KEY in script, "the block no longer exports the key as this test expects"
    work = tmp_path / "checkout"
    work.mkdir()
    shutil.copytree(REPO / "configs", work / "configs")  # the config exactly as shipped; outputs land here
    assert (work / "configs/own_tutor.yaml").read_bytes() == (REPO / "configs/own_tutor.yaml").read_bytes()
    assert "offline_server" not in (work / "configs/own_tutor.yaml").read_text()
    (work / ".venv").symlink_to(Path(sys.executable).parents[1])  # `source .venv/bin/activate` finds this environment

    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS", "OPENROUTER_API_KEY", "VIRTUAL_ENV")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    shell = subprocess.Popen(["bash", "-c", script], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        out, err = shell.communicate(timeout=800)
    finally:  # nothing the block started outlives the test, whatever happened to it
        try:
            os.killpg(shell.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    done = subprocess.CompletedProcess(shell.args, shell.returncode, out, err)

    # the recipe's own dry run, as written (it calls nothing)
    [dry] = [line for line in _block("ray-knowsim run configs/own_tutor.yaml --dry-run") if "--dry-run" in line]
    dry_run = subprocess.run([CLI, *shlex.split(dry)[1:]], cwd=work, env=dict(env, OPENROUTER_API_KEY=KEY), capture_output=True,
                             text=True, timeout=300)

    assert dry_run.returncode == 0 and "dry run own_tutor: 42 sessions" in dry_run.stdout, dry_run.stdout + dry_run.stderr
    assert "will refuse" not in dry_run.stderr  # the key is exported: nothing the real run would refuse

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    for key in ("tutor", "simulator"):  # found from the models lists, and said
        assert f"models.{key}: http://127.0.0.1:" in done.stdout and "is `ray-knowsim serve-offline`" in done.stdout, done.stdout[:2000]
    assert ": complete (all 14 planned sessions committed, none failed)" in done.stdout, done.stdout[-2000:]
    assert "assistant 28 calls" in done.stdout  # 14 conversations x 2 turns, every tutor reply from the endpoint
    assert "offline_unknown_prompt" not in done.stdout + done.stderr
    assert "Token authentication" not in done.stderr
    noisy = [line for line in done.stderr.splitlines() if "warning" in line.lower()]
    assert not noisy, noisy

    out = work / "runs" / "own_tutor_check"
    manifest = json.loads((out / "manifest.json").read_text())
    models = manifest["config"]["models"]
    assert manifest["backends"]["assistant:tutor"] == "http" and models["tutor"]["model"] == "my-tutor"
    assert models["tutor"]["offline_server"] is True and models["simulator"]["offline_server"] is True
    assert manifest["status"] == "ok" and manifest["plan"]["n_sessions"] == 14
    reader = RunReader.open(out)
    assert reader.status().n_ok == 14
    leaked = [p for p in out.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert not leaked, leaked
