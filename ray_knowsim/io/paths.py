"""Paths written in a config (``${VAR}``, ``pkg:``, relative to the config's folder), resolved
the same way by the run that reads the config and by every reader of its recorded manifest."""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def resolve_path(raw: str, base_dir: Path) -> Path:
    """``${VAR}`` expanded (unset: ValueError), ``pkg:`` inside the package, else relative to base."""

    def env(match: re.Match) -> str:
        value = os.environ.get(match.group(1))
        if not value:
            raise ValueError(f"environment variable {match.group(1)} (used in {raw!r}) is not set")
        return value

    text = _ENV.sub(env, raw)
    if text.startswith("pkg:"):
        return Path(str(resources.files("ray_knowsim").joinpath(text[4:])))
    path = Path(text).expanduser()
    return path if path.is_absolute() else (base_dir / path).resolve()


__all__ = ["resolve_path"]
