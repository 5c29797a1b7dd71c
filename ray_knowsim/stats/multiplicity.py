"""Family-wise error control over a family of comparisons (any dependence between them).

Verdicts use **Bonferroni**: each comparison of a family of ``m`` is tested, and its interval
computed, at level ``alpha / m``. That keeps the test and the interval one verdict (a comparison
is significant exactly when its adjusted interval excludes "no difference"), which Holm's
step-down cannot give (Holm rejects at levels no simultaneous interval matches).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def bonferroni(p_values: Sequence[float], m: int | None = None) -> np.ndarray:
    """``min(1, m * p)``; ``m`` defaults to the number of non-NaN p-values; NaN stays NaN."""
    p = np.asarray(p_values, dtype=float)
    size = int((~np.isnan(p)).sum()) if m is None else int(m)
    return np.minimum(1.0, p * max(size, 1))


__all__ = ["bonferroni"]
