"""How much wording a prompt template shares with a text it must not copy: the longest run of
consecutive words the two have in common.

The prompts are written in our own words (spec §12.8): a run shared with the paper may be a short
technical phrase, never a sentence. This module measures that; ``scripts/own_words.py`` runs it
over every template of a prompt set against the paper-derived texts at hand (the passages the spec
quotes, and the reference implementation's prompt files when a checkout has them), and
``tests/prompts/test_own_words.py`` holds the set to the bound.

Words are compared case-insensitively with punctuation dropped, so "Never, ever" and "never ever"
are one run; a template's ``{{placeholder}}`` breaks a run (its filled-in text is not ours to judge).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

_WORD = re.compile(r"[a-z0-9]+(?:[_'’][a-z0-9]+)*")
_PLACEHOLDER = re.compile(r"\{\{[a-z0-9_]+\}\}")
#: a quoted passage: straight or curly double quotes, or a backtick span with a space inside
_QUOTED = re.compile(r'"([^"\n]{3,}?)"|“([^”\n]{3,}?)”|`([^`\n]* [^`\n]*)`')
_BREAK = "\x00"  # a token no word equals: runs never cross it


def words(text: str) -> list[str]:
    """The text's words, lower-cased, punctuation dropped; each placeholder becomes a break."""
    out: list[str] = []
    for k, piece in enumerate(_PLACEHOLDER.split(text.lower())):
        if k:
            out.append(_BREAK)
        out.extend(_WORD.findall(piece))
    return out


@dataclass(frozen=True)
class SharedRun:
    """The longest run of words a text shares with any of the sources (0 words: nothing shared)."""

    length: int
    words: tuple[str, ...] = ()
    source: str = ""

    @property
    def phrase(self) -> str:
        return " ".join(self.words)


def _grams(tokens: Sequence[str], n: int) -> Iterable[tuple[str, ...]]:
    for i in range(len(tokens) - n + 1):
        gram = tuple(tokens[i : i + n])
        if _BREAK not in gram:
            yield gram


def _shared_at(tokens: Sequence[str], source_grams: set[tuple[str, ...]], n: int) -> tuple[str, ...] | None:
    return next((g for g in _grams(tokens, n) if g in source_grams), None)


def longest_shared_run(text: str, sources: Mapping[str, str]) -> SharedRun:
    """The longest word run of ``text`` found in any of ``sources`` ({name: text}).

    A run of n shared words contains shared runs of every shorter length, so the longest is found
    by bisection over n, each step one pass over word n-grams (linear, not quadratic, in the sizes).
    """
    tokens = words(text)
    best = SharedRun(0)
    for name, source in sources.items():
        src = words(source)
        lo, hi = best.length, min(len(tokens), len(src))  # lo: a length known to be shared (or best so far)
        found: tuple[str, ...] | None = None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            hit = _shared_at(tokens, set(_grams(src, mid)), mid)
            if hit is None:
                hi = mid - 1
            else:
                lo, found = mid, hit
        if found is not None and len(found) > best.length:
            best = SharedRun(len(found), found, name)
    return best


def quoted_passages(text: str) -> list[str]:
    """The passages ``text`` puts in double quotes (straight or curly) or in backticks with a
    space inside: in the spec, these are the paper's own words."""
    return [next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(text)]


def markdown_section(text: str, heading: str) -> str:
    """The part of a markdown ``text`` from the line starting with ``heading`` to the next heading
    of the same or a higher level ("" if absent)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        return ""
    level = len(heading) - len(heading.lstrip("#"))
    end = next(
        (j for j in range(start + 1, len(lines))
         if lines[j].startswith("#") and len(lines[j]) - len(lines[j].lstrip("#")) <= level),
        len(lines),
    )  # fmt: skip
    return "\n".join(lines[start:end])


def template_text(sections: Mapping[str, str]) -> str:
    """A template's sections as one text to compare, with a break between sections (a run that
    crosses from one section into the next is not one the prompt contains)."""
    return "\n{{section}}\n".join(sections.values())


__all__ = ["SharedRun", "longest_shared_run", "markdown_section", "quoted_passages", "template_text", "words"]
