"""The adaptive procedure (pure): looks after each round, decides, says what is still in play.

One :class:`Procedure` holds every decision of a run (per task, level and metric) and one
sequential test per pair of each decision, on the item win rate (:mod:`.winrate`). The design:

* ``group_sequential`` (default; a known, finite pool): the exact group-sequential sign test of
  :mod:`.group_sequential`, alpha spent over the pool's rounds (information time = share of the
  pool scheduled), a look every round;
* ``anytime`` (open-ended pools): the Krichevsky–Trofimov confidence sequence of
  :mod:`.sequential`, valid at any number of looks with no horizon, at a price in power.

The family is every pair of every decision (``family: run``) or each decision's pairs
(``family: decision``), fixed before the first round, controlled by Holm's step-down over the
pairs' sequential tests, computed as its exact closure (:func:`ray_knowsim.stats.multiplicity.holm_closure`). For ``pairs`` decisions a
pair is also resolved when shown within 1/2 +- effect (anytime-valid, at the same local level:
"equal" and "no difference" cannot both be true nulls of one pair, so one share of alpha covers
both claims); such a family is at Bonferroni's alpha / m, because a share may be passed on only
when neither null of its pair can still be true
(:func:`ray_knowsim.stats.multiplicity.family_verdicts`, the rule ``compare`` uses too). The same
object drives the adaptive runner, the planning replay and the statistics-only simulations of the
tests, so what is validated is what runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

from ray_knowsim.stats.decide import DEFAULT_PLAY, Decision, Kind, Pair, PairVerdict, PlayRule, family_size
from ray_knowsim.stats.group_sequential import PairSequence, Spending
from ray_knowsim.stats.multiplicity import family_verdicts, correction_name
from ray_knowsim.stats.ranks import higher_is_better
from ray_knowsim.stats.sequential import AnytimeSequence, equivalence_reachable, equivalent
from ray_knowsim.stats.winrate import EMPTY, WinCounts

Key = tuple[int, Pair]  # (decision index, pair)
DesignKind = Literal["group_sequential", "anytime"]
FamilyKind = Literal["run", "decision"]


#: ``in_play: curtail``: a pair of an open decision stops when its predictive chance of crossing
#: by the pool's end at the largest level it can ever be tested at (alpha; alpha / m in a family
#: with equivalence claims) is at most NEED_CHANCE (0: curtailment, it cannot cross even if every
#: remaining item went its way) and (``pairs``) no outcome of its remaining items can show it within
#: the effect; a
#: decided (or unreachable) decision's open pair keeps running while another decision of its family
#: is open and its chance at alpha exceeds HELP_CHANCE (both chosen by measurement on seeds apart
#: from the reported ones: docs/adaptive.md, "Several decisions in one family")
NEED_CHANCE = 0.0
HELP_CHANCE = 0.1


@dataclass(frozen=True)
class Design:
    kind: DesignKind = "group_sequential"
    spending: Spending = field(default_factory=Spending)
    in_play: PlayRule = DEFAULT_PLAY  # which conditions keep running (stats.decide, Procedure.running)
    need_chance: float = NEED_CHANCE  # curtail only
    help_chance: float = HELP_CHANCE  # curtail only
    help_level: Literal["current", "alpha"] = "alpha"  # curtail: the level a helper's chance is at

    def sequence(self) -> PairSequence | AnytimeSequence:
        return PairSequence(self.spending) if self.kind == "group_sequential" else AnytimeSequence()

    def describe(self, alpha: float, family: FamilyKind, m: int, equivalence: bool = False) -> str:
        rule = correction_name(equivalence)
        fam = (f"{rule} over the family of {m} pairs (every pair of every decision)" if family == "run"
               else f"{rule} within each decision's pairs")
        if self.kind == "group_sequential":
            test = (f"exact group-sequential sign test (binomial DP over the looks, {self.spending.describe()} alpha "
                    "spending over the pool's rounds, a look every round; repeated confidence intervals from the same "
                    "boundaries)")
        else:
            test = "anytime-valid Beta(1/2, 1/2) mixture (Krichevsky-Trofimov) confidence sequence"
        play = {"open_pairs": "every condition with an unresolved pair stays in play",
                "candidates": "the candidates and the conditions with an open pair with one stay in play",
                "curtail": ("an unresolved pair keeps running while its decision is open and it can still cross "
                            f"(predictive chance at its largest level above {self.need_chance:g})"
                            + (" or still be shown within the effect" if equivalence else
                               ", and after its decision is decided while another decision of the family is open and "
                               f"its chance is above {self.help_chance:g}")
                            + "; a stopped pair never resumes")}[self.in_play]
        return (f"per pair, the item win rate (wins vs losses over matched items, ties counted); {test}; {fam}, "
                f"alpha {alpha:g}; decided pairs stay decided; {play}")


@dataclass
class Procedure:
    decisions: list[Decision]
    alpha: float
    design: Design = field(default_factory=Design)
    family: FamilyKind = "run"
    multiplicity: Literal["holm", "bonferroni"] = "holm"  # bonferroni: compare's fixed-design adjustment
    sequences: dict[Key, PairSequence | AnytimeSequence] = field(default_factory=dict)
    counts: dict[Key, WinCounts] = field(default_factory=dict)
    rejected: dict[Key, float] = field(default_factory=dict)  # key -> the level it was resolved at
    levels: dict[Key, float] = field(default_factory=dict)  # key -> its verdict's level (level_of)
    _memo: dict = field(default_factory=dict, repr=False)
    directions: dict[Key, int] = field(default_factory=dict)
    within: dict[Key, bool] = field(default_factory=dict)
    stopped: set[Key] = field(default_factory=set)  # curtail: pairs that stopped running (never resume)
    unreachable: set[int] = field(default_factory=set)  # curtail: open decisions no remaining data can decide

    @classmethod
    def build(cls, tasks: Sequence[str], levels: Sequence[str], metrics: Sequence[str], conditions: Sequence[str],
              kind: Kind, alpha: float, effect: float | None = None, design: Design | None = None,
              family: FamilyKind = "run") -> "Procedure":
        design = design or Design()
        decisions = [Decision(t, lv, m, kind, list(conditions), higher_is_better(m), effect, play=design.in_play)
                     for t in tasks for lv in levels for m in metrics]
        return cls(decisions, alpha, design, family)

    @property
    def family_size(self) -> int:
        return family_size(self.decisions)

    def describe(self) -> str:
        return self.design.describe(self.alpha, self.family, self.family_size, equivalence=self._equivalence(self.keys()))

    def keys(self) -> list[Key]:
        return [(i, p) for i, d in enumerate(self.decisions) for p in d.pairs]

    def _families(self) -> list[list[Key]]:
        if self.family == "run":
            return [self.keys()]
        return [[(i, p) for p in d.pairs] for i, d in enumerate(self.decisions)]

    def level_of(self, key: Key) -> float:
        """The level the pair's verdict and interval are at: for a resolved pair, the smallest
        family level its own test crossed at; else a level at which the closure kept it open."""
        return self.levels.get(key, self.alpha / max(1, self.family_size))

    def _own(self, key: Key, level: float) -> tuple[int, bool]:
        """(direction, within) of the pair's own test at ``level`` (memoised per number of looks)."""
        seq = self.sequences.get(key)
        if seq is None:
            return 0, False
        memo = (key, level, len(seq.looks))
        got = self._memo.get(memo)
        if got is None:
            direction, _ = seq.test(level)
            within = False
            d = self.decisions[key[0]]
            if not direction and d.kind == "pairs" and d.effect is not None:
                c = self.counts.get(key, EMPTY)
                within = bool(c.n) and equivalent(c.wins, c.ties, c.losses, d.effect, level)
            got = self._memo[memo] = (direction, within)
        return got

    def look(self, counts: Mapping[Key, WinCounts], times: Mapping[str, float], round_no: int) -> dict[int, list[str]]:
        """Take the cumulative counts of every pair (``times``: task -> information time, the
        share of its pool scheduled so far); a pair is looked at when it got new matched items.
        Returns, per decision index, the conditions that left play at this look."""
        for key, c in counts.items():
            old = self.counts.get(key, EMPTY)
            if c.n <= old.n:
                continue
            self.counts[key] = c
            seq = self.sequences.setdefault(key, self.design.sequence())
            seq.add(min(1.0, times[self.decisions[key[0]].task]), c.decisive, c.wins)
        return self._decide(round_no)

    def _equivalence(self, fam: Sequence[Key]) -> bool:
        """Whether the family makes equivalence claims (then alpha / m: :func:`family_verdicts`)."""
        return any(self.decisions[i].kind == "pairs" and self.decisions[i].effect is not None for i in {k[0] for k in fam})

    def _passes_on(self, fam: Sequence[Key]) -> bool:
        """Whether a rejection in the family passes its share of alpha on (Holm's closure)."""
        return self.multiplicity == "holm" and not self._equivalence(fam)

    def _top_level(self, fam: Sequence[Key]) -> float:
        """The largest level a pair of the family can ever be tested at."""
        return self.alpha if self._passes_on(fam) else self.alpha / max(1, len(fam))

    def _decide(self, round_no: int) -> dict[int, list[str]]:
        for fam in self._families():
            results = family_verdicts(fam, self._own, self.alpha, equivalence=self._equivalence(fam),
                                      bonferroni=self.multiplicity == "bonferroni")
            for key, res in results.items():
                self.levels[key] = res.level
                if res.rejected and key not in self.rejected:
                    self.rejected[key] = res.level
                    self.directions[key], self.within[key] = self._own(key, res.level)
        left: dict[int, list[str]] = {}
        for i, d in enumerate(self.decisions):
            if d.decided:
                continue
            verdicts = {p: PairVerdict(self.directions.get((i, p), 0), self.within.get((i, p), False))
                        for p in d.pairs if (i, p) in self.rejected}
            gone = d.update(verdicts, round_no)
            if gone:
                left[i] = gone
        if self._curtails:
            before = {i: d.in_play() for i, d in enumerate(self.decisions)}
            self._curtail()
            for i, d in enumerate(self.decisions):
                gone = sorted(before[i] - d.in_play(), key=d.conditions.index)
                for c in gone:
                    d.eliminated.setdefault(c, round_no)
                if gone:
                    left[i] = sorted({*left.get(i, []), *gone}, key=d.conditions.index)
        return left

    @property
    def _curtails(self) -> bool:
        return self.design.in_play == "curtail" and self.design.kind == "group_sequential"

    def _remaining(self, key: Key) -> int:
        """The pair's matched items still to come by its pool's end (from its information time)."""
        seq, c = self.sequences.get(key), self.counts.get(key, EMPTY)
        if seq is None or not seq.looks or not c.n:
            return 0
        t = seq.looks[-1].t
        return int(round(c.n / t)) - c.n if t > 0 else 0

    def _chances(self, key: Key, level: float) -> tuple[float, float]:
        """(up, down): the pair's predictive chance of crossing by its pool's end at ``level``."""
        seq, c = self.sequences.get(key), self.counts.get(key, EMPTY)
        if not isinstance(seq, PairSequence) or not seq.looks or not c.n:
            return 1.0, 1.0
        memo = ("chances", key, level, len(seq.looks))
        got = self._memo.get(memo)
        if got is None:
            got = self._memo[memo] = seq.chances(level, self._remaining(key), c.decisive / c.n)
        return got

    def _can_be_equivalent(self, key: Key, level: float) -> bool:
        """Whether some outcome of the pair's remaining items could still show it within the
        effect at ``level`` (False where the decision makes no equivalence claim)."""
        d = self.decisions[key[0]]
        if d.kind != "pairs" or d.effect is None:
            return False
        seq, c = self.sequences.get(key), self.counts.get(key, EMPTY)
        if seq is None or not seq.looks or not c.n:
            return True
        memo = ("equivalent", key, level, len(seq.looks))
        got = self._memo.get(memo)
        if got is None:
            got = self._memo[memo] = equivalence_reachable(c.wins, c.ties, c.losses, self._remaining(key), d.effect, level)
        return got

    def _curtail(self) -> None:
        """``in_play: curtail``: which unresolved pairs keep running (:meth:`running`). Stopping a
        pair, by any rule, keeps the error: its looks stay a prefix of the full design's. A pair
        of an open decision runs while any of its claims can still be reached (issue 49: ``pairs``
        stopped pairs that could still be shown within the effect); a closed decision's pair runs
        for the others only where rejections pass alpha on."""
        for fam in self._families():
            top = self._top_level(fam)
            open_keys = [k for k in fam if k not in self.rejected and k not in self.stopped]
            alive: dict[Key, tuple[bool, bool, bool]] = {}
            for k in open_keys:
                up, down = self._chances(k, top)
                alive[k] = (up > self.design.need_chance, down > self.design.need_chance, self._can_be_equivalent(k, top))
            for i in {k[0] for k in fam}:
                d = self.decisions[i]
                if not d.decided and i not in self.unreachable and not self._reachable(i, alive):
                    self.unreachable.add(i)
            still_open = self._passes_on(fam) and any(not self.decisions[i].decided and i not in self.unreachable
                                                      for i in {k[0] for k in fam})
            for k in open_keys:
                i = k[0]
                if self._runs_for_itself(i):
                    keep = any(alive[k])
                elif still_open:
                    level = self.level_of(k) if self.design.help_level == "current" else self.alpha
                    keep = max(self._chances(k, level)) > self.design.help_chance
                else:
                    keep = False
                if not keep:
                    self.stopped.add(k)
        for i, d in enumerate(self.decisions):
            d.running = {p for p in d.pairs if self._runs((i, p))} if d.decided or self._runs_for_itself(i) else set()

    def _runs_for_itself(self, i: int) -> bool:
        """Whether decision ``i``'s open pairs run for the decision itself: while it is open and can
        still be decided -- a ``pairs`` decision while it is open at all, because each pair's
        verdict stands on its own (issue 49: a pair runs while any of its claims can be reached)."""
        d = self.decisions[i]
        return not d.decided and (i not in self.unreachable or d.kind == "pairs")

    def _runs(self, key: Key) -> bool:
        return key not in self.rejected and key not in self.stopped

    def _reachable(self, i: int, alive: Mapping[Key, tuple[bool, bool, bool]]) -> bool:
        """Whether decision ``i`` can still be decided: its pairs rejected so far plus those still
        able to reach a claim (``alive``: up, down, within) can complete a winner, a no-winner
        cycle, an order, or (``pairs``) every pair resolved."""
        d = self.decisions[i]
        nothing = (False, False, False)
        if d.kind == "pairs":
            return all(any(alive.get((i, p), nothing)) for p in d.pairs if not d.resolved(p))

        pairs = set(d.pairs)

        def can(a: str, b: str) -> bool:  # can "a beats b" still be claimed?
            p = (a, b) if (a, b) in pairs else (b, a)
            if d.better(p) is not None:
                return d.better(p) == a
            up, down, _ = alive.get((i, p), nothing)
            return up if p[0] == a else down

        others = {c: [o for o in d.conditions if o != c] for c in d.conditions}
        if d.kind == "ranking":
            return all(can(*p) or can(p[1], p[0]) for p in d.pairs)
        winner = any(all(can(c, o) for o in others[c]) for c in d.conditions)
        no_winner = all(any(can(o, c) for o in others[c]) for c in d.conditions)
        return winner or no_winner

    def running(self) -> set[Key]:
        """``in_play: curtail``: the unresolved pairs still asking for sessions (an open
        decision's, and the helpers: a closed decision's pairs kept for its family)."""
        return {k for k in self.keys() if self._runs(k)}

    def _helpers(self) -> set[Key]:
        return {k for k in self.running() if self.decisions[k[0]].decided or k[0] in self.unreachable}

    def fixed(self, counts: Mapping[Key, WinCounts], multiplicity: Literal["holm", "bonferroni"] = "holm") -> "Procedure":
        """What the fixed design decides from the whole pool's counts with the same decision rule
        and family: one look at t = 1 (the exact sign test), Holm over the family (or Bonferroni,
        compare's adjustment). Returns a new procedure; this one is left as it is."""
        out = Procedure([Decision(d.task, d.level, d.metric, d.kind, list(d.conditions), d.higher_is_better, d.effect,
                                  play=d.play) for d in self.decisions], self.alpha,
                        Design("group_sequential", self.design.spending, self.design.in_play), self.family, multiplicity)
        out.look(counts, {d.task: 1.0 for d in out.decisions}, 1)
        return out

    def interval(self, key: Key) -> tuple[float, float]:
        """The pair's interval for its decisive win rate at its Holm level (from the same
        boundaries as its verdict)."""
        seq = self.sequences.get(key)
        return (0.0, 1.0) if seq is None else seq.interval(self.level_of(key))

    def in_play(self) -> dict[tuple[str, str], set[str]]:
        """(task, level) -> the conditions some undecided decision there still needs (``curtail``:
        also those of a decided decision's pairs that keep running for its family)."""
        out: dict[tuple[str, str], set[str]] = {}
        for d in self.decisions:
            out.setdefault((d.task, d.level), set()).update(d.in_play())
        if self._curtails:
            for i, p in self._helpers():
                d = self.decisions[i]
                out[(d.task, d.level)].update(p)
        return out

    @property
    def exhausted(self) -> bool:
        """No decision left open that more data could decide (``curtail``)."""
        return all(d.decided or i in self.unreachable for i, d in enumerate(self.decisions))

    @property
    def done(self) -> bool:
        return all(d.decided for d in self.decisions)


def session_share(sessions_run: int, sessions_fixed: int) -> float:
    """The adaptive design's sessions as a share of the fixed design's (0 when there are none)."""
    return sessions_run / sessions_fixed if sessions_fixed else 0.0


__all__ = ["Design", "DesignKind", "FamilyKind", "Key", "Procedure", "session_share"]
