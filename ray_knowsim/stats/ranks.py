"""Ranks, the mean rank and "best": one definition for the terminal, tables, report and leaderboard.

* Ranks are competition ranks ("min" ties: ties share the best rank), higher is better except the
  overload measures (``LOWER_IS_BETTER``) and cost; values equal to ``TIE_DECIMALS`` decimals tie
  (level-marginal means are sums in different orders).
* **The mean rank** averages the ranks of the paper's four headline metrics, one per construct
  (spec §9, paper Table 4): knowledge gain, delivery calibration, cognitive overload, interaction
  quality -- ``MEAN_RANK_METRICS`` (``MEAN_RANK_METRICS_ES`` at the virtual early stop). Not
  every metric the tables carry: NKG, IC and PO re-measure KG, DC and CO, and counting them
  would weigh those constructs twice. Missing ranks are skipped; ``ranks_used`` says how many
  entered.
* "Best" is rank 1 (per metric) and the smallest mean rank (per table).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from ray_knowsim.schema.results import LOWER_IS_BETTER

TIE_DECIMALS = 12
MEAN_RANK_METRICS: tuple[str, ...] = ("kg", "dc", "co", "iq")
MEAN_RANK_METRICS_ES: tuple[str, ...] = ("kg_es", "dc_es", "co_es", "iq")
#: beyond the rules' LOWER_IS_BETTER: money is also better spent less
EXTRA_LOWER_IS_BETTER = frozenset({"cost_usd"})


def higher_is_better(metric: str) -> bool:
    base = metric.split("@", 1)[0]  # a judge column of another score set: iq@other
    return base not in LOWER_IS_BETTER and base not in EXTRA_LOWER_IS_BETTER


def mean_rank_metrics(variant: str = "final", gain: str = "kg") -> tuple[str, ...]:
    """The mean rank's metrics for a report variant (final / es) and gain (kg / nkg)."""
    base = MEAN_RANK_METRICS_ES if variant == "es" else MEAN_RANK_METRICS
    return tuple(m.replace("kg", gain, 1) if m.startswith("kg") else m for m in base)


def _present(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def rank_min(values: Mapping[str, float | None], lower_is_better: bool) -> dict[str, int | None]:
    """Competition ranks ("min" ties): 1 + how many others are strictly better; None stays None."""
    present = {k: round(float(v), TIE_DECIMALS) for k, v in values.items() if _present(v)}
    out: dict[str, int | None] = {}
    for k in values:
        if k not in present:
            out[k] = None
            continue
        v = present[k]
        out[k] = 1 + sum(1 for o in present.values() if (o < v if lower_is_better else o > v))
    return out


def mean_rank(ranks: Sequence[float | None]) -> float | None:
    got = [float(r) for r in ranks if _present(r)]
    return sum(got) / len(got) if got else None


def best_of(mean_ranks: Mapping[str, float | None]) -> set[str]:
    """The conditions with the smallest mean rank (ties share it)."""
    got = {k: round(v, TIE_DECIMALS) for k, v in mean_ranks.items() if _present(v)}
    if not got:
        return set()
    top = min(got.values())
    return {k for k, v in got.items() if v == top}


__all__ = ["EXTRA_LOWER_IS_BETTER", "MEAN_RANK_METRICS", "MEAN_RANK_METRICS_ES", "TIE_DECIMALS", "best_of",
           "higher_is_better", "mean_rank", "mean_rank_metrics", "rank_min"]
