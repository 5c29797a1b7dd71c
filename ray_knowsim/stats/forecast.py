"""What an adaptive design is expected to decide, and with what share of the fixed design's
sessions, before any session runs (pure: no Ray, no I/O; issue 49).

Why: the adaptive procedure stops where it decides, so its cost depends on the effects it meets;
a user sizing a benchmark needs a number before the run, with its noise. This simulates the
design on planted benchmarks: in every decision one condition wins ``win_rate`` of the items
against each other condition (the rest are exchangeable), item means drawn as a shared item
effect plus independent N(0, 1) noise per condition, the first condition shifted by
``sqrt(2) Phi^-1(win_rate)`` (so P(it beats another on an item) = ``win_rate``, no ties). Each
benchmark runs the product's own :class:`ray_knowsim.stats.adaptive.Procedure` round by round
(``per_round`` new items per task for the conditions still in play at each level, sessions
counted per (task, level), once for all its metrics) and the fixed design of the same pool
(:meth:`Procedure.fixed`). The figures are shares of decisions decided and of sessions, with
their standard errors over the benchmarks; a real benchmark's effects, ties and their spread
across decisions differ, so this is a planning figure, not a promise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
from scipy import stats as _st

from ray_knowsim.stats.adaptive import Procedure
from ray_knowsim.stats.winrate import win_counts

#: benchmarks simulated at most: standard errors of about 0.03 on a share
BENCHMARKS = 200
#: fewest benchmarks worth a figure (a share's standard error up to about 0.11)
MIN_BENCHMARKS = 20
#: a look costs about (family size)^2 of the pair's own tests (Holm's closure asks each pair at
#: every step), measured 7-30 us per unit on 2 cores: this many units of looks take ~3-4 s
WORK_BUDGET = 500_000


def benchmarks_for(proc: Procedure, rounds: int) -> int:
    """How many benchmarks a forecast of ``proc``'s design simulates within :data:`WORK_BUDGET`
    (at most :data:`BENCHMARKS`; 0 when fewer than :data:`MIN_BENCHMARKS` fit: the design is too
    large to forecast in a dry run's time). A look costs the sum over families of their size squared."""
    pairs = [len(d.pairs) for d in proc.decisions]
    units = sum(pairs) ** 2 if proc.family == "run" else sum(m * m for m in pairs)
    n = min(BENCHMARKS, WORK_BUDGET // max(1, units * rounds))
    return n if n >= MIN_BENCHMARKS else 0


@dataclass(frozen=True)
class Share:
    mean: float
    se: float

    def text(self) -> str:
        return f"{self.mean:.2f} ± {self.se:.2f}"


@dataclass(frozen=True)
class Forecast:
    win_rate: float
    benchmarks: int
    decided: Share  # the adaptive design: share of its decisions decided
    fixed_decided: Share  # the fixed design of the same pool
    sessions: Share  # the adaptive design's sessions over the fixed design's

    def line(self) -> str:
        return (f"adaptive, simulated over {self.benchmarks} benchmarks in which one condition wins {self.win_rate:.2f} of the "
                f"items against each other and the rest are alike: decides {self.decided.text()} of its decisions (the fixed "
                f"design {self.fixed_decided.text()}) with {self.sessions.text()} of the fixed design's sessions")


def _share(values: list[float]) -> Share:
    x = np.asarray(values, dtype=float)
    return Share(float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan"))


def _planted(proc: Procedure, pools: Mapping[str, int], shift: float, rng: np.random.Generator) -> list[np.ndarray]:
    """Per decision, item means (pool x conditions): its first condition better on ``shift``."""
    out = []
    for d in proc.decisions:
        n, k = pools[d.task], len(d.conditions)
        x = rng.normal(size=(n, 1)) + rng.normal(size=(n, k))
        x[:, 0] += shift if d.higher_is_better else -shift
        out.append(x)
    return out


def _counts(proc: Procedure, data: list[np.ndarray], seen: Mapping[tuple[str, str], Mapping[str, int]]) -> dict:
    counts = {}
    for i, d in enumerate(proc.decisions):
        col = {c: j for j, c in enumerate(d.conditions)}
        for a, b in d.pairs:
            n = min(seen[(d.task, d.level)][a], seen[(d.task, d.level)][b])
            if n:
                counts[(i, (a, b))] = win_counts(data[i][:n, col[a]], data[i][:n, col[b]], d.higher_is_better)
    return counts


def _one(build: Callable[[], Procedure], pools: Mapping[str, int], per_round: int, shift: float,
         rng: np.random.Generator) -> tuple[float, float, float]:
    """(adaptive share decided, fixed share decided, session share) of one planted benchmark."""
    proc = build()
    data = _planted(proc, pools, shift, rng)
    cells = {(d.task, d.level): list(d.conditions) for d in proc.decisions}
    seen = {cell: {c: 0 for c in conds} for cell, conds in cells.items()}
    sessions = 0
    for r in range(1, max(-(-n // per_round) for n in pools.values()) + 1):
        play = proc.in_play()
        new = 0
        for (task, level), conds in play.items():
            hi = min(pools[task], r * per_round)
            added = max(0, hi - (r - 1) * per_round)
            new += added * len(conds)
            for c in conds:
                seen[(task, level)][c] = hi
        if not new:
            break
        sessions += new
        proc.look(_counts(proc, data, seen), {t: min(1.0, r * per_round / n) for t, n in pools.items()}, r)
        if proc.done:
            break
    full = {cell: {c: pools[cell[0]] for c in conds} for cell, conds in cells.items()}
    fixed = proc.fixed(_counts(proc, data, full))
    fixed_sessions = sum(pools[task] * len(conds) for (task, _), conds in cells.items())
    m = len(proc.decisions)
    return (sum(d.decided for d in proc.decisions) / m, sum(d.decided for d in fixed.decisions) / m,
            sessions / fixed_sessions)


def forecast(build: Callable[[], Procedure], pools: Mapping[str, int], per_round: int, win_rate: float, *,
             benchmarks: int = BENCHMARKS, seed: int = 0) -> Forecast:
    """The adaptive design ``build()`` makes (a fresh :class:`Procedure` each call), over tasks
    of ``pools`` items each, ``per_round`` new items a round, on planted benchmarks with
    ``win_rate`` (module docstring). Deterministic for a ``seed``."""
    if not 0.5 < win_rate < 1.0:
        raise ValueError(f"win_rate must be in (0.5, 1) (got {win_rate})")
    if not pools or min(pools.values()) < 1 or per_round < 1 or benchmarks < 2:
        raise ValueError("forecast: every task needs items, and per_round >= 1, benchmarks >= 2")
    shift = math.sqrt(2.0) * float(_st.norm.ppf(win_rate))
    rng = np.random.default_rng(seed)
    runs = [_one(build, pools, per_round, shift, rng) for _ in range(benchmarks)]
    return Forecast(win_rate, benchmarks, _share([r[0] for r in runs]), _share([r[1] for r in runs]),
                    _share([r[2] for r in runs]))


__all__ = ["BENCHMARKS", "MIN_BENCHMARKS", "WORK_BUDGET", "Forecast", "Share", "benchmarks_for", "forecast"]
