"""Family-wise error control over a family of comparisons (any dependence between them).

* :func:`bonferroni` -- ``min(1, m p)``.
* :func:`holm_adjusted` -- Holm's step-down adjusted p-values (the smallest family alpha at which
  the closure below rejects a hypothesis whose test is a p-value, monotone in the level): what
  ``compare`` prints as ``p_adj``; its verdicts come from :func:`holm_closure` itself.
* :func:`holm_closure` -- Holm's procedure as what it is, the closed test of Bonferroni
  intersection tests, over tests given as functions of their level. This is how a family of
  **group-sequential** tests is controlled (Maurer & Bretz 2013, the graphical approach with
  equal weights): a hypothesis whose own sequential test crosses frees its share of alpha, and the
  others are tested again -- at every look taken so far, with the boundaries of their larger level.
  The closure is computed exactly (an intersection of ``s`` hypotheses is rejected when one of
  them crosses at ``alpha / s``), so it needs no monotonicity of the tests in their level: the
  exact discrete group-sequential boundaries are not monotone in alpha at every look, which
  makes Holm's step-down shortcut inexact for them. The family (its ``m``) is fixed before the
  first look; with tests that only ever add crossings, a rejection is never taken back.
* :func:`family_verdicts` -- THE family rule of every design (``compare``'s rows, an adaptive run's
  looks, a replay's fixed design): Holm's closure over direction tests, Bonferroni's alpha / m for
  every claim once equivalence claims are in the family (why: its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Iterable, Sequence, TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)


def bonferroni(p_values: Sequence[float], m: int | None = None) -> np.ndarray:
    """``min(1, m * p)``; ``m`` defaults to the number of non-NaN p-values; NaN stays NaN."""
    p = np.asarray(p_values, dtype=float)
    size = int((~np.isnan(p)).sum()) if m is None else int(m)
    return np.minimum(1.0, p * max(size, 1))


def holm_adjusted(p_values: Sequence[float]) -> np.ndarray:
    """Holm's adjusted p-values: sorted ascending, ``max over i <= j of min(1, (m - i + 1) p_(i))``
    (NaN stays NaN and is not counted in ``m``)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    if m:
        out[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    return out


@dataclass(frozen=True)
class ClosedResult:
    rejected: bool
    level: float  # rejected: the smallest family level alpha / s its own test crossed at; else a level it did not


def holm_closure(keys: Iterable[K], rejects: Callable[[K, float], bool], alpha: float) -> dict[K, ClosedResult]:
    """The closed test over ``keys`` (equal weights): ``rejects(key, level)`` is the key's own
    test at a level. H_i is rejected when every intersection containing it is: for every size
    s = 1..m, its own test crosses at alpha / s, or fewer than s - 1 of the others do not."""
    keys = list(keys)
    m = len(keys)
    if not m:
        return {}
    crossed = np.array([[rejects(k, alpha / s) for s in range(1, m + 1)] for k in keys], dtype=bool)  # [key, s-1]
    not_crossed = (~crossed).sum(axis=0)
    out: dict[K, ClosedResult] = {}
    for i, k in enumerate(keys):
        others_open = not_crossed - (~crossed[i]).astype(int)
        sizes = np.arange(1, m + 1)
        ok = crossed[i] | (others_open < sizes - 1)
        if ok.all():
            s = int(np.nonzero(crossed[i])[0].max()) + 1
            out[k] = ClosedResult(True, alpha / s)
        else:
            s = int(np.nonzero(~ok)[0].max()) + 1
            out[k] = ClosedResult(False, alpha / s)
    return out


def family_verdicts(keys: Iterable[K], own: Callable[[K, float], tuple[int, bool]], alpha: float, *,
                    equivalence: bool, bonferroni: bool = False) -> dict[K, ClosedResult]:
    """The family's verdicts, shared so that ``compare`` and an adaptive run's (or a replay's fixed
    design's) verdicts agree on the same counts. ``own(key, level)`` is the pair's own (direction,
    shown within the effect) at ``level``.

    Without equivalence claims: Holm's closure over the direction tests. With them
    (``equivalence``; or ``bonferroni`` asked for): every claim at alpha / m. A pair's share alpha / m
    covers whichever of its nulls ("no difference", "at least the effect") is true -- at most one
    is -- but the closure may pass the share on only when no null of the pair can still be true. An
    equivalence claim leaves "no difference" possibly true (under A/A it is: counting it as a
    rejection raised the error of the other pairs' direction tests to 0.064 (0.008) at alpha 0.05,
    issue 49), and a direction claim leaves "at least the effect" possibly true (passing on through
    direction rejections only bounds the direction claims, not the equivalence claims with them).
    Only a pair shown both different and within the effect frees its share: with 6 pairs at alpha
    0.05 and effect 0.2, 100 decisive items need a win rate >= 0.64 for the one and <= 0.52 for the
    other, and the two first meet at 250 items -- beyond a benchmark's pool, so alpha / m it is."""
    keys = list(keys)
    if equivalence or bonferroni:
        level = alpha / max(1, len(keys))
        return {k: ClosedResult(any(own(k, level)), level) for k in keys}
    return holm_closure(keys, lambda k, lv: own(k, lv)[0] != 0, alpha)


def correction_short(equivalence: bool) -> str:
    """The correction's name alone, for a line with no room for the reason (compare's terminal line
    and --help)."""
    return "Bonferroni" if equivalence else "Holm's procedure"


def correction_name(equivalence: bool) -> str:
    """The multiplicity correction in words, for every surface that states it (compare's notes and
    --help, the report, the viewer, an adaptive record): the one rule :func:`family_verdicts` applies."""
    why = ("alpha / m: an equivalence claim passes no alpha on" if equivalence
           else "its closure: a rejection passes its alpha on")
    return f"{correction_short(equivalence)} ({why})"


__all__ = ["ClosedResult", "bonferroni", "correction_name", "correction_short", "family_verdicts", "holm_adjusted", "holm_closure"]
