"""The adaptive procedure (pure): looks after each round, decides, says what is still in play.

One :class:`Procedure` holds every decision of a run (per task, level and metric), one confidence
sequence per pair of each decision (:mod:`.sequential`), all at ``alpha / m`` with ``m`` the
number of pairs over all decisions (Bonferroni over the family, fixed before the first round).
At each look the caller hands the cumulative win counts of every pair (items where both
conditions ran, ties dropped); the procedure updates the sequences, takes their verdicts into the
decisions and returns what left the race. The same object drives the adaptive runner and the
statistics-only simulations of the tests, so what is validated is what runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ray_knowsim.stats.decide import Decision, Kind, Pair, PairVerdict, family_size
from ray_knowsim.stats.ranks import higher_is_better
from ray_knowsim.stats.sequential import SequenceState
from ray_knowsim.stats.signs import SignCounts, verdict

Key = tuple[int, Pair]  # (decision index, pair)


@dataclass
class Procedure:
    decisions: list[Decision]
    alpha: float
    states: dict[Key, SequenceState] = field(default_factory=dict)

    @classmethod
    def build(cls, tasks: Sequence[str], levels: Sequence[str], metrics: Sequence[str], conditions: Sequence[str],
              kind: Kind, alpha: float, effect: float | None = None) -> "Procedure":
        decisions = [Decision(t, lv, m, kind, list(conditions), higher_is_better(m), effect)
                     for t in tasks for lv in levels for m in metrics]
        return cls(decisions, alpha)

    @property
    def family_size(self) -> int:
        return family_size(self.decisions)

    @property
    def alpha_adj(self) -> float:
        return self.alpha / max(1, self.family_size)

    def look(self, counts: Mapping[Key, tuple[int, int]], round_no: int, bounds: bool = False) -> dict[int, list[str]]:
        """Update with cumulative ``(wins of a, non-tied items)`` per pair; returns, per decision
        index, the conditions that left its race at this look."""
        left: dict[int, list[str]] = {}
        for i, d in enumerate(self.decisions):
            if d.decided:
                continue
            verdicts = {}
            for pair in d.pairs:
                k, n = counts.get((i, pair), (0, 0))
                state = self.states.get((i, pair), SequenceState())
                if (k, n) != (state.k, state.n) or not state.n:
                    state = state.look(k, n, self.alpha_adj, d.effect, bounds)
                    self.states[(i, pair)] = state
                verdicts[pair] = PairVerdict(state.direction, state.within)
            gone = d.update(verdicts, round_no)
            if gone:
                left[i] = gone
        return left

    def fixed(self, counts: Mapping[Key, SignCounts]) -> "Procedure":
        """What the fixed design decides from the whole pool's sign counts with the same decision
        rule and family: compare's verdict (exact sign test and its Clopper-Pearson interval) at
        alpha / m, one look. Returns a new procedure; this one is left as it is."""
        out = Procedure([Decision(d.task, d.level, d.metric, d.kind, list(d.conditions), d.higher_is_better, d.effect)
                         for d in self.decisions], self.alpha)
        for i, d in enumerate(out.decisions):
            verdicts = {}
            for pair in d.pairs:
                v = verdict(counts.get((i, pair), SignCounts(0, 0, 0)), out.alpha_adj)
                within = d.effect is not None and v.ci_low > 0.5 - d.effect and v.ci_high < 0.5 + d.effect
                verdicts[pair] = PairVerdict(v.direction, within)
            d.update(verdicts, 1)
        return out

    def in_play(self) -> dict[tuple[str, str], set[str]]:
        """(task, level) -> the conditions some undecided decision there still needs."""
        out: dict[tuple[str, str], set[str]] = {}
        for d in self.decisions:
            out.setdefault((d.task, d.level), set()).update(d.in_play())
        return out

    @property
    def done(self) -> bool:
        return all(d.decided for d in self.decisions)


__all__ = ["Key", "Procedure"]
