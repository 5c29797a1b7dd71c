"""How much of an IU's own wording a sentence carries, and what the sentence says about it.

The audit judges the simulator against the IU graph's text, not against a model: an IU's
*evidence words* are the content words of its concept and description that the problem
statement does not already hold (a learner who quotes the question has not shown it knows an
IU), each weighted by how specific it is within the graph (IDF over the graph's IUs, so a word
every IU shares says little). Lexical and deliberately conservative: it misses paraphrases, and
the thresholds below are set so that a sentence must carry an IU clearly before anything is
flagged (measured numbers in docs/audit.md).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.text import content_words as _content_words

_SHORT_NUMBER = re.compile(r"(?<![a-z0-9])[a-z0-9]?[0-9][a-z0-9]?(?![a-z0-9])")


@lru_cache(maxsize=1 << 14)
def content_words(text: str) -> frozenset[str]:
    """The audit's content words: :func:`ray_knowsim.text.content_words`, plus the one- and
    two-character tokens that hold a digit ("54", "6w": an IU's result is often a number)."""
    return _content_words(text) | frozenset(_SHORT_NUMBER.findall(text.lower()))

#: a sentence NAMES an IU when it holds at least this share of the concept's evidence words
NAME_SHARE = 0.6
#: a sentence CARRIES an IU's description when it holds at least this IDF-weighted share of the
#: IU's evidence words and at least MIN_CARRIED_WORDS of them
CARRY_SHARE = 0.3
MIN_CARRIED_WORDS = 3
#: a reply covers an IU AT LENGTH from this IDF-weighted share of its evidence words
AT_LENGTH_SHARE = 0.5
#: a reply gives NO EVIDENCE of an IU when it does not name it (NAME_SHARE of its concept's words)
#: and carries under this share of its wording (a word or two that every explanation uses, "can",
#: "step", "equal", is no evidence). Measured on planted labels (docs/audit.md): 0.3 catches 92 % of
#: planted turns, 0.2 79 %; no offline well_explained label falls under either.
UNTOUCHED_SHARE = 0.3

_SENTENCE = re.compile(r"(?<=[.!?;:])\s+|\n+")
#: confusion, hedging, asking: the markers the simulator's rules require when it touches an IU it does not know
CONFUSION = re.compile(
    r"\b(not sure|unsure|confus\w*|lost|stuck|don'?t (?:get|understand|know|see|follow)|do not (?:get|understand|know|see)|"
    r"no idea|never (?:heard|learned|seen)|what (?:is|are|does|do)|how (?:do|does|is|can|would)|why (?:is|does|do)|"
    r"could you|can you (?:explain|show|help)|maybe|i guess|unfamiliar|new to me|puzzl\w*|not clear)\b",
    re.I,
)
#: claims of understanding (negations are caught by CONFUSION first)
CLAIM = re.compile(
    r"\b(i (?:already |fully |totally |really )?(?:know|understand|get|got|grasp|remember)|i'?ve (?:got|understood|learned)|"
    r"i'?m (?:comfortable|familiar|confident|fine|good) with|i am (?:comfortable|familiar|confident) with|"
    r"(?:makes|made) (?:total |perfect )?sense|(?:is|are) (?:clear|obvious|easy) to me|i can (?:do|solve|handle|apply))\b",
    re.I,
)
#: restating what the tutor just said (articulation, not use)
RESTATE = re.compile(r"\b(you'?re saying|you are saying|you said|so you mean|if i understand you|in other words|you mean)\b", re.I)
#: the learner announces an end of the conversation, and why
STOP_DONE = re.compile(
    r"\b(i'?ve got it|i got it|i (?:can|could) (?:finish|solve|do) (?:it|this|the rest)|(?:all|everything) (?:makes sense|fits)|"
    r"that'?s all i need|i'?m done|i understand (?:it )?(?:all|everything)(?: now)?|reach the answer myself|put all the steps together)\b",
    re.I,
)
STOP_OVERWHELMED = re.compile(r"\b(too much|overwhelm\w*|(?:like|want|need) to stop|let'?s stop|i give up|can'?t (?:take|follow) (?:any )?more)\b", re.I)


def sentences(text: str) -> list[str]:
    """The text's sentences (split after . ! ? ; : and at line breaks), stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE.split(text or "") if s and s.strip()]


@dataclass(frozen=True)
class IUWords:
    """One IU's evidence words (weights: IDF within the graph) and those of its concept name."""

    id: str
    concept: str
    weights: Mapping[str, float]
    concept_words: frozenset[str]
    #: the concept's words with those the problem holds too: a CLAIM to understand an IU may name
    #: it in the question's words ("I understand the perimeter" on a perimeter problem)
    full_concept_words: frozenset[str] = frozenset()

    @property
    def judgeable(self) -> bool:
        return bool(self.weights)

    def share(self, words: frozenset[str]) -> float:
        total = sum(self.weights.values())
        return sum(w for word, w in self.weights.items() if word in words) / total if total else 0.0

    def named(self, words: frozenset[str], full: bool = False) -> bool:
        cw = self.full_concept_words if full else self.concept_words
        return bool(cw) and len(cw & words) >= math.ceil(NAME_SHARE * len(cw) - 1e-9)

    def carried(self, words: frozenset[str]) -> bool:
        return len(words & self.weights.keys()) >= MIN_CARRIED_WORDS and self.share(words) >= CARRY_SHARE

    def touched(self, words: frozenset[str]) -> bool:
        """Named, or its description carried: the sentence is about this IU."""
        return self.named(words) or self.carried(words)

    def untouched(self, words: frozenset[str]) -> bool:
        return not self.named(words) and self.share(words) < UNTOUCHED_SHARE


def graph_words(graph: IUGraph, problem: str = "") -> dict[str, IUWords]:
    """Evidence words of every IU of ``graph`` (graph node order), less the ``problem``'s words."""
    given = content_words(problem)
    bags = {n.id: content_words(f"{n.concept} {n.description}") - given for n in graph.nodes}
    df = Counter(w for bag in bags.values() for w in bag)
    n = len(bags)
    return {
        node.id: IUWords(node.id, node.concept, {w: math.log(1.0 + n / df[w]) for w in sorted(bags[node.id])},
                         content_words(node.concept) - given, content_words(node.concept))
        for node in graph.nodes
    }  # fmt: skip


def best_sentence(text: str, iu: IUWords) -> str:
    """The sentence of ``text`` that carries most of ``iu`` (the evidence a flag quotes)."""
    parts = sentences(text)
    return max(parts, key=lambda s: iu.share(content_words(s)), default="")


def mostly_from(sentence_words: frozenset[str], source_words: frozenset[str], share: float = 0.8) -> bool:
    """Whether at least ``share`` of a sentence's content words come from ``source_words``."""
    return bool(sentence_words) and len(sentence_words & source_words) >= share * len(sentence_words)


def shared_ngrams(text_words: Sequence[str], source_words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The runs of ``n`` consecutive words ``text_words`` shares with ``source_words``."""
    src = {tuple(source_words[i : i + n]) for i in range(len(source_words) - n + 1)}
    return {g for g in (tuple(text_words[i : i + n]) for i in range(len(text_words) - n + 1)) if g in src}


__all__ = [
    "AT_LENGTH_SHARE", "CARRY_SHARE", "CLAIM", "CONFUSION", "IUWords", "MIN_CARRIED_WORDS", "content_words", "NAME_SHARE", "RESTATE",
    "STOP_DONE", "STOP_OVERWHELMED", "UNTOUCHED_SHARE", "best_sentence", "graph_words", "mostly_from", "sentences",
    "shared_ngrams",
]  # fmt: skip
