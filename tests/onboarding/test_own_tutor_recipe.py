"""The README's recipe "Evaluate your own tutor", run from the README's own text: the block that
lets ``ray-knowsim serve-offline`` stand in for both endpoints is read out of README.md and run
line by line (the stand-ins started in the background, the key exported, the check run, the
stand-ins stopped), with only its two port numbers replaced by free ones; the recipe's dry-run
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
import subprocess
import sys
import time
import urllib.request
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


def _wait_until_served(url: str, model: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as resp:
                if model in resp.read().decode():
                    return
        except OSError:
            time.sleep(0.3)
    out = proc.communicate(timeout=10)[0] if proc.poll() is not None else ""
    raise RuntimeError(f"serve-offline did not come up at {url}: {out[-500:]}")


@pytest.mark.slow
@pytest.mark.ray  # the run starts its own local Ray
@pytest.mark.timeout(900)
def test_the_readme_recipe_runs_as_written_against_serve_offline(tmp_path):
    standin = _block("ray-knowsim serve-offline --port")
    assert any("configs/own_tutor.yaml" in line for line in standin), standin
    ports = [str(p) for p in pick_ports(2)]
    lines = [re.sub(rf"\b{README_PORTS[0]}\b", ports[0], re.sub(rf"\b{README_PORTS[1]}\b", ports[1], line)) for line in standin]
    work = tmp_path / "checkout"
    work.mkdir()
    shutil.copytree(REPO / "configs", work / "configs")  # the config exactly as shipped; outputs land here
    assert (work / "configs/own_tutor.yaml").read_bytes() == (REPO / "configs/own_tutor.yaml").read_bytes()
    assert "offline_server" not in (work / "configs/own_tutor.yaml").read_text()

    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS", "OPENROUTER_API_KEY")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    servers: list[subprocess.Popen] = []
    runs: list[subprocess.CompletedProcess] = []
    try:
        for line in lines:
            argv = shlex.split(line)
            if line.startswith("source "):
                continue  # the test runs this environment's ray-knowsim directly
            if argv[0] == "export":
                name, _, _ = argv[1].partition("=")
                env[name] = KEY  # the recipe's placeholder value, as a recognisable fake key
            elif argv[:2] == ["ray-knowsim", "serve-offline"]:
                assert argv[-1] == "&", line
                proc = subprocess.Popen([CLI, *argv[1:-1]], cwd=work, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
                servers.append(proc)
                port, model = argv[argv.index("--port") + 1], argv[argv.index("--model-name") + 1]
                _wait_until_served(f"http://127.0.0.1:{port}/v1", model, proc)
            elif argv[:2] == ["ray-knowsim", "run"]:
                runs.append(subprocess.run([CLI, *argv[1:]], cwd=work, env=env, capture_output=True, text=True, timeout=800))
            elif argv[0] == "kill":
                assert argv[1:] == ["%1", "%2"] and len(servers) == 2, line
            else:
                raise AssertionError(f"the README's stand-in block has a line this test does not know how to run: {line}")
        assert len(servers) == 2 and len(runs) == 1, lines

        # the recipe's own dry run, as written (it calls nothing)
        [dry] = [line for line in _block("ray-knowsim run configs/own_tutor.yaml --dry-run") if "--dry-run" in line]
        dry_run = subprocess.run([CLI, *shlex.split(dry)[1:]], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    finally:
        for proc in servers:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()

    assert dry_run.returncode == 0 and "dry run own_tutor: 42 sessions" in dry_run.stdout, dry_run.stdout + dry_run.stderr
    assert "will refuse" not in dry_run.stderr  # the key is exported: nothing the real run would refuse

    done = runs[0]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    for key in ("tutor", "simulator"):  # found from the models lists, and said
        assert f"models.{key}: http://127.0.0.1:" in done.stdout and "is `ray-knowsim serve-offline`" in done.stdout, done.stdout[:2000]
    assert ": complete; sessions ok 14, failed 0, of 14" in done.stdout, done.stdout[-2000:]
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
