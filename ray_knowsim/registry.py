"""Named extension points: tutor strategies, simulators, model backends, judges.

Each kind of thing users extend has ONE :class:`Registry`. A module defines the thing and registers
it under a name (``@STRATEGIES.register("socratic")``); configs name registered things; nothing else
branches on those names. Code outside the package registers the same way, before the run starts
(or through an entry in ``plugins`` of a run config, which imports the module).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class RegistryError(KeyError):
    """An unknown or duplicate name; the message lists what is registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """A name -> object map with a decorator, clear errors, and lazy built-in modules.

    ``builtins`` are module paths imported on first look-up, so registering a built-in costs
    nothing until it is needed and importing the registry never imports heavy backends.
    ``package`` names a package whose every public module (a name without a leading ``_``) is a
    built-in: adding a module there is all it takes, with no list to keep in step.
    """

    def __init__(self, kind: str, builtins: tuple[str, ...] = (), *, package: str | None = None) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._builtins = builtins
        self._package = package
        self._loaded = False

    def _load_builtins(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._builtins:
                importlib.import_module(module)
            if self._package is not None:
                for module in package_modules(self._package):
                    importlib.import_module(module)

    def register(self, name: str, obj: T | None = None, *, replace: bool = False) -> Callable[[T], T] | T:
        """``REG.register("x", obj)`` or ``@REG.register("x")``; a second "x" is an error unless ``replace``."""

        def add(value: T) -> T:
            if not replace and name in self._items and self._items[name] is not value:
                raise RegistryError(f"{self.kind} {name!r} is already registered")
            self._items[name] = value
            return value

        return add(obj) if obj is not None else add

    def get(self, name: str) -> T:
        self._load_builtins()
        try:
            return self._items[name]
        except KeyError:
            raise RegistryError(f"unknown {self.kind} {name!r}; registered: {sorted(self._items)}") from None

    def names(self) -> list[str]:
        self._load_builtins()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self._load_builtins()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def first_line(doc: str | None) -> str:
    """A docstring's first line: a registered thing's one-line description."""
    lines = (doc or "").strip().splitlines()
    return lines[0].strip() if lines else ""


def package_modules(package: str) -> list[str]:
    """The public modules of ``package`` (not its subpackages), by name, in a stable order."""
    pkg = importlib.import_module(package)
    return sorted(f"{package}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)
                  if not m.name.startswith("_") and not m.ispkg)


def load_object(path: str) -> Any:
    """The object a ``"package.module:name"`` path names (shard functions, offline replies, taggers)."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"expected 'module:name', got {path!r}")
    return getattr(importlib.import_module(module_name), attr)


class PluginImportError(ValueError):
    """A plugin module named in a config or on the command line cannot be imported."""


def import_plugins(modules: list[str]) -> None:
    """Import user modules that register strategies, simulators, backends or judges."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise PluginImportError(
                f"plugin {module!r} cannot be imported: {exc} (install it, or put its folder on PYTHONPATH)"
            ) from exc
        except SyntaxError as exc:
            raise PluginImportError(f"plugin {module!r}: {exc.msg} ({exc.filename}, line {exc.lineno})") from exc


__all__ = ["PluginImportError", "Registry", "RegistryError", "first_line", "import_plugins", "load_object", "package_modules"]
