"""Cost per decision (pure: no Ray, no I/O): what a run paid for each verdict it reached.

Why: a run's bill alone does not say whether it was worth it; a $40 run that reached 12 verdicts
and a $4 run that reached none differ in what a dollar bought. Every surface that shows a run's
cost beside its verdicts -- the terminal's end-of-run result, the report, the viewer's run page --
and the dry run (before a run: its estimate over the most decisions the design can reach) says it
in the words of :func:`cost_per_decision`, so one run never reads two ways.

The unit is the cost table's and the re-estimate's (:mod:`ray_knowsim.preflight.projection`):
dollars when the run is priced above $0, else tokens with why (a model without a price, or models
priced at $0, the offline model's). A decision is a pair the run's family decided: significant
(one condition better) or shown equivalent. With no decision the sentence says what was spent and
the smallest effect the run could have detected (:class:`ray_knowsim.stats.leaderboard.Detectable`)
instead of dividing by zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ray_knowsim.schema.price import NO_PRICE, PRICED_AT_ZERO, usd_text
from ray_knowsim.stats.leaderboard import Detectable

#: why a run's cost is in tokens when every model is priced, each at $0 (the offline model is free)


@dataclass(frozen=True)
class Spent:
    """What a run spent (or a dry run estimates): ``usd`` None or NaN when some model has no
    price; ``tokens`` its prompt + completion tokens, the unit when dollars say nothing."""

    usd: float | None
    tokens: float

    @property
    def priced(self) -> bool:
        return self.usd is not None and not math.isnan(self.usd)

    @property
    def unit(self) -> Literal["usd", "tokens"]:
        return "usd" if self.priced and self.usd > 0 else "tokens"

    def amount(self, x: float) -> str:
        """``x`` in this spend's unit: ``$1.27`` (``$0.0042`` below a dime, so a cheap decision
        never reads as $0.00) or ``12,345 tokens``."""
        return usd_text(x, digits=2 if x >= 0.1 else 4) if self.unit == "usd" else f"{x:,.0f} tokens"

    @property
    def total(self) -> float:
        return float(self.usd) if self.unit == "usd" else float(self.tokens)

    def why_tokens(self) -> str:
        """The clause a count in tokens carries: why it is not in dollars ("" when it is)."""
        if self.unit == "usd":
            return ""
        return f"; cost: {NO_PRICE if not self.priced else PRICED_AT_ZERO}"


@dataclass(frozen=True)
class PerDecision:
    decisions: int  # reached (a finished run) or reachable at most (a dry run)
    per_decision: float | None  # in ``unit``; None: no decision to divide by
    unit: Literal["usd", "tokens"]
    line: str  # THE sentence every surface prints


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def detectable_phrase(d: Detectable) -> str:
    """The smallest effect a run could detect, short enough for one line."""
    where = f"{d.n_items:,} items, alpha {d.alpha:g} over a family of {d.family_size:,}"
    q = d.win_rate
    if math.isnan(q):
        return f"no effect was detectable: no outcome of {where} can be significant"
    return f"the smallest detectable effect was a win rate of {q:.3f} ({where}, power {d.power:g})"


def cost_per_decision(spent: Spent, decisions: int, *, at_best: bool = False,
                      detectable: Detectable | None = None) -> PerDecision:
    """The cost of one decision and its sentence. ``decisions``: the pairs the run decided
    (significant or equivalent), or with ``at_best`` (the dry run) the most its design can decide,
    so the figure is a floor: a run that decides fewer pays more per decision. ``detectable``: said
    when there is no decision (the run's smallest detectable effect), never a division by zero."""
    total, why = spent.total, spent.why_tokens()
    if decisions <= 0:
        if at_best:
            line = (f"no decision reachable: {spent.amount(total)} estimated, and no task of the design has the "
                    f"items a verdict needs{why}")
        else:
            line = f"no decision reached: {spent.amount(total)} spent" + (f"; {detectable_phrase(detectable)}" if detectable else "") + why
        return PerDecision(0, None, spent.unit, line)
    per = total / decisions
    if at_best:
        line = (f"at best {spent.amount(per)} per decision ({spent.amount(total)} estimated over the at most "
                f"{_plural(decisions, 'decision')} the design can reach{why})")
    else:
        line = f"{spent.amount(per)} per decision ({_plural(decisions, 'decision')} reached, {spent.amount(total)} in all{why})"
    return PerDecision(int(decisions), per, spent.unit, line)


__all__ = ["PerDecision", "Spent", "cost_per_decision", "detectable_phrase"]
