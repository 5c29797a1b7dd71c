"""Shared pieces of the run configuration: the strict base model, errors and their key paths."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, ValidationError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")  # no "/": names are parts of session ids
_SUBPATH = re.compile(r"^[A-Za-z_][\w.]*: ")


class ConfigError(ValueError):
    """A config that cannot be used; ``errors`` lists ``"key.path: message"`` lines."""

    def __init__(self, errors: list[str], source: str = "") -> None:
        self.errors = errors
        head = f"{source}: " if source else ""
        super().__init__(head + "invalid run config:\n" + "\n".join(f"  {e}" for e in errors))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _backend_tags() -> set[str]:
    from ray_knowsim.engine.backends import BACKENDS

    return set(BACKENDS.names())


def _loc(err: dict) -> str:
    parts = [str(p) for p in err.get("loc", ())]
    if len(parts) >= 3 and parts[0] == "models" and parts[2] in _backend_tags():
        del parts[2]  # the discriminated union's tag ("http") repeats the backend key
    return ".".join(parts) or "(top level)"


def _msg(err: dict) -> str:
    if err.get("type") == "extra_forbidden":
        return "unknown key"
    msg = err.get("msg", "invalid")
    return msg[len("Value error, "):] if msg.startswith("Value error, ") else msg


def format_errors(exc: ValidationError) -> list[str]:
    """``key.path: message`` per error; multi-line validator messages become several lines."""
    out: list[str] = []
    for err in exc.errors():
        loc, msg = _loc(err), _msg(err)
        for line in msg.splitlines():
            sub = _SUBPATH.match(line)  # a validator's own "key.path: message" line
            if sub and loc == "(top level)":
                out.append(line)
            elif sub:
                out.append(f"{loc}.{line}")
            else:
                out.append(f"{loc}: {line}")
    return out
