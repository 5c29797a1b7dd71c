"""The package's source files as the packaging tests read them: ``ray_knowsim/`` and the
top-level ``kernels/`` folder (installed as ``ray_knowsim.kernels``)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "ray_knowsim"


def kernels_dir() -> Path:
    return ROOT / "kernels"


def product_modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def all_files() -> list[Path]:
    """Every module of the package, the kernels included."""
    files = product_modules()
    if kernels_dir().is_dir():
        files += sorted(p for p in kernels_dir().rglob("*.py") if "__pycache__" not in p.parts)
    return files
