"""Which session columns the report's tables show: the metric choice made explicit.

The paper's tables read KG, DC, CO and IQ -- the mean rank's metrics, in its order
(:data:`ray_knowsim.stats.ranks.MEAN_RANK_METRICS`), the ONE column order of the report, the
viewer and the terminal; the session table carries each state metric twice,
final (turn T) and at the virtual early stop (``*_es``), and KG also normalised (NKG). The report
never guesses: the choice is an option, printed on the page and in the Markdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ray_knowsim.schema.results import LOWER_IS_BETTER
from ray_knowsim.stats.ranks import MEAN_RANK_METRICS

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

    @property
    def arrow(self) -> str:
        return "↓" if self.lower_is_better else "↑"


def metric_specs(variant: Variant = "final", gain: Gain = "kg") -> tuple[MetricSpec, ...]:
    """KG (or NKG), DC, CO, IQ for the chosen variant (the mean rank's order, asserted below). IQ is a judge score of the whole
    conversation and has no early-stop variant, so it reads ``iq`` either way."""
    if variant not in ("final", "es"):
        raise ValueError(f"metric variant must be 'final' or 'es', got {variant!r}")
    if gain not in ("kg", "nkg"):
        raise ValueError(f"gain must be 'kg' or 'nkg', got {gain!r}")
    sfx = "_es" if variant == "es" else ""
    at = "at the virtual early stop" if variant == "es" else "at the end of the conversation"
    gain_label, gain_desc = ("KG", "knowledge gain: sum of upward ordinal steps") if gain == "kg" else (
        "NKG",
        "normalised knowledge gain: KG / initial headroom",
    )
    specs = (
        MetricSpec("kg", gain_label, f"{gain}{sfx}", False, 3, f"{gain_desc}, {at}"),
        MetricSpec("dc", "DC", f"dc{sfx}", False, 3, f"delivery calibration: F1 of absorbed explained IUs vs the ZPD, {at}"),
        MetricSpec("co", "CO", f"co{sfx}", True, 3, f"cognitive overload: mean min(1, load/τ) over turns, {at}; lower is better"),
        MetricSpec("iq", "IQ", "iq", False, 2, "interaction quality: LLM judge score 1-10 of the whole conversation"),
    )
    if tuple(s.key for s in specs) != tuple(m.split("_")[0] for m in MEAN_RANK_METRICS):
        raise RuntimeError("the report's metric order must be the mean rank's (stats.ranks.MEAN_RANK_METRICS)")
    for s in specs:
        if s.lower_is_better != (s.column in LOWER_IS_BETTER):  # keep the contract's direction
            raise RuntimeError(f"metric {s.column}: direction disagrees with model.results.LOWER_IS_BETTER")
    return specs


def fmt(value: float | None, decimals: int) -> str:
    """The page's number format ("–" for missing); tests compare cell text with it."""
    if value is None or value != value:
        return "–"
    return f"{value:.{decimals}f}"
