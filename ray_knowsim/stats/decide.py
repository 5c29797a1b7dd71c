"""Decisions over conditions from paired verdicts (pure): what an adaptive run decides per
(task, knowledge level, metric), and what the fixed design decides from the same rule.

A decision holds the pairs of its conditions; each pair's verdict is a direction on the item win
rate (+1: the first condition wins significantly more items, oriented so that winning means
better; -1: the second; 0: undecided) and whether it was shown within 1/2 +- ``effect``.

* ``best`` -- decided with a **winner** when one condition significantly beats EVERY other
  condition directly; decided with **no winner** when every condition is beaten by some other
  (then the beats contain a cycle, which the decision names: a winner by transitivity would be a
  claim no test made). Which conditions keep running (``play``, :data:`PlayRule`):
  ``open_pairs`` (default): while the decision is open, every condition with an unresolved pair
  -- under Holm's closure every rejection passes its alpha on, so a pair among beaten conditions
  still helps decide the winner's pairs; a condition leaves play once all its pairs are resolved;
  ``curtail`` (default): as ``open_pairs``, but the family decides which pairs run
  (:meth:`ray_knowsim.stats.adaptive.Procedure.running`): a pair that can practically no longer
  reach a claim (cross; in ``pairs`` also be shown within the effect) stops, and a decided
  decision's open pairs keep running while another decision of the
  family is open; ``candidates`` (the design before ``open_pairs``): a condition that can still win (no one beats it), or whose
  comparison with one is unresolved -- cheaper, but the pairs it stops (say the two weakest) are
  never rejected and their share of alpha never reaches the pair that decides the winner.
* ``ranking`` -- decided when every pair is resolved; ``order`` is the strict order of the beats,
  or None with the ``cycle`` named when they are intransitive.
* ``pairs`` -- decided when every pair is resolved or shown smaller than the effect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal, Sequence

Kind = Literal["best", "ranking", "pairs"]
Pair = tuple[str, str]
PlayRule = Literal["curtail", "open_pairs", "candidates"]
DEFAULT_PLAY: PlayRule = "curtail"


@dataclass(frozen=True)
class PairVerdict:
    direction: int  # +1: a is significantly better, -1: b is, 0: undecided
    within: bool = False  # shown within 1/2 +- effect


@dataclass
class Decision:
    task: str
    level: str
    metric: str
    kind: Kind
    conditions: list[str]
    higher_is_better: bool
    effect: float | None = None  # pairs: the win-rate margin that counts as "smaller than the effect"
    verdicts: dict[Pair, PairVerdict] = field(default_factory=dict)
    eliminated: dict[str, int] = field(default_factory=dict)  # condition -> round it left play
    decided: bool = False
    after_round: int | None = None
    winner: str | None = None
    order: list[str] | None = None
    cycle: list[str] | None = None  # a cycle of significant beats (no winner / no order)
    play: PlayRule = DEFAULT_PLAY  # best: which conditions keep running (module docstring)
    running: set[Pair] | None = None  # curtail: the pairs the family still runs for this open decision

    @property
    def pairs(self) -> list[Pair]:
        return list(combinations(self.conditions, 2))

    def better(self, pair: Pair) -> str | None:
        v = self.verdicts.get(pair)
        if v is None or v.direction == 0:
            return None
        return pair[0] if v.direction > 0 else pair[1]

    def resolved(self, pair: Pair) -> bool:
        v = self.verdicts.get(pair)
        if v is None:
            return False
        return v.direction != 0 or (self.kind == "pairs" and v.within)

    def beats(self) -> dict[str, set[str]]:
        """condition -> the conditions it significantly beats."""
        out: dict[str, set[str]] = {c: set() for c in self.conditions}
        for p in self.pairs:
            w = self.better(p)
            if w is not None:
                out[w].add(p[1] if w == p[0] else p[0])
        return out

    def candidates(self) -> list[str]:
        """Conditions no other condition significantly beats (the ones that can still win)."""
        beaten = {loser for losers in self.beats().values() for loser in losers}
        return [c for c in self.conditions if c not in beaten]

    def race(self) -> list[str]:
        return self.candidates()

    def in_play(self) -> set[str]:
        """The conditions this decision still needs sessions of."""
        if self.decided:
            return set()
        if self.play == "curtail" and self.running is not None:
            return {c for p in self.running for c in p}
        if self.kind == "best" and self.play == "candidates":
            cands = set(self.candidates())
            need = set(cands)
            for a, b in self.pairs:
                if not self.resolved((a, b)) and (a in cands or b in cands):
                    need |= {a, b}
            return need
        return {c for p in self.pairs if not self.resolved(p) for c in p}

    def update(self, verdicts: dict[Pair, PairVerdict], round_no: int) -> list[str]:
        """Take this look's verdicts (a decided verdict is never taken back) and return the
        conditions that left play now."""
        if self.decided:
            return []
        before = self.in_play()
        for pair, v in verdicts.items():
            old = self.verdicts.get(pair)
            if old is not None:
                v = PairVerdict(old.direction or v.direction, v.within or old.within)
            self.verdicts[pair] = v
        beats = self.beats()
        k = len(self.conditions)
        if self.kind == "best":
            top = [c for c in self.conditions if len(beats[c]) == k - 1]
            if top:
                self.decided, self.winner = True, top[0]
            elif not self.candidates():
                self.decided, self.cycle = True, find_cycle(beats, self.conditions)
        elif all(self.resolved(p) for p in self.pairs):
            self.decided = True
            if self.kind == "ranking":
                self.order = strict_order(self)
                if self.order is None:
                    self.cycle = find_cycle(beats, self.conditions)
        if self.decided:
            self.after_round = round_no
        left = sorted(before - self.in_play(), key=self.conditions.index)
        for c in left:
            self.eliminated.setdefault(c, round_no)
        return left


def strict_order(d: Decision) -> list[str] | None:
    """Conditions by number of wins when every pair is ordered and the wins are transitive."""
    wins = {c: 0 for c in d.conditions}
    for p in d.pairs:
        w = d.better(p)
        if w is None:
            return None
        wins[w] += 1
    order = sorted(d.conditions, key=lambda c: (-wins[c], d.conditions.index(c)))
    k = len(order)
    return order if sorted(wins.values(), reverse=True) == list(range(k - 1, -1, -1)) else None


def find_cycle(beats: dict[str, set[str]], conditions: Sequence[str]) -> list[str] | None:
    """A cycle of the beats relation, as [c1, c2, ..., c1] with each beating the next (None: acyclic)."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(c: str) -> list[str] | None:
        colour[c] = 1
        stack.append(c)
        for d in sorted(beats.get(c, ()), key=list(conditions).index):
            if colour.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in colour:
                got = visit(d)
                if got:
                    return got
        stack.pop()
        colour[c] = 2
        return None

    for c in conditions:
        if c not in colour:
            got = visit(c)
            if got:
                return got
    return None


def family_size(decisions: Sequence[Decision]) -> int:
    return sum(len(d.pairs) for d in decisions)


__all__ = ["DEFAULT_PLAY", "Decision", "Kind", "Pair", "PairVerdict", "PlayRule", "family_size", "find_cycle", "strict_order"]
