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
from functools import cached_property, lru_cache
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.text import content_words as _content_words

_SHORT_NUMBER = re.compile(r"(?<![a-z0-9])[a-z0-9]?[0-9][a-z0-9]?(?![a-z0-9])")
#: one word for the many a tutor uses for the same operation or idea (a reply that "adds up" the
#: terms carries an IU that "sums" them); our own short list of school-maths synonyms
_SYNONYMS = {
    **dict.fromkeys("add addition plu sum summ total combin".split(), "sum"),
    **dict.fromkeys("multiply multipl multipli product time".split(), "product"),
    **dict.fromkeys("divid divide division quotient split".split(), "divide"),
    **dict.fromkeys("subtract minu difference".split(), "subtract"),
    **dict.fromkeys("choose choo choos chos choic choice select pick".split(), "choose"),
    **dict.fromkeys("chance likelihood probability probabiliti".split(), "probability"),
    **dict.fromkeys("leftover remainder".split(), "remainder"),
    **dict.fromkeys("way arrangement arrang possibility possibiliti".split(), "way"),
    **dict.fromkeys("outcome result".split(), "outcome"),
    **dict.fromkeys("success succes successe".split(), "success"),
    **dict.fromkeys("formula equation".split(), "equation"),
    **dict.fromkeys("put putt plug plugg substitut substitute substitution replac replace swap swapp".split(), "substitute"),
    **dict.fromkeys("twic twice double doubl".split(), "twice"),
}
_SUFFIX = re.compile(r"(?:ing|ed|es|ly)$")


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A crude stem and its synonym class, so "adding", "added" and "sums" meet: a tutor rarely
    repeats the graph's exact word forms. Tokens with a digit are left as written."""
    if any(ch.isdigit() for ch in word):
        return word
    forms = [word]
    forms.append(_SUFFIX.sub("", forms[-1]) if len(word) > 5 else forms[-1])
    forms.append(forms[-1][:-1] if len(forms[-1]) > 4 and forms[-1].endswith("e") else forms[-1])
    forms.append(forms[-1][:-1] if len(forms[-1]) > 3 and forms[-1].endswith("s") and not forms[-1].endswith("ss") else forms[-1])
    return next((_SYNONYMS[f] for f in forms if f in _SYNONYMS), forms[-1])


_LATEX = [
    (re.compile(r"\\+[dt]?binom\{([^{}]*)\}\{([^{}]*)\}"), r"C(\1,\2)"),
    (re.compile(r"\\+[dt]?frac\{([^{}]*)\}\{([^{}]*)\}"), r"(\1)/(\2)"),
    (re.compile(r"\(([\w.]+)\)/\(([\w.]+)\)"), r"\1/\2"),
    (re.compile(r"\b(\d+)\s*choose\s*(\d+)\b", re.I), r"C(\1,\2)"),
    (re.compile(r"\\+(?:cdot|times)|×|·|∗"), "*"),
    (re.compile(r"[−–]"), "-"),
    (re.compile(r"²"), "^2"),
    (re.compile(r"\\+pmod\s*\{?\s*\d+\s*\}?|\(\s*mod\s*\d+\s*\)"), " "),
    (re.compile(r"\\+equiv|≡"), "="),
    (re.compile(r"\\+(?:left|right|[bB]ig+[lr]?|[,!;]|quad|boxed)|\$|\\+\(|\\+\)|\\+\[|\\+\]"), " "),
    (re.compile(r"[{}]"), ""),
    (re.compile(r"\(\s*([\w.]+)\s*,\s*([\w.]+)\s*\)"), r"(\1,\2)"),
    (re.compile(r"\s*([+\-*/^=<>≤≥])\s*"), r"\1"),
]
_OPERATOR = re.compile(r"[+\-*/^=]")
_CALL = re.compile(r"c\(\d+,\d+\)|\(\d+,\d+\)|\d+/\d+|\d+\^\d+")


@lru_cache(maxsize=1 << 14)
def math_atoms(text: str) -> frozenset[str]:
    """The worked expressions of a text as it writes them, normalised ("6w + 6 = 54" -> "6w+6=54",
    "\\binom{6}{3}" and "6 choose 3" -> "c(6,3)"): each equation, each side of one that holds an
    operator, and binomials, pairs, fractions and powers of numbers. A tutor who explains a step
    in other words still writes its numbers. Prefixed "=" to keep them apart from words."""
    for pattern, repl in _LATEX:
        text = pattern.sub(repl, text or "")
    atoms: set[str] = set()
    for tok in text.lower().split():
        tok = tok.strip(".,;:!?'\"")
        if tok.count("(") != tok.count(")"):
            tok = tok.strip("()")
        atoms |= set(_CALL.findall(tok))
        if not _OPERATOR.search(tok) or re.search(r"[a-z]{4,}", tok):
            continue  # a plain word, or a hyphenated one ("distance-round")
        sides = [x for x in tok.split("=") if x]
        if len(sides) > 1:
            atoms |= {f"{x}={y}" for x, y in zip(sides, sides[1:])}
        atoms |= {x for x in sides if _OPERATOR.search(x) and len(x) >= 3}
    return frozenset("=" + a for a in atoms if any(ch.isdigit() for ch in a) or len(a) >= 5)


_FRACTION = re.compile(r"(?<![\w.^])(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)(?![\w.^]|\s*[(])")
_DECIMAL = re.compile(r"(?<![\w./^])(\d*\.\d+)(?![\w./^])")


@lru_cache(maxsize=1 << 14)
def number_values(text: str) -> frozenset[str]:
    """The fractions and decimals of a text by their value ("1/10", "\\frac{1}{10}" and "0.1" are
    all "#0.1"): a tutor writes a probability one way, the graph another. Whole numbers are left
    to the words (the value would only count them twice)."""
    for pattern, repl in _LATEX[:3]:
        text = pattern.sub(repl, text or "")
    values = set()
    for a, b in _FRACTION.findall(text):
        if float(b) != 0:
            values.add(float(a) / float(b))
    values |= {float(x) for x in _DECIMAL.findall(text)}
    return frozenset(f"#{v:.6g}" for v in values if v != int(v))


@lru_cache(maxsize=1 << 14)
def content_words(text: str) -> frozenset[str]:
    """The audit's evidence features of a text: the stems of :func:`ray_knowsim.text.content_words`,
    the one- and two-character tokens that hold a digit ("54", "6w": an IU's result is often a
    number), its worked expressions (:func:`math_atoms`) and its fractions and decimals by value
    (:func:`number_values`)."""
    words = _content_words(text) | frozenset(_SHORT_NUMBER.findall(text.lower()))
    return frozenset(stem(w) for w in words) | math_atoms(text) | number_values(text)


def plain_words(features: frozenset[str]) -> frozenset[str]:
    return frozenset(f for f in features if not f.startswith("="))

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
#: a reply covers an IU at length WITHOUT naming it from this share of its evidence (docs/audit.md:
#: set on the labelled paraphrases of tests/doubles/audit_paraphrases.py)
UNNAMED_SHARE = 0.7
#: a sentence is ABOUT an IU when that IU is the one it carries most, at least ABOUT_SHARE of its
#: evidence and ABOUT_MARGIN times the runner-up's share (a tutor's sentence teaches one step;
#: set on the labelled paraphrases: 47 of 50 taught IUs found, 2 of 534 others, docs/audit.md)
ABOUT_SHARE = 0.2
ABOUT_MARGIN = 1.2
#: a worked expression weighs this many words of the same specificity
ATOM_WEIGHT = 2.0

_SENTENCE = re.compile(r"(?<=[.!?;:])\s+|\n+")
#: confusion, hedging, asking: the markers the simulator's rules require when it touches an IU it does not know
CONFUSION = re.compile(
    r"\b(not sure|unsure|confus\w*|lost|stuck|don'?t (?:get|understand|know|see|follow)|do not (?:get|understand|know|see)|"
    r"don'?t (?:fully|really|quite) (?:get|understand|know|see|follow)|no idea|never (?:heard|learned|seen)|what (?:is|are|does|do)|how (?:do|does|is|can|would)|why (?:is|does|do)|"
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
    r"\b(i'?ve got it|i got it|i (?:can|could) (?:finish|solve|do) (?:it|this|the rest)|(?:all|everything) makes sense|"
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
    #: the features no other IU of the graph has: a reply that names an IU and carries half its
    #: wording but none of these restates its neighbours (a conclusion IU repeats their steps)
    own_features: frozenset[str] = frozenset()

    @property
    def judgeable(self) -> bool:
        return bool(self.weights)

    @cached_property
    def _total(self) -> float:
        return sum(self.weights.values())

    @cached_property
    def _order(self) -> dict[str, int]:
        return {word: k for k, word in enumerate(self.weights)}

    def share(self, words: frozenset[str]) -> float:
        """The weighted share of the IU's wording that ``words`` carry. A sentence holds a few of an
        IU's words: it looks up the sentence's words (not every word of the IU, ~20x the work on a
        10,000-conversation report) and adds the weights in the IU's own order, so the sum is the
        same float to the last bit."""
        total = self._total
        if not total:
            return 0.0
        order = self._order
        hits = sorted((w for w in words if w in order), key=order.__getitem__)
        return sum(self.weights[w] for w in hits) / total

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

    def covered(self, words: frozenset[str]) -> bool:
        """Taught at length: named and half its evidence, or UNNAMED_SHARE of it in other words."""
        share = self.share(words)
        own = not self.own_features or bool(self.own_features & words)
        return (share >= AT_LENGTH_SHARE and own and (self.named(words) or not self.concept_words)) or share >= UNNAMED_SHARE

    def matched(self, words: frozenset[str], most: int = 6) -> str:
        """The evidence a flag quotes: the IU's matched words and expressions, heaviest first."""
        hits = sorted((w for w in self.weights if w in words), key=lambda w: (-self.weights[w], w))
        return ", ".join(h[1:] if h.startswith("=") else h for h in hits[:most]) + (" ..." if len(hits) > most else "")


def graph_words(graph: IUGraph, problem: str = "", solution: str = "") -> dict[str, IUWords]:
    """Evidence features of every IU of ``graph`` (graph node order), less the ``problem``'s.

    Each sentence of the reference ``solution`` lends its worked expressions to the IU whose
    wording it carries most: the solution writes the step the IU names, often in numbers the
    description leaves out. Expressions weigh :data:`ATOM_WEIGHT` times a word of the same
    specificity (a formula is rarely written by chance)."""
    given = content_words(problem)
    bags = {n.id: set(content_words(f"{n.concept} {n.description}") - given) for n in graph.nodes}
    for sentence in sentences(solution):
        feats = content_words(sentence)
        atoms = {f for f in feats if f.startswith("=")} - given
        if atoms:
            best = max(bags, key=lambda i: len(bags[i] & feats) / (len(bags[i]) or 1), default=None)
            if best is not None and len(bags[best] & feats) >= 2:
                bags[best] |= atoms
    df = Counter(w for bag in bags.values() for w in bag)
    n = len(bags)

    def weight(w: str) -> float:
        return math.log(1.0 + n / df[w]) * (ATOM_WEIGHT if w.startswith("=") else 1.0)

    return {
        node.id: IUWords(node.id, node.concept, {w: weight(w) for w in sorted(bags[node.id])},
                         plain_words(content_words(node.concept)) - given, plain_words(content_words(node.concept)),
                         frozenset(w for w in bags[node.id] if df[w] == 1))
        for node in graph.nodes
    }  # fmt: skip


_WHOLE_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def about(text: str, ius: Mapping[str, IUWords], least: float = ABOUT_SHARE, margin: float = ABOUT_MARGIN) -> dict[str, str]:
    """IU id -> the first sentence of ``text`` that is about it (``least`` share, ``margin`` times the runner-up's).

    Relative, not absolute: a paraphrase carries a small share of any IU's wording, but still
    more of the IU it teaches than of any other, which is what a reader goes by too. Whole
    sentences (a formula after a colon belongs to the step its sentence explains)."""
    out: dict[str, str] = {}
    holders = _holders(ius)
    for sentence in (s.strip() for s in _WHOLE_SENTENCE.split(text or "") if s and s.strip()):
        words = content_words(sentence)
        # only the IUs that hold one of the sentence's words can have a share: the others' is 0,
        # which never leads and is the same runner-up as no runner-up (least > 0)
        ranked = sorted(((ius[i].share(words), i) for i in {i for w in words for i in holders.get(w, ())}), reverse=True)
        if not ranked or ranked[0][0] < least:
            continue
        runner_up = ranked[1][0] if len(ranked) > 1 else 0.0
        if ranked[0][0] >= margin * runner_up and ranked[0][0] > runner_up and len(words & ius[ranked[0][1]].weights.keys()) >= 2:
            out.setdefault(ranked[0][1], sentence)
    return out


_HOLDERS: dict[int, tuple[Mapping[str, IUWords], dict[str, tuple[str, ...]]]] = {}


def _holders(ius: Mapping[str, IUWords]) -> dict[str, tuple[str, ...]]:
    """Word -> the judgeable IUs whose wording holds it, kept for the last few graphs' maps (a
    session's turns ask about one map many times; the cache holds the map itself, so its id stays
    its own while cached)."""
    hit = _HOLDERS.get(id(ius))
    if hit is not None and hit[0] is ius:
        return hit[1]
    index: dict[str, list[str]] = {}
    for i, iu in ius.items():
        if iu.judgeable:
            for word in iu.weights:
                index.setdefault(word, []).append(i)
    if len(_HOLDERS) >= 64:
        _HOLDERS.pop(next(iter(_HOLDERS)))
    _HOLDERS[id(ius)] = (ius, out := {w: tuple(ids) for w, ids in index.items()})
    return out


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
    "ABOUT_MARGIN", "ABOUT_SHARE", "ATOM_WEIGHT", "AT_LENGTH_SHARE", "CARRY_SHARE", "UNNAMED_SHARE", "about", "math_atoms", "plain_words", "stem", "CLAIM", "CONFUSION", "IUWords", "MIN_CARRIED_WORDS", "content_words", "NAME_SHARE", "RESTATE",
    "STOP_DONE", "STOP_OVERWHELMED", "UNTOUCHED_SHARE", "best_sentence", "graph_words", "mostly_from", "sentences",
    "shared_ngrams",
]  # fmt: skip
