"""Tiny text helpers shared by the offline model and the lexical IU tagger."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1 << 16)
def fold_plural(word: str) -> str:
    """Light plural folding so 'counts'/'count' and 'probabilities'/'probability' meet."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word
