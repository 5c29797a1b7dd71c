"""A finished run's cost per decision, from its cost table's run row and its verdicts (pure: the
callers read both). The terminal's end-of-run result (:mod:`.run_result`), the report's Cost
section (:mod:`.decisions`) and the viewer's run page all print :attr:`PerDecision.line` of
:func:`run_per_decision`, so the three say one sentence (:mod:`ray_knowsim.stats.per_decision`
words it)."""

from __future__ import annotations

import math
from typing import Any, Mapping

from ray_knowsim.report.verdicts import RunVerdicts
from ray_knowsim.stats.per_decision import PerDecision, Spent, cost_per_decision

#: the label every surface puts before the sentence
LABEL = "cost per decision"


def spent_of(cost_row: Mapping[str, Any]) -> Spent:
    """The run's spend from its cost table's (all, all) row (:func:`ray_knowsim.tables.cost.cost_table`:
    ``cost_usd`` NaN when some session used a model without a price)."""
    usd = cost_row.get("cost_usd")
    usd = None if usd is None or (isinstance(usd, float) and math.isnan(usd)) else float(usd)
    return Spent(usd, float(cost_row.get("prompt_tokens") or 0) + float(cost_row.get("completion_tokens") or 0))


def run_per_decision(verdicts: RunVerdicts | None, cost_row: Mapping[str, Any] | None) -> PerDecision | None:
    """The run's cost per decision it reached (significant or equivalent pairs of its verdicts);
    None where it has no verdicts to count (one condition, no ok session, a run compare cannot
    read) or no cost row."""
    if verdicts is None or cost_row is None:
        return None
    return cost_per_decision(spent_of(cost_row), len(verdicts.decided()), detectable=verdicts.detectable())


__all__ = ["LABEL", "run_per_decision", "spent_of"]
