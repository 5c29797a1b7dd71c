"""Statistics-only simulations of the adaptive procedure (no model calls): planted populations of
per-item condition means, run round by round through :class:`ray_knowsim.stats.adaptive.Procedure`
(the object the adaptive runner and the planning replay use), beside the fixed design of the same
pool (:meth:`Procedure.fixed`).

A population draws, per item, one mean per condition (``draw(rng, n) -> (n, k)`` array); the
pair counts of a round are :func:`ray_knowsim.stats.winrate.win_counts` of the items both
conditions ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Callable, Sequence

import numpy as np
from scipy import stats as st

from ray_knowsim.stats.adaptive import Design, Procedure
from ray_knowsim.stats.winrate import win_counts

Draw = Callable[[np.random.Generator, int], np.ndarray]


def shifted_normals(win_rates_adjacent: Sequence[float]) -> tuple[Draw, list[float]]:
    """Conditions c0 < c1 < ... with independent N(mu_c, 1) item means, spaced so that adjacent
    conditions' item win rates are ``win_rates_adjacent``: P(c_{i+1} > c_i) = Phi(delta / sqrt 2)."""
    mu = np.concatenate([[0.0], np.cumsum([np.sqrt(2) * st.norm.ppf(q) for q in win_rates_adjacent])])
    return normals(mu), list(mu)


def cycle3(x: float = 0.4, y: float = 0.3, z: float = 0.3) -> Draw:
    """Three conditions whose item win rates are a cycle: per item one of the orders A>B>C (x),
    B>C>A (y), C>A>B (z): P(A>B) = x + z, P(B>C) = x + y, P(C>A) = y + z."""
    orders = np.array([[2, 1, 0], [0, 2, 1], [1, 0, 2]], dtype=float)  # scores of A, B, C

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return orders[rng.choice(3, size=n, p=[x, y, z])]

    return draw


def normals(mu: Sequence[float]) -> Draw:
    """Conditions with independent N(mu_c, 1) item means around a shared item effect (equal mu:
    an exact null pair)."""
    mu_ = np.asarray(mu, dtype=float)

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.normal(size=(n, 1)) + mu_[None, :] + rng.normal(size=(n, len(mu_)))

    return draw


def null_discrete(k: int, levels: int = 4) -> Draw:
    """k exchangeable conditions with skewed discrete item means (many ties): A/A/.../A."""

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        item = rng.poisson(1.0, size=(n, 1))
        return (item + np.minimum(rng.poisson(0.6, size=(n, k)), levels)).astype(float)

    return draw


@dataclass
class Outcome:
    decided: int
    winners: list[str | None]
    sessions: int
    sessions_fixed: int
    fixed_decided: int
    fixed_winners: list[str | None]
    claims: list[tuple[str, str]]  # (better, worse) claims of every pair verdict
    fixed_claims: list[tuple[str, str]]
    bonferroni_decided: int  # the fixed design with compare's Bonferroni adjustment


def run_once(draw: Draw, names: Sequence[str], rng: np.random.Generator, *, pool: int = 100, per_round: int = 5,
             alpha: float = 0.05, kind: str = "best", design: Design | None = None, levels: int = 1,
             higher_is_better: bool = True, procedure: type[Procedure] = Procedure,
             effect: float | None = None) -> Outcome:
    """One benchmark: ``levels`` independent decisions (one family), rounds of ``per_round`` items
    (``procedure``: the product's, or an experimental subclass; ``effect``: ``pairs``' margin)."""
    lv_names = [f"l{j}" for j in range(levels)]
    data = {lv: draw(rng, pool) for lv in lv_names}
    metric = "kg" if higher_is_better else "co"
    proc = procedure.build(["t"], lv_names, [metric], list(names), kind, alpha, effect, design=design)  # type: ignore[arg-type]
    col = {c: j for j, c in enumerate(names)}
    seen: dict[str, dict[str, int]] = {lv: {c: 0 for c in names} for lv in lv_names}  # items each condition ran
    sessions = 0
    rounds = -(-pool // per_round)
    for r in range(1, rounds + 1):
        if proc.done:
            break
        hi = min(pool, r * per_round)
        play = proc.in_play()
        counts = {}
        for i, d in enumerate(proc.decisions):
            here = play.get(("t", d.level), set())
            for c in here:
                sessions += hi - (r - 1) * per_round
                seen[d.level][c] = hi
            x = data[d.level]
            for a, b in d.pairs:
                n = min(seen[d.level][a], seen[d.level][b])
                if n:
                    counts[(i, (a, b))] = win_counts(x[:n, col[a]], x[:n, col[b]], d.higher_is_better)
        proc.look(counts, {"t": hi / pool}, r)
    whole = {(i, (a, b)): win_counts(data[d.level][:, col[a]], data[d.level][:, col[b]], d.higher_is_better)
             for i, d in enumerate(proc.decisions) for a, b in d.pairs}
    fixed = proc.fixed(whole)
    bonf = proc.fixed(whole, "bonferroni")

    def claims(p: Procedure) -> list[tuple[str, str]]:
        out = []
        for d in p.decisions:
            for pair in d.pairs:
                w = d.better(pair)
                if w is not None:
                    out.append((w, pair[1] if w == pair[0] else pair[0]))
        return out

    return Outcome(sum(d.decided for d in proc.decisions), [d.winner for d in proc.decisions], sessions,
                   pool * len(names) * levels, sum(d.decided for d in fixed.decisions), [d.winner for d in fixed.decisions],
                   claims(proc), claims(fixed), sum(d.decided for d in bonf.decisions))


def truly_better(names: Sequence[str], win_rate: Callable[[str, str], float]) -> set[tuple[str, str]]:
    """The (better, worse) pairs of the population (item win rate above 1/2)."""
    return {(a, b) for a, b in combinations(names, 2) if win_rate(a, b) > 0.5} | \
           {(b, a) for a, b in combinations(names, 2) if win_rate(a, b) < 0.5}


__all__ = ["Outcome", "cycle3", "normals", "null_discrete", "run_once", "shifted_normals", "truly_better"]
