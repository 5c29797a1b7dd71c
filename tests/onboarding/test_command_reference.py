"""docs/commands.md is the CLI's own help: `scripts/command_reference.py` builds it from the
`ray-knowsim` parsers, and the committed page must be what it builds now, so the reference cannot
drift from the commands. Also: every subcommand (nested ones too) has its section, and the
README links to the page instead of keeping a table of its own."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from ray_knowsim.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "commands.md"


def _script():
    spec = importlib.util.spec_from_file_location("command_reference", REPO / "scripts" / "command_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("command_reference", module)
    spec.loader.exec_module(module)
    return module


def _progs(parser: argparse.ArgumentParser) -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                out += [child.prog, *_progs(child)]
    return out


def test_the_committed_page_is_what_the_parsers_give():
    built = _script().render()
    committed = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
    assert committed == built, (
        "docs/commands.md differs from the ray-knowsim parsers' help: run "
        "`python scripts/command_reference.py` (in the project's venv) and commit docs/commands.md"
    )


def test_every_subcommand_has_its_section_and_usage():
    page = PAGE.read_text(encoding="utf-8")
    progs = _progs(build_parser())
    assert "ray-knowsim env serve" in progs and len(progs) >= 15
    for prog in progs:
        assert f"# `{prog}`\n" in page, prog
        assert f"usage: {prog} " in page, prog


def test_the_page_does_not_depend_on_the_terminal_width(monkeypatch):
    script = _script()
    monkeypatch.setenv("COLUMNS", "40")
    narrow = script.render()
    monkeypatch.setenv("COLUMNS", "300")
    assert script.render() == narrow


def test_the_check_mode_says_how_to_refresh(tmp_path, monkeypatch, capsys):
    script = _script()
    stale = tmp_path / "commands.md"
    stale.write_text("# an old page\n", encoding="utf-8")
    monkeypatch.setattr(script, "PAGE", stale)
    assert script.main(["--check"]) == 1
    assert "python scripts/command_reference.py" in capsys.readouterr().err
    assert stale.read_text(encoding="utf-8") == "# an old page\n"


def test_the_readme_links_the_reference_instead_of_a_table():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "](docs/commands.md)" in readme
    assert "| command | what it does |" not in readme
