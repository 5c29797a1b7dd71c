"""Tiny text helpers shared by the offline model, the lexical IU tagger and the simulator audit."""

from __future__ import annotations

import re
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
