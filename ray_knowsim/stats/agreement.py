"""Agreement statistics between raters (here: simulators, or an extractor and human labels).

* :func:`kendall_tau` — rank agreement of two orderings (tau-b, which corrects for ties; scipy).
* :func:`krippendorff_alpha` — agreement of several raters over units, missing values allowed,
  ``interval`` or ``nominal`` distance. Our own implementation of the published definition
  (alpha = 1 - D_o / D_e over the coincidences of pairable values), not the ``krippendorff``
  package: it is twenty lines, needs no new dependency, and ``tests/stats/test_agreement.py``
  checks it against hand-computed cases and against the closed forms it must reduce to.
* :func:`cohen_kappa` and :func:`rates` — agreement of two labelings beyond chance, and the
  true-positive / true-negative rates of one against a reference for a chosen positive label.

Pure functions; NaN where a statistic is undefined (no spread, fewer than two pairable values).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Hashable, Literal, Sequence

import numpy as np
from scipy import stats

Distance = Literal["interval", "nominal"]


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two equally long sequences (pairs with a NaN dropped); NaN when fewer
    than 2 pairs remain or one side is constant."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.kendalltau(a, b).statistic)


def krippendorff_alpha(data: Sequence[Sequence[float | Hashable | None]], distance: Distance = "interval") -> float:
    """Krippendorff's alpha of ``data[rater][unit]`` (None or NaN: missing).

    Units with fewer than two values are not pairable and drop out. D_o is the mean distance of
    the pairs of values within a unit (each unit weighted by 1 / (m_u - 1)); D_e the mean
    distance of all pairs of pairable values regardless of unit. Distances: interval (a - b)^2,
    nominal [a != b]. NaN when fewer than two pairable values exist or D_e is 0 (no variation).
    """
    units = list(zip(*data)) if data else []
    values: list[list] = []
    for unit in units:
        present = [v for v in unit if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if len(present) >= 2:
            values.append(present)
    n = sum(len(u) for u in values)
    if n < 2:
        return math.nan

    def delta(a, b) -> float:  # noqa: ANN001
        return float(a - b) ** 2 if distance == "interval" else float(a != b)

    observed = sum(sum(delta(a, b) for i, a in enumerate(u) for j, b in enumerate(u) if i != j) / (len(u) - 1) for u in values) / n
    pooled = [v for u in values for v in u]
    if distance == "interval":
        arr = np.asarray(pooled, dtype=float)
        # sum over ordered pairs i != j of (a_i - a_j)^2 = 2 n sum (a - mean)^2
        expected = 2 * n * float(((arr - arr.mean()) ** 2).sum()) / (n * (n - 1))
    else:
        counts = Counter(pooled)
        expected = (n * n - sum(c * c for c in counts.values())) / (n * (n - 1))
    return 1.0 - observed / expected if expected > 0 else math.nan


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two labelings of the same items: (p_o - p_e) / (1 - p_e); NaN when empty or
    when chance agreement is already 1 (both give one and the same label to everything)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} and {len(b)} labels")
    n = len(a)
    if n == 0:
        return math.nan
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb.get(k, 0) for k in ca) / (n * n)
    return (po - pe) / (1 - pe) if pe < 1 else math.nan


@dataclass(frozen=True)
class Rates:
    """One labeling against a reference, for one positive label."""

    n: int
    positives: int  # in the reference
    negatives: int
    tpr: float  # share of the reference's positives the labeling also calls positive (NaN: none)
    tnr: float  # share of the reference's negatives it also calls negative (NaN: none)


def rates(labels: Sequence[Hashable], reference: Sequence[Hashable], positive: Hashable) -> Rates:
    if len(labels) != len(reference):
        raise ValueError(f"rates: {len(labels)} labels and {len(reference)} reference labels")
    pos = [x == positive for x in labels]
    ref = [x == positive for x in reference]
    p, q = sum(ref), len(ref) - sum(ref)
    tp = sum(a and r for a, r in zip(pos, ref))
    tn = sum((not a) and (not r) for a, r in zip(pos, ref))
    return Rates(len(ref), p, q, tp / p if p else math.nan, tn / q if q else math.nan)


def label_agreement(labels: Sequence[Hashable], reference: Sequence[Hashable], categories: Sequence[Hashable]) -> dict[str, float | int]:
    """One labeling against a reference over a fixed set of ``categories``: ``n``, raw
    ``agreement``, Cohen's ``kappa`` over the categories, and per category (one against the rest)
    ``n_ref_<c>`` / ``n_<c>`` (how often the reference / the labeling uses it) and ``tpr_<c>`` /
    ``tnr_<c>`` (:func:`rates`). Exact match alone hides what kappa and the rates show: a labeler
    that calls everything ``not_mentioned`` matches often where most IUs go untouched."""
    if len(labels) != len(reference):
        raise ValueError(f"label_agreement: {len(labels)} labels and {len(reference)} reference labels")
    n = len(labels)
    out: dict[str, float | int] = {
        "n": n, "agreement": sum(a == b for a, b in zip(labels, reference)) / n if n else math.nan,
        "kappa": cohen_kappa(labels, reference),
    }
    for c in categories:
        r = rates(labels, reference, c)
        out |= {f"n_ref_{c}": r.positives, f"n_{c}": sum(x == c for x in labels), f"tpr_{c}": r.tpr, f"tnr_{c}": r.tnr}
    return out


__all__ = ["Distance", "Rates", "cohen_kappa", "kendall_tau", "krippendorff_alpha", "label_agreement", "rates"]
