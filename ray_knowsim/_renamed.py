"""Module names that changed, kept importable for one release with a DeprecationWarning.

Issue 23 renamed what pointed the wrong way ("model" meant the data schemas, the LLM clients and
the backend entries of a config). User code written against the old names (a plugin importing
``ray_knowsim.model.chat``) keeps working for one release: the old name is the SAME module object
as the new one, so there are never two copies of a class. The table is listed in
``docs/extending.md`` ("Renamed modules"); ``tests/packaging/test_renamed.py`` checks each entry,
and that no module of the project itself still uses an old name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old dotted name -> new dotted name (a package's submodules follow it)
RENAMED: dict[str, str] = {
    "ray_knowsim.model": "ray_knowsim.schema",
    "ray_knowsim.engine.models": "ray_knowsim.engine.clients",
    "ray_knowsim.engine.config.models": "ray_knowsim.engine.config.model_entries",
    "ray_knowsim.sim.extract_graphs": "ray_knowsim.graphs.extract",
    "ray_knowsim.prompts.learners": "ray_knowsim.simulators.base",
    "ray_knowsim.prompts.tutors": "ray_knowsim.strategies.base",
}
#: old dotted name -> where its contents went (importing it fails with that message)
REMOVED: dict[str, str] = {
    "ray_knowsim.engine.results": "ray_knowsim.io.commits (the commit protocol) and ray_knowsim.io.rundir (reading a run)",
}
REMOVED_IN = "the next release"


def new_name(fullname: str) -> str | None:
    for old, new in RENAMED.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


class _RenamedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old name with the module of its new name (first on ``sys.meta_path``, so the
    new package's files are never loaded a second time under the old name). The import system
    sets ``__spec__`` on whatever ``create_module`` returns, so the new module's own spec is put
    back in ``exec_module``: ``importlib.reload`` and relative imports keep working on it."""

    def __init__(self) -> None:
        self._specs: dict[int, object] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname in REMOVED:
            raise ModuleNotFoundError(f"{fullname} was removed; use {REMOVED[fullname]}", name=fullname)
        if new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = new_name(spec.name)
        warnings.warn(f"{spec.name} is now {new}; the old name goes in {REMOVED_IN}", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._specs[id(module)] = module.__spec__
        return module

    def exec_module(self, module) -> None:  # the new module is already executed: only its spec is restored
        module.__spec__ = self._specs.pop(id(module), module.__spec__)


def install() -> None:
    if not any(isinstance(f, _RenamedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _RenamedFinder())


__all__ = ["REMOVED", "RENAMED", "install", "new_name"]
