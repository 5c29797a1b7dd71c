"""Decisions over conditions from paired verdicts (pure): what an adaptive run decides per
(task, knowledge level, metric), and what the fixed design decides from the same rule.

A decision holds the pairs of its conditions; each pair's verdict is a direction (+1: the first
condition wins more items on the raw difference a - b, -1: the second, 0: undecided) and whether
its interval lies within 1/2 +- ``effect`` (shown smaller than the stated effect). Kinds:

* ``best`` — a condition leaves the race as soon as another one is significantly better (it may
  itself have left the race: "worse than a loser" is still worse than the best); decided when one
  condition is left (``winner``). If every condition is beaten (an intransitive cycle of win
  rates) the decision is made with no winner.
* ``ranking`` — decided when every pair's order is resolved; ``order`` lists the conditions by
  wins (None when the wins are not a strict order: an intransitive cycle).
* ``pairs`` — decided when every pair is resolved or shown smaller than the effect.

The family of decisions is every pair of every decision: each verdict is taken at alpha / m
(Bonferroni), so all the claims of a run hold together with probability >= 1 - alpha.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal, Sequence

Kind = Literal["best", "ranking", "pairs"]
Pair = tuple[str, str]


@dataclass(frozen=True)
class PairVerdict:
    direction: int  # +1: a wins more items (a - b > 0), -1: b does, 0: undecided
    within: bool = False  # the interval lies within 1/2 +- effect


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
    eliminated: dict[str, int] = field(default_factory=dict)  # condition -> round it left the race (best)
    decided: bool = False
    after_round: int | None = None
    winner: str | None = None
    order: list[str] | None = None

    @property
    def pairs(self) -> list[Pair]:
        return list(combinations(self.conditions, 2))

    def better(self, pair: Pair) -> str | None:
        v = self.verdicts.get(pair)
        if v is None or v.direction == 0:
            return None
        a, b = pair
        return a if (v.direction > 0) == self.higher_is_better else b

    def resolved(self, pair: Pair) -> bool:
        v = self.verdicts.get(pair)
        if v is None:
            return False
        return v.direction != 0 or (self.kind == "pairs" and v.within)

    def race(self) -> list[str]:
        """Conditions no other condition is significantly better than."""
        beaten = {loser for p in self.pairs if (w := self.better(p)) is not None for loser in p if loser != w}
        return [c for c in self.conditions if c not in beaten]

    def in_play(self) -> set[str]:
        """The conditions this decision still needs sessions of."""
        if self.decided:
            return set()
        if self.kind == "best":
            return set(self.race())
        return {c for p in self.pairs if not self.resolved(p) for c in p}

    def update(self, verdicts: dict[Pair, PairVerdict], round_no: int) -> list[str]:
        """Take this look's verdicts (a decided verdict is never taken back: the callers' intervals
        are running intersections) and return the conditions that left the race now."""
        if self.decided:
            return []
        before = set(self.race())
        for pair, v in verdicts.items():
            old = self.verdicts.get(pair)
            if old is not None and old.direction != 0:
                v = PairVerdict(old.direction, v.within or old.within)
            self.verdicts[pair] = v
        left = [c for c in self.conditions if c in before and c not in self.race()]
        for c in left:
            self.eliminated[c] = round_no
        if self.kind == "best":
            race = self.race()
            if len(race) <= 1:
                self.decided, self.winner = True, race[0] if race else None
        elif all(self.resolved(p) for p in self.pairs):
            self.decided = True
            if self.kind == "ranking":
                self.order = strict_order(self)
        if self.decided:
            self.after_round = round_no
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


def family_size(decisions: Sequence[Decision]) -> int:
    return sum(len(d.pairs) for d in decisions)


__all__ = ["Decision", "Kind", "Pair", "PairVerdict", "family_size", "strict_order"]
