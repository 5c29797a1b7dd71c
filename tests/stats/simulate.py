"""Statistics-only benchmarks for the adaptive procedure: items resampled from a per-session
metric table, no model calls.

A *population* is the table's items, each with its per-level metric values per condition. A
benchmark draws ``pool`` items from it with replacement, in random order, and runs the
procedure of :mod:`ray_knowsim.stats.adaptive` (the object the adaptive runner uses) round by
round: a round adds ``per_round`` items for the conditions still in play. A/A twins are two
trials of one strategy under two names, their labels swapped at random per drawn item, so their
population win rate is exactly 1/2. The truth of a claim "D is better than C" is the
population's win rate (uniform over the table's items, both arrangements of the twins).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Sequence

import numpy as np
import pandas as pd

from ray_knowsim.stats import signs as G
from ray_knowsim.stats.adaptive import Procedure


@dataclass
class Population:
    conditions: list[str]
    levels: list[str]
    metrics: list[str]
    # (level, metric, a, b) -> (items, 2) signs of a - b per item and twin arrangement (0: as is, 1: swapped)
    signs: dict[tuple[str, str, str, str], np.ndarray]
    n_items: int

    def truth(self, level: str, metric: str, a: str, b: str) -> float:
        """Population win rate of a over b (NaN when they never differ)."""
        s = self.signs[(level, metric, a, b)]
        pos, neg = (s > 0).sum(), (s < 0).sum()
        return pos / (pos + neg) if pos + neg else float("nan")


def population(table: pd.DataFrame, conditions: dict[str, tuple[str, int]], metrics: Sequence[str],
               levels: Sequence[str], twins: Sequence[tuple[str, str]] = ()) -> Population:
    """``conditions``: name -> (strategy, trial) read from ``table`` (one session per item, level
    and name); ``twins``: pairs of names whose labels are swapped at random per drawn item."""
    items = sorted(table["item_id"].unique())
    names = list(conditions)
    values = {}
    for name, (strategy, trial) in conditions.items():
        part = table[(table["condition"] == strategy) & (table["trial"] == trial)].set_index(["item_id", "knowledge_level"])
        values[name] = part
    swap = {a: b for a, b in twins} | {b: a for a, b in twins}
    signs = {}
    for lv in levels:
        for m in metrics:
            for a, b in combinations(names, 2):
                arr = np.zeros((len(items), 2))
                for arrangement in (0, 1):
                    aa = swap.get(a, a) if arrangement else a
                    bb = swap.get(b, b) if arrangement else b
                    va = values[aa].xs(lv, level="knowledge_level")[m].reindex(items).to_numpy(dtype=float)
                    vb = values[bb].xs(lv, level="knowledge_level")[m].reindex(items).to_numpy(dtype=float)
                    arr[:, arrangement] = np.sign(np.nan_to_num(va - vb, nan=0.0))
                signs[(lv, m, a, b)] = arr
    return Population(names, list(levels), list(metrics), signs, len(items))


@dataclass
class Outcome:
    false_claims: int  # pairwise claims against the population's win rate
    decided: int  # decisions made
    sessions: int  # sessions the adaptive run used
    sessions_fixed: int
    winners: dict[tuple[str, str], str | None]  # (level, metric) -> winner (best)
    fixed_winners: dict[tuple[str, str], str | None]  # the fixed design's, on the same pool
    fixed_false_claims: int


def _false_claims(proc: Procedure, pop: Population) -> int:
    bad = 0
    for i, d in enumerate(proc.decisions):
        for a, b in d.pairs:
            w = d.better((a, b))
            if w is None:
                continue
            q = pop.truth(d.level, d.metric, a, b)
            a_claimed_higher = (w == a) == d.higher_is_better  # the claim is about the raw difference a - b
            if not np.isfinite(q) or (q <= 0.5 if a_claimed_higher else q >= 0.5):
                bad += 1
    return bad


def run_benchmark(pop: Population, rng: np.random.Generator, pool: int, per_round: int, alpha: float,
                  kind: str = "best") -> Outcome:
    draws = rng.integers(0, pop.n_items, size=pool)
    arrangement = rng.integers(0, 2, size=pool)
    proc = Procedure.build(["t"], pop.levels, pop.metrics, pop.conditions, kind, alpha)  # type: ignore[arg-type]
    counts: dict = {}
    sessions, seen = 0, 0
    round_no = 0
    while seen < pool and not proc.done:
        round_no += 1
        new = slice(seen, min(pool, seen + per_round))
        seen = new.stop
        play = proc.in_play()
        for lv in pop.levels:
            sessions += (new.stop - new.start) * len(play.get(("t", lv), set()))
        for i, d in enumerate(proc.decisions):
            here = play.get(("t", d.level), set())
            for a, b in d.pairs:
                if a in here and b in here:
                    s = pop.signs[(d.level, d.metric, a, b)][draws[new], arrangement[new]]
                    k, n = counts.get((i, (a, b)), (0, 0))
                    counts[(i, (a, b))] = (k + int((s > 0).sum()), n + int((s != 0).sum()))
        proc.look(counts, round_no)
    winners = {(d.level, d.metric): d.winner for d in proc.decisions}
    fixed = fixed_design(pop, draws, arrangement, alpha, kind)
    return Outcome(_false_claims(proc, pop), sum(d.decided for d in proc.decisions), sessions,
                   pool * len(pop.levels) * len(pop.conditions), winners,
                   {(d.level, d.metric): d.winner for d in fixed.decisions}, _false_claims(fixed, pop))


def fixed_design(pop: Population, draws: np.ndarray, arrangement: np.ndarray, alpha: float, kind: str = "best") -> Procedure:
    """The fixed design's decisions on the whole pool (Procedure.fixed: compare's verdict at alpha / m)."""
    proc = Procedure.build(["t"], pop.levels, pop.metrics, pop.conditions, kind, alpha)  # type: ignore[arg-type]
    counts = {}
    for i, d in enumerate(proc.decisions):
        for a, b in d.pairs:
            s = pop.signs[(d.level, d.metric, a, b)][draws, arrangement]
            counts[(i, (a, b))] = G.SignCounts(int((s > 0).sum()), int((s < 0).sum()), int((s == 0).sum()))
    return proc.fixed(counts)


__all__ = ["Outcome", "Population", "population", "run_benchmark"]
