"""Words, sentences and the shared thresholds and markers of the offline test double."""

from __future__ import annotations

import re
from functools import lru_cache

from ray_knowsim.text import fold_plural

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    """
    a about above after again all also an and any are as at be because been before being below
    between both but by can could did do does doing down during each either else for from further
    had has have having here how however i if in into is it its itself just let like may me might
    more most much must my no nor not now of off on once one only or other our out over own same
    she should so some such than that the their them then there these they this those through to
    too under until up upon us very was we were what when where which while who whom why will with
    would you your yours itself whole thus therefore get gets got use used uses using make makes
    need needs needed way ways thing things know see say said new first second each every many
    another less part given gives give here's it's that's i'm don't can't isn't
    """.split()
)


_stem = fold_plural


def words(text: str) -> list[str]:
    """Content words: lower-cased, stop words and single letters dropped, plurals folded."""
    return list(_words(text))


@lru_cache(maxsize=4096)
def _words(text: str) -> tuple[str, ...]:
    out = []
    for w in _WORD.findall(text.lower()):
        if w in _STOP or (len(w) == 1 and not w.isdigit()):
            continue
        out.append(_stem(w))
    return tuple(out)


def ntokens(text: str) -> int:
    """Usage estimate: whitespace-separated tokens."""
    return len(text.split())


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]



def _lc(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def first_sentence(text: str) -> str:
    parts = sentences(text)
    return parts[0] if parts else text


#: extractor labels from the IDF-weighted share of an IU's words found in the reply
WELL_EXPLAINED_AT = 0.55
SHALLOW_AT = 0.25
#: a learner sentence "touches" an IU when it names most of the concept or carries much of its wording
TOUCH_CONCEPT_AT = 0.6
TOUCH_COVERAGE_AT = 0.35

_ATTEMPT = re.compile(r"\b(let me try|i think|i'd|i would|so that|so we|so i|that gives|which gives|my answer|i get|i got)\b|=", re.I)
_RESTATE = re.compile(r"\b(you said|you're saying|you are saying|so you mean|if i understand|in other words)\b", re.I)
_HEDGE = re.compile(r"\b(not sure|i'm lost|i am lost|confused|don't see|don't get|maybe|i guess|no idea)\b", re.I)


def _label(coverage: float) -> str:
    if coverage >= WELL_EXPLAINED_AT:
        return "well_explained"
    if coverage >= SHALLOW_AT:
        return "shallow"
    return "not_mentioned"
