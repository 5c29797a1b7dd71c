"""Reading a run config: YAML, ``--set`` overrides, input paths (``${VAR}``, ``pkg:``)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from ray_knowsim.config.base import ConfigError
from ray_knowsim.config.run import RunConfig
from ray_knowsim.io.paths import resolve_path
from ray_knowsim.io.yamltext import load_yaml


def parse_run_config(data: Any, base_dir: Path | str = ".", source: str = "", check_files: bool = True) -> RunConfig:
    """Validate a mapping into a RunConfig; ConfigError lists every problem with its key path
    (:meth:`RunConfig.parse`)."""
    return RunConfig.parse(data, base_dir=base_dir, source=source, check_files=check_files)


#: the config keys that hold a path: one given on the command line is the shell's (relative to the
#: working directory), where one written in the file is relative to the file's folder
PATH_KEYS = re.compile(r"(init_cache|output_dir|tasks\.\d+\.(items|graphs|init_cache))")


def apply_overrides(data: Any, assignments: list[str]) -> Any:
    """``key.path=value`` assignments (value parsed as YAML) applied to the raw config mapping;
    list items by index (``tasks.0.limit=2``). A relative path (:data:`PATH_KEYS`) is made absolute
    against the working directory, as a shell user means it."""
    for text in assignments:
        key, sep, raw = text.partition("=")
        if not sep or not key:
            raise ConfigError([f"--set {text!r}: expected key.path=value"])
        try:
            value = load_yaml(raw, f"--set {key}")
        except yaml.YAMLError as exc:
            raise ConfigError([f"--set {key}: value is not valid YAML ({exc})"]) from None
        if PATH_KEYS.fullmatch(key) and isinstance(value, str) and value and not value.startswith("pkg:"):
            value = str(Path.cwd() / Path(value).expanduser())
        node = data
        parts = key.split(".")
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            where = ".".join(parts[: depth + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ConfigError([f"--set {key}: {where} is not an index of the list"])
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    node = node.setdefault(part, {})
            else:
                raise ConfigError([f"--set {key}: {'.'.join(parts[:depth])} is not a mapping"])
    return data


def load_run_config(path: str | os.PathLike[str], check_files: bool = True, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run config; paths inside are relative to the file's folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read the file: {exc.strerror or exc}"], str(path)) from None
    try:
        data = load_yaml(text, str(path))
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"], str(path)) from None
    if overrides:
        if not isinstance(data, dict):
            data = {}
        data = apply_overrides(data, overrides)
    return parse_run_config(data, path.resolve().parent, str(path), check_files)
