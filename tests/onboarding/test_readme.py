"""The README's command blocks work as written in a fresh shell: a block that calls `ray-knowsim`
first activates `.venv` (or calls `.venv/bin/ray-knowsim`), every such command parses with the
real CLI parser, and every config file it names exists. Also `ray-knowsim --version`."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from ray_knowsim.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
ACTIVATE = "source .venv/bin/activate"


def _commands(block: str) -> list[str]:
    out = []
    for line in block.splitlines():
        code = line.split(" #", 1)[0].strip()
        code = code[:-1].rstrip() if code.endswith(" &") else code  # a server started in the background
        if code:
            out.append(code)
    return out


def test_every_block_that_needs_the_environment_activates_it_first():
    """`ray-knowsim` and a bare `python` exist in a fresh shell only after activation."""
    needing = [b for b in BLOCKS if re.search(r"^(ray-knowsim|python)\s", b, flags=re.M)]
    assert needing, "the README shows no ray-knowsim command"
    for block in needing:
        lines = _commands(block)
        first = next(i for i, c in enumerate(lines) if c.startswith(("ray-knowsim ", "python ")))
        assert ACTIVATE in lines[:first], f"a fresh shell has no ray-knowsim (or the project's python) on PATH here:\n{block}"


def test_a_long_running_server_command_ends_its_block():
    """`ray-knowsim view` serves until Ctrl-C: a reader following the block line by line would
    wait there, so nothing may come after it."""
    for block in BLOCKS:
        lines = _commands(block)
        for i, code in enumerate(lines):
            if code.startswith("ray-knowsim view"):
                assert i == len(lines) - 1, block


def test_every_readme_command_parses_and_names_existing_configs():
    parser = build_parser()
    seen = 0
    for block in BLOCKS:
        for code in _commands(block):
            if not code.startswith(("ray-knowsim ", ".venv/bin/ray-knowsim ")):
                continue
            argv = shlex.split(code)[1:]
            if argv == ["--version"]:
                continue
            parser.parse_args(argv)  # SystemExit (a usage error) fails the test
            for arg in argv:
                if arg.startswith("configs/"):
                    assert (REPO / arg).is_file(), arg
            seen += 1
    assert seen >= 6


def test_version_prints_the_installed_version():
    done = subprocess.run([str(Path(sys.executable).with_name("ray-knowsim")), "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"ray-knowsim {metadata.version('ray-knowsim')}"
    assert not done.stderr.strip()


@pytest.mark.parametrize("script", ["scripts/demo.sh", "scripts/test.sh"])
def test_the_two_entry_scripts_named_first_exist_and_are_executable(script):
    assert f"{script}" in BLOCKS[0] and (REPO / script).stat().st_mode & 0o111
