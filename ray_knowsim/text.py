"""Tiny text helpers shared by the offline model, the lexical IU tagger and the simulator audit, and
the terminal summaries' line discipline (issue 51): at most :data:`WIDTH` columns a line, so what
`score`, `sweep`, `adaptive-replay` and `agreement` print reads in any terminal. Pure."""

from __future__ import annotations

import re
from typing import Sequence
from functools import lru_cache


@lru_cache(maxsize=1 << 16)
def fold_plural(word: str) -> str:
    """Light plural folding so 'counts'/'count' and 'probabilities'/'probability' meet."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


_STOP = frozenset(
    "a an the of in on for to and or by with via as at from into under over per its it is are be as "
    "using use used between within given than that this these those their there when which what how "
    "vs versus about across each all any both two one".split()
)
_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=1 << 14)
def content_words(text: str, min_len: int = 3) -> frozenset[str]:
    """The text's content words: lower-cased, at least ``min_len`` letters, stop words dropped, plurals folded."""
    return frozenset(fold_plural(w) for w in _WORD.findall(text.lower()) if len(w) >= min_len and w not in _STOP)


#: the widest line a terminal summary prints
WIDTH = 100


def fit(line: str, width: int = WIDTH) -> str:
    """``line`` cut to ``width`` columns (an ellipsis marks the cut): the summary's lines are
    short by design; this only bounds a long name."""
    return line if len(line) <= width else line[: width - 1] + "…"


def wrap_items(head: str, items: Sequence[str], indent: str = "    ", width: int = WIDTH) -> list[str]:
    """``head`` followed by ``items`` joined with ", ", wrapped at ``width`` (items never split)."""
    lines, line = [], head
    for k, item in enumerate(items):
        piece = item + ("," if k < len(items) - 1 else "")
        if line.strip() and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = indent + piece
        else:
            line = f"{line} {piece}" if line.strip() else indent + piece
    lines.append(line)
    return [fit(x, width) for x in lines]
