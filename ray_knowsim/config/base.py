"""Shared pieces of the run configuration: the strict base model, errors and their key paths."""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any

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
    from ray_knowsim.backends.registry import BACKENDS

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


def _did_you_mean(word: str, options: list[str]) -> str:
    """The nearest option: one the word begins (``temp`` -> ``temperature``), else difflib's."""
    begun = sorted((o for o in options if o.startswith(word) and o != word), key=len)
    close = begun[:1] or difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _model_class(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The pydantic model an annotation holds (through Optional, Union, list and dict values), and
    whether one more path part (a list index or a dict key) comes before its fields."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if origin in (list, tuple, set, frozenset, dict):
        inner = typing.get_args(annotation)[-1:] or (Any,)
        return _model_class(inner[0])[0], True
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            cls, nested = _model_class(arg)
            if cls is not None:
                return cls, nested
    return None, False


def _entry_class(entry: Any) -> type[BaseModel] | None:
    """The model-entry class of a ``models.<key>`` mapping (by its ``backend``), if it names one."""
    from ray_knowsim.backends.registry import BACKENDS

    backend = entry.get("backend") if isinstance(entry, dict) else None
    return BACKENDS.get(backend).entry if isinstance(backend, str) and backend in BACKENDS.names() else None


def _keys_at(root: type[BaseModel], parts: list[str], data: Any) -> list[str]:
    """The keys the config accepts beside ``parts[-1]`` (the fields of the model holding it)."""
    cls: type[BaseModel] | None = root
    node = data
    i = 0
    while cls is not None and i < len(parts) - 1:
        part = parts[i]
        if part == "models" and cls.__name__ == "RunConfig" and i + 1 < len(parts) - 1:
            node = (node or {}).get("models", {}).get(parts[i + 1], {}) if isinstance(node, dict) else {}
            cls, i = _entry_class(node), i + 2
            if cls is not None and i < len(parts) - 1 and parts[i] == node.get("backend"):
                i += 1  # the union's tag in the error's path
            continue
        field = cls.model_fields.get(part)
        if field is None:
            return []
        cls, nested = _model_class(field.annotation)
        node = node.get(part) if isinstance(node, dict) else None
        i += 1
        if nested:
            if isinstance(node, list) and parts[i].isdigit() and int(parts[i]) < len(node):
                node = node[int(parts[i])]
            elif isinstance(node, dict):
                node = node.get(parts[i])
            i += 1
    if cls is None:
        return []
    return [name for name, f in cls.model_fields.items()] + [f.alias for f in cls.model_fields.values() if f.alias]


def _explained(err: dict, root: type[BaseModel] | None, data: Any) -> str | None:
    """A plainer message than pydantic's for the mistakes a person makes: an unknown key (with
    the nearest known one), a model entry without ``backend`` (usually a misspelt entry name, as
    ``--set models.tutr.base_url=...`` makes) and an unknown backend."""
    from ray_knowsim.backends.registry import BACKENDS

    parts = [str(p) for p in err.get("loc", ())]
    kind = err.get("type")
    if kind == "extra_forbidden" and root is not None and parts:
        return "unknown key" + _did_you_mean(parts[-1], _keys_at(root, parts, data))
    if kind in ("union_tag_not_found", "union_tag_invalid") and len(parts) == 2 and parts[0] == "models":
        backends = ", ".join(sorted(BACKENDS.names()))
        if kind == "union_tag_invalid":
            tag = (err.get("ctx") or {}).get("tag")
            return f"backend {tag!r} is not a registered backend{_did_you_mean(str(tag), sorted(BACKENDS.names()))} (backends: {backends})"
        models = data.get("models") if isinstance(data, dict) else None
        others = [k for k, v in (models or {}).items() if k != parts[1] and isinstance(v, dict) and v.get("backend")]
        near = difflib.get_close_matches(parts[1], others, n=1, cutoff=0.6)
        if near:
            return (f"there is no model entry {parts[1]!r} (did you mean models.{near[0]}?); "
                    f"the entries are: {', '.join(others)}. A new entry needs backend: one of {backends}")
        return (f"a model entry needs backend: one of {backends}"
                + (f" (the entries with one: {', '.join(others)})" if others else ""))
    return None


def format_errors(exc: ValidationError, data: Any = None, root: type[BaseModel] | None = None) -> list[str]:
    """``key.path: message`` per error; multi-line validator messages become several lines. With the
    validated ``data`` and its ``root`` model, unknown keys get the nearest known key and a model
    entry without a backend is named as the likely misspelt entry."""
    out: list[str] = []
    for err in exc.errors():
        loc, msg = _loc(err), _explained(err, root, data) or _msg(err)
        for line in msg.splitlines():
            sub = _SUBPATH.match(line)  # a validator's own "key.path: message" line
            if sub and loc == "(top level)":
                out.append(line)
            elif sub:
                out.append(f"{loc}.{line}")
            else:
                out.append(f"{loc}: {line}")
    return out
