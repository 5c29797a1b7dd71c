"""Association and effect sizes, pure (no I/O): Cliff's delta, the one-sided binomial test against
chance, Spearman rho, z-scores within a group, Jaccard. The human-study validation (validate/) reads
them, the report's judge agreement reads :func:`spearman`; they live with the other statistics so
that each exists once.

The binomial test and Spearman are scipy's (exact, well tested); Cliff's delta is a few lines of
counting, done by sorting so large cells stay O((n + m) log m).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import stats as _st


def cliffs_delta(x: Sequence[float], y: Sequence[float]) -> float:
    """P(X > Y) - P(X < Y) over all (x, y) pairs, in [-1, 1]; positive: x tends to be larger."""
    xs = np.asarray(x, dtype=float)
    ys = np.sort(np.asarray(y, dtype=float))
    if xs.size == 0 or ys.size == 0:
        raise ValueError("Cliff's delta needs at least one value on each side")
    below = np.searchsorted(ys, xs, side="left").sum()  # pairs with y < x
    above = (ys.size - np.searchsorted(ys, xs, side="right")).sum()  # pairs with y > x
    return float(below - above) / float(xs.size * ys.size)


def sign(value: float | None) -> int:
    """-1, 0 or +1; 0 for None/NaN (no direction)."""
    if value is None or value != value or value == 0:
        return 0
    return 1 if value > 0 else -1


def binomial_p_greater(k: int, n: int, p: float = 0.5) -> float:
    """One-sided exact binomial test P(K >= k | n, p): is the agreement rate above chance?"""
    if n <= 0:
        return math.nan
    if not 0 <= k <= n:
        raise ValueError(f"k must lie in 0..n, got k={k}, n={n}")
    return float(_st.binomtest(int(k), int(n), p, alternative="greater").pvalue)


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(rho, two-sided p); NaNs when there are fewer than 3 points or a side is constant."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.shape != ys.shape:
        raise ValueError(f"spearman: lengths differ ({xs.size} vs {ys.size})")
    if xs.size < 3 or np.all(xs == xs[0]) or np.all(ys == ys[0]):
        return math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = _st.spearmanr(xs, ys)
    return float(res.statistic), float(res.pvalue)


def zscores(values: Sequence[float]) -> list[float]:
    """(v - mean) / population sd; all zeros when the sd is 0 (nothing to rank within)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return []
    sd = arr.std()
    if sd == 0 or not np.isfinite(sd):
        return [0.0] * arr.size
    return ((arr - arr.mean()) / sd).tolist()


def jaccard(a: Iterable[str], b: Iterable[str]) -> float | None:
    """|A & B| / |A | B|; None when both are empty (coverage undefined, not perfect)."""
    sa, sb = set(a), set(b)
    union = sa | sb
    if not union:
        return None
    return len(sa & sb) / len(union)
