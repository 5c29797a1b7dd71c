"""One name for the multiplicity correction on every surface: compare's notes, the report, the
viewer and an adaptive record say what :func:`ray_knowsim.stats.multiplicity.correction_name` says
(Holm's procedure; Bonferroni where equivalence claims are made), never a word of their own (the
README and the viewer said Holm where the terminal and --help said Bonferroni)."""

from __future__ import annotations

import ast
from pathlib import Path

from ray_knowsim.stats.multiplicity import correction_name

PACKAGE = Path(__file__).resolve().parents[2] / "ray_knowsim"
SURFACES = ("compare", "report", "view", "cli", "stats/adaptive.py", "adaptive")


def _strings(path: Path) -> list[str]:
    """The module's string constants (f-string parts included), docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_surface_names_the_correction_in_words_of_its_own():
    files = [p for s in SURFACES for p in ((PACKAGE / s).rglob("*.py") if (PACKAGE / s).is_dir() else [PACKAGE / s])]
    own = {f"{p.relative_to(PACKAGE)}: {t[:80]!r}" for p in files for t in _strings(p)
           if "Holm" in t or "Bonferroni" in t}
    assert not own, sorted(own)


def test_the_name_follows_the_rule():
    assert correction_name(False).startswith("Holm's procedure")
    assert correction_name(True).startswith("Bonferroni")


def test_compare_help_names_both_as_the_rule_applies_them(capsys):
    import pytest

    from ray_knowsim.cli.main import main

    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Holm's procedure; Bonferroni with --effect" in text

