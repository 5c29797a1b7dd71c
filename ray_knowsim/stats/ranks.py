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
* **The paper's mean rank** (:func:`paper_mean_ranks`) is the one function that turns a table of
  means into per-metric ranks and their mean: ``tables/ranks``, the terminal, the report and
  ``compare``'s leaderboard all call it, so the same set of conditions gets the same number
  everywhere. It ranks *means* and carries no uncertainty: it is the paper's descriptive figure,
  never a verdict (a leaderboard that ranks another set of conditions, e.g. several runs together,
  says so).
* **The mean item rank** (:func:`mean_item_ranks`) is the per-metric rank on the quantity verdicts
  are about, the item win rate: ``1 + sum_j (1 - theta_ij)`` with ``theta_ij`` the share of matched
  items i wins over j (ties half) -- the Borda count of the pairwise win rates, i.e. the expected
  rank of i on a randomly drawn item. :mod:`.leaderboard` orders conditions by it, verdicts first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from ray_knowsim.schema.metrics import find_metric, names
from ray_knowsim.schema.results import LOWER_IS_BETTER

TIE_DECIMALS = 12
#: the catalogue's mean-rank metrics (ray_knowsim.schema.metrics), in its order; at the early stop
#: each one's ``_es`` column, or the metric itself where it has none (IQ rates the whole conversation)
MEAN_RANK_METRICS: tuple[str, ...] = names(mean_rank=True)
MEAN_RANK_METRICS_ES: tuple[str, ...] = tuple(find_metric(m).es_name or m for m in MEAN_RANK_METRICS)  # type: ignore[union-attr]
#: beyond the rules' LOWER_IS_BETTER: money is also better spent less
EXTRA_LOWER_IS_BETTER = frozenset({"cost_usd"})
#: what every surface calls the figure of :func:`paper_mean_ranks` (never just "rank" or "best")
PAPER_MEAN_RANK_LABEL = "the paper's mean rank (ranks of means, descriptive)"
#: said wherever it is shown: what it is and why it is not the verdict
PAPER_MEAN_RANK_NOTE = ("The paper's mean rank (its Table 4 figure): per metric the rank of the condition's MEAN (1 = best, "
                        "ties share the best rank), averaged over the metrics. Descriptive: it carries no uncertainty, "
                        "no test and no verdict, and it is not the leaderboard's order. Verdicts, positions and the ★ are on "
                        "the item win rate; where the two disagree (a condition that wins most items while losing on the mean), "
                        "the verdicts decide.")


def higher_is_better(metric: str) -> bool:
    """The catalogue's direction (outside metrics included); cost is better lower; any other column higher."""
    base = metric.split("@", 1)[0]  # a judge column of another score set: iq@other
    if base in LOWER_IS_BETTER or base in EXTRA_LOWER_IS_BETTER:
        return False
    found = find_metric(base)
    return found.higher_is_better if found is not None else True


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


@dataclass(frozen=True)
class MeanRank:
    value: float | None  # None: no metric ranked this condition
    used: int  # how many metrics' ranks entered


def paper_mean_ranks(means: Mapping[str, Mapping[str, float | None]],
                     metrics: Sequence[str] | None = None) -> tuple[dict[str, dict[str, int | None]], dict[str, MeanRank]]:
    """THE mean rank: ``means`` is metric -> condition -> mean; per metric in ``metrics`` (default:
    all of ``means``) the competition ranks of :func:`rank_min` (orientation from
    :func:`higher_is_better`), then per condition the mean of its ranks. Returns (metric ->
    condition -> rank, condition -> :class:`MeanRank`)."""
    use = [m for m in (metrics if metrics is not None else list(means)) if m in means]
    conds = list(dict.fromkeys(c for m in use for c in means[m]))
    ranks = {m: rank_min({c: means[m].get(c) for c in conds}, not higher_is_better(m)) for m in use}
    out = {}
    for c in conds:
        got = [ranks[m][c] for m in use if ranks[m][c] is not None]
        out[c] = MeanRank(mean_rank(got), len(got))
    return ranks, out


def mean_item_ranks(conditions: Sequence[str], win_rate: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """Per condition ``1 + sum_j (1 - theta_ij)``; ``win_rate[(i, j)]`` = theta_ij, the share of
    matched items on which i is better than j (ties count half), given for either order of a pair
    (theta_ji = 1 - theta_ij); a pair without matched items (NaN or absent) counts 1/2."""
    def theta(i: str, j: str) -> float:
        if (i, j) in win_rate and _present(win_rate[(i, j)]):
            return float(win_rate[(i, j)])
        if (j, i) in win_rate and _present(win_rate[(j, i)]):
            return 1.0 - float(win_rate[(j, i)])
        return 0.5
    return {i: 1.0 + sum(1.0 - theta(i, j) for j in conditions if j != i) for i in conditions}



__all__ = ["EXTRA_LOWER_IS_BETTER", "MEAN_RANK_METRICS", "MEAN_RANK_METRICS_ES", "MeanRank", "PAPER_MEAN_RANK_LABEL", "PAPER_MEAN_RANK_NOTE", "TIE_DECIMALS",
           "higher_is_better", "mean_item_ranks", "mean_rank", "mean_rank_metrics", "paper_mean_ranks", "rank_min"]
