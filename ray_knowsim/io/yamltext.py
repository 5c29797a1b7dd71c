"""YAML read under the name a person knows it by: a parse error then says ``in "configs/x.yaml",
line 3, column 7`` (or ``in "--set levels"``) instead of PyYAML's ``<unicode string>``."""

from __future__ import annotations

import io
from typing import Any

import yaml


def load_yaml(text: str, name: str) -> Any:
    """``yaml.safe_load`` of ``text``; a ``yaml.YAMLError`` names ``name`` as its file."""
    stream = io.StringIO(text)
    stream.name = name  # PyYAML's reader takes the name of a stream for its error marks
    return yaml.safe_load(stream)


__all__ = ["load_yaml"]
