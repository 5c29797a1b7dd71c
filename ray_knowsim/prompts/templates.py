"""Versioned prompt templates: files ``templates/<name>.<version>.txt`` pinned by ``templates/manifest.txt``.

Why a manifest: results and response caches are keyed by ``prompt_version`` ("name@v1"). If a
template's wording changed while its version stayed the same, cached answers to the old wording
would be served for the new one. The manifest records each (name, version) with the SHA-256 of its
file; loading a template whose file no longer matches raises, so a wording change forces a new
version file (``<name>.v2.txt`` plus a manifest line) instead of silently reusing the old label.
Every pinned version stays loadable: a run picks a prompt *set* (``prompts: {version: v2}``), and
each template is then served at the newest pinned version not newer than the set, so runs made
with older prompts can be re-rendered and compared.

File format: optional ``#`` comment lines at the top, then sections introduced by ``@@ <section>``
lines (``system``, ``user``, or any fragment name). Placeholders are ``{{name}}``; filling is one
pass, so values containing braces (JSON, LaTeX) are inserted verbatim and never re-expanded.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping

_SECTION = re.compile(r"^@@ ([a-z0-9_]+)\s*$")
_PLACEHOLDER = re.compile(r"\{\{([a-z0-9_]+)\}\}")
MANIFEST = "manifest.txt"  # .txt so package-data ships it


class TemplateError(ValueError):
    """A template that is missing, malformed, unpinned, or filled with missing values."""


@dataclass(frozen=True)
class Template:
    name: str
    version: str
    sections: Mapping[str, str]

    @property
    def prompt_version(self) -> str:
        return f"{self.name}@{self.version}"

    def section(self, key: str) -> str:
        try:
            return self.sections[key]
        except KeyError:
            raise TemplateError(f"template {self.prompt_version} has no section {key!r}") from None

    def fill(self, key: str, values: Mapping[str, object]) -> str:
        """The section with every ``{{name}}`` replaced; a placeholder without a value is an error.

        The section is split once into literal text and placeholder names (:func:`_pieces`) and
        filled by one join: a regex substitution with a callback per placeholder was about half
        of a prompt's render time, and every request fills two to four sections."""
        literals, names = _pieces(self.section(key))
        if not names:
            return literals[0]
        missing = [m for m in names if m not in values]
        if missing:
            raise TemplateError(f"template {self.prompt_version} section {key!r} needs values for {sorted(set(missing))}")
        parts = [literals[0]]
        for name, literal in zip(names, literals[1:]):
            parts.append(str(values[name]))
            parts.append(literal)
        return "".join(parts)

    def placeholders(self, key: str) -> set[str]:
        return set(_pieces(self.section(key))[1])


@lru_cache(maxsize=4096)
def _pieces(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``text`` split at its ``{{name}}`` placeholders: the literal runs (one more than the names)
    and the names in order, so ``literals[0] + value(names[0]) + literals[1] + ...`` is the filled
    text, exactly what one pass of :data:`_PLACEHOLDER` substitution gives (values are inserted
    verbatim, never scanned again). Keyed by the section's text itself, so a cached split can
    never belong to other wording; sections are a few hundred distinct texts in all."""
    split = _PLACEHOLDER.split(text)  # literal, name, literal, name, ..., literal
    return tuple(split[0::2]), tuple(split[1::2])


def _templates_dir():
    return resources.files("ray_knowsim.prompts").joinpath("templates")


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: the prompt sets a run can choose (``prompts: {version: ...}``); the newest is the default
PROMPT_SETS: tuple[str, ...] = ("v1", "v2", "v3")
DEFAULT_PROMPTS = "v3"


@lru_cache(maxsize=256)
def version_number(version: str) -> int:
    """``"v3"`` -> 3 (a malformed version is an error). Cached: a handful of versions exist, and
    every learner and extractor request asks (its schema's legacy bounds)."""
    if not re.fullmatch(r"v[0-9]+", version):
        raise TemplateError(f"a prompt version looks like 'v2', got {version!r}")
    return int(version[1:])


def read_pins() -> dict[str, dict[str, str]]:
    """``{name: {version: sha256}}``: every pinned version of every template (one line each)."""
    pinned: dict[str, dict[str, str]] = {}
    text = _templates_dir().joinpath(MANIFEST).read_text(encoding="utf-8")
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            raise TemplateError(f"manifest line {lineno} must be 'name version sha256': {line!r}")
        name, version, digest = parts
        version_number(version)
        if version in pinned.get(name, {}):
            raise TemplateError(f"manifest pins {name}@{version} twice (line {lineno})")
        pinned.setdefault(name, {})[version] = digest
    return pinned


def read_manifest() -> dict[str, tuple[str, str]]:
    """``{name: (newest pinned version, sha256)}``."""
    out = {}
    for name, versions in read_pins().items():
        newest = max(versions, key=version_number)
        out[name] = (newest, versions[newest])
    return out


def resolve_version(name: str, prompts: str | None = None) -> str:
    """The version of ``name`` that prompt set ``prompts`` uses: the newest pinned one not newer
    than ``prompts`` (templates that did not change keep their older file); None = newest."""
    versions = read_pins().get(name)
    if not versions:
        raise TemplateError(f"no template {name!r} in the prompt manifest (known: {sorted(read_pins())})")
    if prompts is None:
        return max(versions, key=version_number)
    fit = [v for v in versions if version_number(v) <= version_number(prompts)]
    if not fit:
        raise TemplateError(f"template {name!r} has no version in prompt set {prompts} (pinned: {sorted(versions)})")
    return max(fit, key=version_number)


@lru_cache(maxsize=None)
def in_prompt_set(name: str, prompts: str | None) -> bool:
    """Whether prompt set ``prompts`` has any version of template ``name`` (newer sets add templates).
    Cached: every learner, baseline and extractor render asks, and which versions are pinned does
    not change while the package runs (the digests are checked where templates load)."""
    versions = read_pins().get(name, {})
    return bool(versions) and (prompts is None or any(version_number(v) <= version_number(prompts) for v in versions))


def parse_sections(text: str, label: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            if m.group(1) in sections:
                raise TemplateError(f"{label}: section {m.group(1)!r} appears twice")
            current = sections.setdefault(m.group(1), [])
        elif current is not None:
            current.append(line)
        elif line.strip() and not line.startswith("#"):
            raise TemplateError(f"{label}: text before the first '@@ section' line: {line!r}")
    if not sections:
        raise TemplateError(f"{label}: no '@@ section' lines")
    return {k: "\n".join(v).strip("\n") for k, v in sections.items()}


@lru_cache(maxsize=None)
def load_template(name: str, prompts: str | None = None) -> Template:
    """Template ``name`` as prompt set ``prompts`` pins it (None: its newest pinned version),
    verified against the digest recorded in the manifest."""
    version = resolve_version(name, prompts)
    digest = read_pins()[name][version]
    path = _templates_dir().joinpath(f"{name}.{version}.txt")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TemplateError(f"manifest pins {name}@{version} but {name}.{version}.txt is missing") from None
    actual = file_digest(data)
    if actual != digest:
        raise TemplateError(
            f"{name}.{version}.txt changed after it was pinned (sha256 {actual[:12]}..., manifest {digest[:12]}...): "
            f"put new wording in {name}.v<next>.txt and pin that version in the manifest"
        )
    return Template(name=name, version=version, sections=parse_sections(data.decode("utf-8"), f"{name}.{version}.txt"))


def template_names() -> list[str]:
    return sorted(read_manifest())


_FILE_NAME = re.compile(r"^([a-z0-9_]+)\.(v[0-9]+)\.txt$")


def template_files() -> dict[tuple[str, str], str]:
    """``{(name, version): sha256}`` of every template file shipped, pinned or not."""
    found = {}
    for entry in _templates_dir().iterdir():
        m = _FILE_NAME.match(entry.name)
        if m:
            found[(m.group(1), m.group(2))] = file_digest(entry.read_bytes())
    return found


def check_manifest() -> list[str]:
    """Problems with the manifest: unpinned files, missing files, digests that no longer match."""
    files = template_files()
    problems = []
    pins = read_pins()
    for name, versions in sorted(pins.items()):
        for version, digest in sorted(versions.items(), key=lambda kv: version_number(kv[0])):
            actual = files.get((name, version))
            if actual is None:
                problems.append(f"{name}@{version}: pinned but {name}.{version}.txt is missing")
            elif actual != digest:
                problems.append(f"{name}@{version}: file changed since it was pinned; add {name}.v<next>.txt instead")
    for name, version in sorted(files):
        if name not in pins:
            problems.append(f"{name}@{version}: not in the manifest")
        elif version not in pins[name]:
            newest = max(pins[name], key=version_number)
            if version_number(version) > version_number(newest):
                problems.append(f"{name}@{version}: newer than the pinned {newest}; pin it or remove it")
            else:
                problems.append(f"{name}@{version}: not in the manifest; pin it or remove it")
    return problems


def _main(argv: list[str]) -> int:
    """``check``: list manifest problems (exit 1 if any). ``line NAME VERSION``: print a manifest line."""
    if argv[:1] == ["check"]:
        problems = check_manifest()
        print("\n".join(problems) or "manifest ok")
        return 1 if problems else 0
    if argv[:1] == ["line"] and len(argv) == 3:
        digest = template_files().get((argv[1], argv[2]))
        if digest is None:
            print(f"no file {argv[1]}.{argv[2]}.txt")
            return 1
        print(f"{argv[1]} {argv[2]} {digest}")
        return 0
    print("usage: python -m ray_knowsim.prompts.templates check | line NAME VERSION")
    return 2


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
