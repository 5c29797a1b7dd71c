"""The verdicts a report shows: an adaptive run's OWN sequential verdicts (its decisions.json), or
compare's fixed-sample verdicts for a fixed run -- never a fixed-sample re-test of data an
adaptive run stopped collecting (its stopping rule would make that test's level wrong).

Both come out as the same records: per (task, level, metric) and pair, the counts (wins, losses,
ties, oriented on the first condition), the significant winner and the sentence of
:func:`ray_knowsim.compare.sentences.verdict_sentence`; and per (task, level, metric) the ★ --
a condition that significantly beats every other condition there (:func:`ray_knowsim.stats.leaderboard.board`).
"""

from __future__ import annotations

from ray_knowsim.stats.multiplicity import correction_name

from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

from ray_knowsim.compare.sentences import verdict_sentence
from ray_knowsim.schema.decisions import DecisionsFile
from ray_knowsim.stats.leaderboard import Board, Detectable, board
from ray_knowsim.stats.ranks import higher_is_better


@dataclass(frozen=True)
class PairView:
    task: str
    level: str
    metric: str
    a: str
    b: str
    wins: int
    losses: int
    ties: int | None  # None: an older decisions.json that did not record ties
    better: str | None
    sentence: str
    equivalent: bool = False  # shown within the equivalence margin (compare --effect, an adaptive run's within_effect)


@dataclass
class RunVerdicts:
    source: Literal["adaptive", "fixed"]
    method: str  # what is computed, for the report's Method list
    pairs: list[PairView] = field(default_factory=list)
    stars: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (task, level, metric) -> condition
    boards: dict[tuple[str, str, str], Board] = field(default_factory=dict)  # (task, level, metric) -> its leaderboard

    def boards_of(self, task: str | None) -> dict[tuple[str, str], Board]:
        """(level, metric) -> its leaderboard for one task (all tasks when None and there is one):
        what the results tables take their positions and ★ from."""
        return {(lv, m): b for (t, lv, m), b in self.boards.items() if task is None or t == task}

    def significant(self) -> list[PairView]:
        return [p for p in self.pairs if p.better is not None]

    def decided(self) -> list[PairView]:
        """The pairs the family decided: significant, or shown equivalent (what a run's cost per
        decision divides by, :func:`ray_knowsim.stats.per_decision.cost_per_decision`)."""
        return [p for p in self.pairs if p.better is not None or p.equivalent]

    def detectable(self) -> Detectable | None:
        """The smallest effect any of the run's boards could detect (the one with the lowest
        detectable win rate): said when the run decided nothing."""
        found = [b.detectable for b in self.boards.values() if b.detectable is not None]
        finite = [d for d in found if d.win_rate == d.win_rate]
        return min(finite, key=lambda d: d.win_rate) if finite else (found[0] if found else None)


#: what every surface says when no pair differs (the report's Verdicts section, the terminal)
NO_VERDICT = "No significant verdict: no pair of conditions differs on any metric at the family's level."


def verdict_texts(verdicts: RunVerdicts) -> list[str]:
    """The significant verdicts as the lines a reader sees ("task: sentence"), or the one line
    saying there are none: the report and the terminal both print these, so one verdict never
    reads two ways."""
    sig = verdicts.significant()
    return [f"{p.task}: {p.sentence}" for p in sig] if sig else [NO_VERDICT]


def _boards(pairs: list[PairView], conditions: dict[tuple[str, str, str], list[str]], alpha: float,
            family_of: dict[tuple[str, str, str], int]) -> dict[tuple[str, str, str], Board]:
    """Per (task, level, metric) the leaderboard of :func:`ray_knowsim.stats.leaderboard.board`,
    with the smallest win rate its family could detect (at the most items any of its pairs has)."""
    out = {}
    for key, conds in conditions.items():
        mine = [p for p in pairs if (p.task, p.level, p.metric) == key]
        theta = {(p.a, p.b): (p.wins + (p.ties or 0) / 2) / n for p in mine if (n := p.wins + p.losses + (p.ties or 0))}
        beats = [(p.better, p.b if p.better == p.a else p.a) for p in mine if p.better is not None]
        n_items = max((p.wins + p.losses + (p.ties or 0) for p in mine), default=0)
        out[key] = board(conds, theta, beats, Detectable(n_items, alpha, family_of.get(key, 1)) if key in family_of else None)
    return out


def _verdicts(source, method, pairs, conds, alpha: float, family_of: dict[tuple[str, str, str], int]) -> RunVerdicts:
    boards = _boards(pairs, conds, alpha, family_of)
    return RunVerdicts(source, method, pairs, {k: b.star for k, b in boards.items() if b.star is not None}, boards)


def _with_effect(paired: pd.DataFrame) -> bool:
    """Whether compare asked for equivalence (its rows carry the margin)."""
    return "effect" in paired.columns and bool(paired["effect"].notna().any())


def _shown(flag) -> bool:  # noqa: ANN001 - a paired row's cell: bool, numpy bool, None or NaN
    return flag is not None and not pd.isna(flag) and bool(flag)


def from_compare(paired: pd.DataFrame, alpha: float, family: str) -> RunVerdicts:
    """compare's fixed-sample verdicts (the ``paired`` table of :func:`ray_knowsim.compare.paired.analyse`)."""
    pairs = [PairView(r.task, r.knowledge_level, r.metric, r.condition_a, r.condition_b, int(r.wins), int(r.losses), int(r.ties),
                      r.better if isinstance(r.better, str) else None, r.sentence,
                      _shown(getattr(r, "equivalent", None))) for r in paired.itertuples()]
    conds: dict[tuple[str, str, str], list[str]] = {}
    for p in pairs:
        here = conds.setdefault((p.task, p.level, p.metric), [])
        here += [c for c in (p.a, p.b) if c not in here]
    method = ("Verdicts (who beats whom, ★, sentences): per pair of conditions and metric, each item is a win, loss or tie "
              "of its mean paired difference; exact two-sided sign test of wins against losses with its Clopper-Pearson "
              f"win-rate interval, {correction_name(_with_effect(paired))} over {family} at alpha {alpha:g} (a result is significant exactly when the "
              "interval at its family level excludes 1/2). ★ = the condition that significantly beats every other condition on "
              "that metric and level.")
    family_of: dict[tuple[str, str, str], int] = {}
    for r in paired.itertuples():
        key = (r.task, r.knowledge_level, r.metric)
        family_of[key] = max(family_of.get(key, 1), int(getattr(r, "family_size", 1)))
    return _verdicts("fixed", method, pairs, conds, alpha, family_of)


def _pair_counts(p, metric: str) -> tuple[int, int, int | None]:
    """(wins, losses, ties) oriented on condition_a, from a record of either format."""
    if getattr(p, "wins", None) is not None and getattr(p, "losses", None) is not None:
        return int(p.wins), int(p.losses), int(getattr(p, "ties", 0) or 0)
    raw_a, n = int(p.wins_a), int(p.items)  # older records: raw signs of a - b, ties dropped and not counted
    return (raw_a, n - raw_a, None) if higher_is_better(metric) else (n - raw_a, raw_a, None)


def from_record(record: DecisionsFile) -> RunVerdicts:
    """An adaptive run's own verdicts, as its decisions.json recorded them after its last round."""
    pairs = []
    conds: dict[tuple[str, str, str], list[str]] = {}
    test = "sequential test over items"
    spec = getattr(record, "spec", None)  # the locked adaptive section (newer records)
    effect = spec.get("effect") if isinstance(spec, dict) else None
    for d in record.decisions:
        key = (d.task, d.knowledge_level, d.metric)
        here = conds.setdefault(key, [])
        for p in d.pairs:
            here += [c for c in (p.condition_a, p.condition_b) if c not in here]
            w, lo, t = _pair_counts(p, d.metric)
            when = f", decided after round {d.after_round}" if d.decided and d.after_round is not None else ""
            sentence = verdict_sentence(p.condition_a, p.condition_b, d.metric, d.knowledge_level, w, lo, t or 0, better=p.better,
                                        p_adj=None, test=f"{test}{when}", equivalent=bool(getattr(p, "within_effect", False)),
                                        effect=effect)
            if t is None:
                sentence += " (ties not recorded in this run's decisions.json: the counts are non-tied items)"
            pairs.append(PairView(d.task, d.knowledge_level, d.metric, p.condition_a, p.condition_b, w, lo, t, p.better, sentence,
                                  bool(getattr(p, "within_effect", False))))
    method = (f"Verdicts (who beats whom, ★, sentences): the adaptive run's own sequential verdicts from decisions.json "
              f"({record.procedure}; alpha {record.alpha:g} over a family of {record.family_size} pairs), as the run "
              "decided them round by round; they are not re-tested with a fixed-sample test (the run stopped collecting "
              "where its own test decided, which a fixed-sample test would not account for). ★ = the condition that "
              "significantly beats every other condition of that decision.")
    family_of = {key: int(record.family_size) for key in conds}  # the fixed design's MDE: a sequential test needs a few per cent more
    return _verdicts("adaptive", method, pairs, conds, float(record.alpha), family_of)


__all__ = ["NO_VERDICT", "PairView", "RunVerdicts", "from_compare", "from_record", "verdict_texts"]
