"""The defaults every decision shares, written once: the family-wise error rate, the power a design
is priced at, and the effect the dry run and compare's feasibility assume.

``compare``'s options, its CLI flags, the report's decisions, adaptive runs, the failure-rate check
and the dry run's "can this design decide" all read these, so a verdict in the report and one from
``ray-knowsim compare`` on the same run are made at the same level unless a user asks otherwise."""

from __future__ import annotations

#: family-wise error rate of a family of verdicts (compare, the report's decisions, adaptive runs)
ALPHA = 0.05
#: the power at which minimum detectable effects and items needed are reported
POWER = 0.8
#: the effect a design is priced at: a condition better on 65 % of the items (ties counted half)
WIN_RATE = 0.65

__all__ = ["ALPHA", "POWER", "WIN_RATE"]
