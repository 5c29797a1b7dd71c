"""The offline tutor: reads the chat against the item's IU graph and teaches by its strategy.

:class:`Lesson` is the offline model's reading of the chat (what was taught, what the learner
asks about, whether they hedged or attempted). Each tutor strategy registered in
:mod:`ray_knowsim.strategies` names its ``teach_*`` function here (``offline_reply``); a strategy
without one gets :func:`teach_simple`. The replies are crude on purpose: *comprehensive* writes
out many IUs at once, advanced ones included; *socratic* one or two IUs next to what the learner
has shown, in part, with a guiding question; *adaptive* the IUs the learner asks about, or their
missing prerequisites first; *simple* one sentence about what was asked.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from ray_knowsim.llm.offline.graphs import GraphVocabulary
from ray_knowsim.llm.offline.words import (
    _ATTEMPT,
    _HEDGE,
    TOUCH_CONCEPT_AT,
    WELL_EXPLAINED_AT,
    _lc,
    first_sentence,
    sentences,
    words,
)
from ray_knowsim.registry import load_object


def _partial(description: str) -> str:
    """Roughly the first half of a description (at least its first sentence)."""
    parts = sentences(description)
    if len(parts) > 1:
        return parts[0]
    toks = description.split()
    return " ".join(toks[: max(6, len(toks) // 2)]).rstrip(",;:") + "..."


@dataclass
class Lesson:
    """The offline tutor's reading of the chat so far, against the item's IU graph."""

    vocab: GraphVocabulary
    chat: list[tuple[str, str]]
    covered: dict[str, bool] = field(init=False)  # taught well in an earlier tutor reply
    familiar: dict[str, bool] = field(init=False)  # named by the learner at some point
    asked: list[str] = field(init=False)  # IUs the latest message asks about or attempts
    hedged: bool = field(init=False)
    attempted: bool = field(init=False)

    def __post_init__(self) -> None:
        vocab, chat = self.vocab, self.chat
        latest = self.latest
        prior_assistant = set(words(" ".join(t for r, t in chat[:-1] if r == "assistant")))
        user_words = set(words(" ".join(t for r, t in chat if r == "user")))
        # what the learner asks about: IUs named in sentences that show confusion or an attempt (not
        # in "I'm comfortable with ..." sentences, nor in a restated problem statement)
        latest_words = set(w for s in sentences(latest) if _HEDGE.search(s) or _ATTEMPT.search(s) for w in words(s))
        self.covered = {v: vocab.coverage(v, prior_assistant) >= WELL_EXPLAINED_AT for v in vocab.index.ids}
        self.familiar = {v: vocab.concept_hit(v, user_words) >= TOUCH_CONCEPT_AT for v in vocab.index.ids}
        self.asked = sorted(
            (v for v in vocab.index.ids if vocab.concept_hit(v, latest_words) >= TOUCH_CONCEPT_AT),
            key=lambda v: (-vocab.concept_hit(v, latest_words), vocab.topo.index(v)),
        )
        self.hedged = bool(_HEDGE.search(latest))
        self.attempted = bool(_ATTEMPT.search(latest))

    @property
    def latest(self) -> str:
        return self.chat[-1][1] if self.chat and self.chat[-1][0] == "user" else ""

    def ready(self, v: str) -> bool:
        return all(self.covered.get(p, True) or self.familiar.get(p, True) for p in self.vocab.index.prereqs[v])

    def missing_first(self, v: str, seen: set[str] | None = None) -> str:
        """v itself when its prerequisites are in place, else its nearest missing prerequisite."""
        seen = seen or set()
        for p in self.vocab.index.prereqs[v]:
            if p in self.vocab.ius and p not in seen and not (self.covered[p] or self.familiar[p]):
                seen.add(p)
                return self.missing_first(p, seen)
        return v

    @property
    def opener(self) -> str:
        if self.attempted:
            return "Let me correct that step. " if self.hedged else "Good, that step works. "
        if self.hedged:
            return "No problem, let's untangle it. "
        return ""


def _explain(opening: str, ius: list, line: str, closing: str) -> str:
    """Opening, one paragraph per IU (``line`` formatted with its concept and description), closing."""
    body = [line.format(concept=iu.concept, description=iu.description) for iu in ius]
    return "\n\n".join([opening, *body, closing])


def teach_comprehensive(lesson: Lesson, rng: random.Random) -> str:
    vocab, covered = lesson.vocab, lesson.covered
    pending = [v for v in vocab.topo if not covered[v]]
    quota = max(4, math.ceil(0.6 * vocab.index.size))
    chosen = list(dict.fromkeys(lesson.asked[:2] + pending))[:quota]
    if len(chosen) < 4:  # nearly everything taught: recap the whole solution path again
        chosen = list(dict.fromkeys(chosen + vocab.topo[-(4 - len(chosen)) :]))
    return _explain(
        lesson.opener + "Here is the complete picture, step by step, including the more advanced points.",
        [vocab.ius[v] for v in chosen],
        "**{concept}.** {description}",
        "Read through each part carefully; together they give the full solution.",
    )


def teach_adaptive(lesson: Lesson, rng: random.Random) -> str:
    vocab, covered = lesson.vocab, lesson.covered
    targets: list[str] = []
    for v in lesson.asked:
        t = lesson.missing_first(v)
        if t not in targets:
            targets.append(t)
    if not targets:
        nxt = [v for v in vocab.topo if not covered[v] and lesson.ready(v)]
        targets = nxt[:1] or [vocab.topo[-1]]
    targets = targets[:2]
    return _explain(
        lesson.opener.strip() or "Let's build on what you already have.",
        [vocab.ius[v] for v in targets],
        "{concept}: {description}",
        "Try the next step with that, and tell me where it stops making sense.",
    )


def teach_socratic(lesson: Lesson, rng: random.Random) -> str:
    vocab, covered, asked = lesson.vocab, lesson.covered, lesson.asked
    ready_asked = [v for v in asked if lesson.ready(v) and not covered[v]]
    frontier = [v for v in vocab.topo if not covered[v] and lesson.ready(v)]
    if ready_asked:
        v = ready_asked[0]
    elif asked:
        v = lesson.missing_first(asked[0])
    else:
        v = frontier[0] if frontier else vocab.topo[-1]
    iu = vocab.ius[v]
    hint = _partial(iu.description)
    question = rng.choice(
        (
            f"How could you use that idea of {_lc(iu.concept)} in this problem?",
            f"What do you think {_lc(iu.concept)} tells us about the next step?",
            f"Can you try applying {_lc(iu.concept)} yourself before I say more?",
        )
    )
    text = f"{lesson.opener}Think about {_lc(iu.concept)}. {hint} {question}"
    nearby = [u for u in ready_asked + frontier if u != v]
    if nearby and rng.random() < 0.3:  # now and then a second, neighbouring idea
        other = vocab.ius[nearby[0]]
        text += f" And once that is clear: {_partial(other.description)} Why might that matter here?"
    return text.strip()


def teach_simple(lesson: Lesson, rng: random.Random) -> str:
    """A short, direct answer about what was asked (or the last step not yet taught)."""
    vocab = lesson.vocab
    asked = lesson.asked
    v = asked[0] if asked else next((x for x in reversed(vocab.topo) if not lesson.covered[x]), vocab.topo[-1])
    iu = vocab.ius[v]
    return f"{lesson.opener}{first_sentence(iu.description)}".strip()


def teach(vocab: GraphVocabulary, offline_reply: str | None, chat: list[tuple[str, str]], rng: random.Random) -> str:
    """The reply the tutor's strategy asks for: ``offline_reply`` is the ``"module:function"`` the
    renderer put in the facts (the strategy's ``offline_reply``); None: the Simple reply."""
    reply = teach_simple
    if offline_reply:
        reply = load_object(offline_reply)
    return reply(Lesson(vocab, chat), rng)


def generic_reply(latest: str) -> str:
    topic = " ".join(latest.split()[:12])
    return f"Let's work through this together. You asked: \"{topic}\". Which step would you like to start with?"


__all__ = ["Lesson", "generic_reply", "teach", "teach_adaptive", "teach_comprehensive", "teach_simple", "teach_socratic"]
