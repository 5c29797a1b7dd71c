"""Which session columns the report's tables show: the metric choice made explicit.

The paper's tables read KG, DC, CO and IQ -- the mean rank's metrics, in its order
(:data:`ray_knowsim.stats.ranks.MEAN_RANK_METRICS`, from the metric catalogue), the ONE column
order of the report, the viewer and the terminal, followed by the outside metrics plugins register; the session table carries each state metric twice,
final (turn T) and at the virtual early stop (``*_es``), and KG also normalised (NKG). The report
never guesses: the choice is an option, printed on the page and in the Markdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Literal, Sequence

from ray_knowsim.schema.metrics import Metric, find_metric, outside_metrics
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS, higher_is_better

Variant = Literal["final", "es"]
Gain = Literal["kg", "nkg"]


@dataclass(frozen=True)
class MetricSpec:
    key: str  # short key used in the page's data attributes: kg, co, dc, iq
    label: str  # column header
    column: str  # session-table column read
    lower_is_better: bool
    decimals: int
    description: str
    mean_rank: bool = True  # one of the paper's mean-rank metrics (an outside metric is shown, not ranked)

    @property
    def arrow(self) -> str:
        return "↓" if self.lower_is_better else "↑"


def metric_specs(variant: Variant = "final", gain: Gain = "kg", present: Collection[str] = ()) -> tuple[MetricSpec, ...]:
    """The catalogue's mean-rank metrics (:mod:`ray_knowsim.schema.metrics`: KG or NKG, DC, CO, IQ)
    for the chosen variant, then each registered outside metric whose column is in ``present``
    (the run's session columns), shown but never ranked in the paper's mean rank. A metric without an early-stop column (IQ: a judge score of
    the whole conversation; outside metrics) reads its final column either way."""
    if variant not in ("final", "es"):
        raise ValueError(f"metric variant must be 'final' or 'es', got {variant!r}")
    if gain not in ("kg", "nkg"):
        raise ValueError(f"gain must be 'kg' or 'nkg', got {gain!r}")
    at = "at the virtual early stop" if variant == "es" else "at the end of the conversation"

    def spec(m: Metric, key: str, ranked: bool) -> MetricSpec:
        column = m.es_name if variant == "es" and m.es_name else m.name
        desc = f"{m.description}, {at}" if m.early_stop else m.description
        if not m.higher_is_better:
            desc += "; lower is better"
        return MetricSpec(key, m.label, column, not m.higher_is_better, m.decimals, desc, ranked)

    chosen = [find_metric(gain) if name == "kg" else find_metric(name) for name in MEAN_RANK_METRICS]
    specs = [spec(m, name, True) for name, m in zip(MEAN_RANK_METRICS, chosen) if m is not None]
    specs += [spec(m, m.name, False) for m in outside_metrics() if m.name in present]
    for s in specs:
        if s.lower_is_better != (not higher_is_better(s.column)):  # keep the contract's direction
            raise RuntimeError(f"metric {s.column}: direction disagrees with the metric catalogue")
    return tuple(specs)


def ranked_specs(specs: Sequence[MetricSpec]) -> tuple[MetricSpec, ...]:
    """The specs the paper's mean rank is over (an outside metric is shown, never ranked)."""
    return tuple(s for s in specs if s.mean_rank)


def fmt(value: float | None, decimals: int) -> str:
    """The page's number format ("–" for missing); tests compare cell text with it."""
    if value is None or value != value:
        return "–"
    return f"{value:.{decimals}f}"
