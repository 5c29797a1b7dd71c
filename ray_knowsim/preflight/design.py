"""Can a design ever decide? Per task, the decisions a config's run will make -- an adaptive
run's (its ``adaptive:`` section) or, for a fixed run, ``ray-knowsim compare``'s with its default
family -- against the items the task has: the fewest items any verdict needs at that family's
level, and the items needed to detect a given win rate (:func:`ray_knowsim.stats.feasibility.feasibility`,
the pure function; this module only says which family a config implies), and what the estimate
costs per decision the design can reach at best (:func:`per_decision_lines`). ``run --dry-run``
prints both before anything is spent.

Families (the Bonferroni-type level every verdict is tested at is alpha / family size):

* adaptive: one decision per (task, level, metric) of ``adaptive.metrics`` over its conditions
  (``adaptive.conditions``, default all); the family is every pair of every decision
  (``family: run``, ``k (k - 1) / 2`` pairs each for k conditions) or one decision's pairs
  (``family: decision``); the first Holm step is at alpha / family, so that is where the
  minimum number of items is set;
* fixed, compare's default (``--family run``): every paired row of the comparison: per task, each
  level and the level-marginal, each of compare's default metrics (KG, NKG, DC, IC, CO, PO,
  engagement, and IQ with a judge), each pair of conditions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from ray_knowsim.schema.results import COMPARE_METRICS as DEFAULT_METRICS
from ray_knowsim.stats.defaults import ALPHA, POWER, WIN_RATE
from ray_knowsim.stats.feasibility import feasibility
from ray_knowsim.stats.forecast import benchmarks_for, forecast
from ray_knowsim.stats.per_decision import Spent, cost_per_decision

#: what the dry run says of an adaptive design too large to forecast in its time (stats.forecast)
ADAPTIVE_LIMIT = ("adaptive: the run stops where it decides, so it spends at most this (the estimate is of its whole pool); "
                  "the design is too large to forecast here -- ray-knowsim adaptive-replay over a finished fixed run "
                  "says the sessions it would have needed")


@dataclass(frozen=True)
class DesignCheck:
    task: str
    design: str  # "adaptive decide=best" | "compare (default family)"
    decisions: int  # decisions (adaptive: one per level and metric) or paired rows (compare) of this task
    n_items: int
    family_size: int
    alpha: float
    min_items: int
    can_decide: bool
    items_needed: int | None
    win_rate: float
    power: float
    power_at_n: float  # the power these items have for that win rate
    comparisons: int = 0  # the pairs this task's decisions test (adaptive: pairs per decision x decisions)

    def line(self) -> str:
        lvl = self.alpha / self.family_size
        pairs = f" over {self.comparisons} comparisons" if self.comparisons and self.comparisons != self.decisions else ""
        head = (f"design {self.task}: {self.design}, {self.decisions} decision(s){pairs}, family of {self.family_size} comparisons "
                f"(each at alpha {self.alpha:g}/{self.family_size} = {lvl:.2g}); {self.n_items} items")
        need = (f"detecting a win rate of {self.win_rate:.2f} with power {self.power:.1f} needs about {self.items_needed} items"
                if self.items_needed is not None else f"a win rate of {self.win_rate:.2f} is out of reach")
        if not self.can_decide:
            return (f"{head}: CANNOT decide: any verdict needs at least {self.min_items} items that do not tie, and the task has "
                    f"{self.n_items}; {need}. Add items, or test fewer things (fewer metrics/levels/conditions).")
        return (f"{head}: can decide (a verdict needs at least {self.min_items} non-tied items); power {self.power_at_n:.2f} "
                f"for a win rate of {self.win_rate:.2f} at these items; {need}.")


def _pairs(k: int) -> int:
    return k * (k - 1) // 2


def design_checks(cfg: Any, items_per_task: Mapping[str, int], win_rate: float = WIN_RATE,
                  power: float = POWER) -> list[DesignCheck]:
    """One check per task of ``cfg`` (a RunConfig); ``items_per_task``: task -> items it has."""
    ad = cfg.adaptive
    k = len(ad.conditions) if ad is not None and ad.conditions else len(cfg.conditions)
    if k < 2:
        return []
    tasks = [t.name for t in cfg.tasks]
    out = []
    if ad is not None:
        per_task = len(cfg.levels) * len(ad.metrics)
        family = _pairs(k) if ad.family == "decision" else per_task * len(tasks) * _pairs(k)
        alpha, design = ad.alpha, f"adaptive decide={ad.decide}, family={ad.family}"
    else:
        metrics = [m for m in DEFAULT_METRICS if m != "iq" or cfg.roles.judge is not None]
        per_task = (len(cfg.levels) + 1) * len(metrics)
        family, alpha, design = per_task * len(tasks) * _pairs(k), ALPHA, "compare (default family: every paired row)"
    for task in tasks:
        n = int(items_per_task.get(task, 0))
        f = feasibility(n, alpha, family, win_rate=win_rate, power=power)
        rows = per_task * _pairs(k)
        out.append(DesignCheck(task, design, per_task if ad is not None else rows, n, family, alpha, int(f.min_items),
                               bool(f.can_decide), None if f.items_needed is None else int(f.items_needed), win_rate,
                               power, float(f.power_at_n), comparisons=rows))
    return out


def adaptive_forecast(cfg: Any, items_per_task: Mapping[str, int], win_rate: float = WIN_RATE) -> dict[str, Any] | None:
    """What ``cfg``'s adaptive design is expected to decide and with what share of the fixed
    design's sessions, simulated (:func:`ray_knowsim.stats.forecast.forecast`: one condition
    winning ``win_rate`` of the items in every decision); ``{"benchmarks": 0}`` when the design is
    too large to simulate in a dry run's time; None for a fixed run or a design without a pair."""
    ad = cfg.adaptive
    conditions = list(ad.conditions or [c.name for c in cfg.conditions]) if ad is not None else []
    pools = {t.name: int(items_per_task.get(t.name, 0)) for t in cfg.tasks}
    if ad is None or len(conditions) < 2 or min(pools.values(), default=0) < 1:
        return None
    tasks = list(pools)

    def build():  # noqa: ANN202 - a fresh Procedure per benchmark
        return ad.procedure(tasks, cfg.levels, conditions)

    rounds = max(-(-n // ad.round.items) for n in pools.values())
    n = benchmarks_for(build(), rounds)
    if not n:
        return {"benchmarks": 0}
    f = forecast(build, pools, ad.round.items, win_rate, benchmarks=n, seed=cfg.seed)
    return {"benchmarks": n, "win_rate": win_rate, "decided": f.decided.mean, "decided_se": f.decided.se,
            "fixed_decided": f.fixed_decided.mean, "fixed_decided_se": f.fixed_decided.se,
            "session_share": f.sessions.mean, "session_share_se": f.sessions.se, "line": f.line()}


def per_decision_lines(cost_usd: float | None, tokens: float, records: list[Mapping[str, Any]],
                       forecast_record: Mapping[str, Any] | None = None) -> list[str]:
    """The dry run's cost per decision: the estimate over the most decisions the design can reach
    (the comparisons of the tasks whose items can decide), labelled "at best"; for an adaptive
    design its forecast (:func:`adaptive_forecast`) and the expected cost to decide (the estimate
    times its session share). None of it without a design (fewer than two conditions)."""
    if not records:
        return []
    reachable = sum(int(r.get("comparisons") or r.get("decisions") or 0) for r in records if r.get("can_decide"))
    spent = Spent(cost_usd, tokens)
    lines = [f"  cost per decision: {cost_per_decision(spent, reachable, at_best=True).line}"]
    if forecast_record and forecast_record.get("benchmarks"):
        share = float(forecast_record["session_share"])
        lines.append(f"    {forecast_record['line']}: expected cost to decide about {spent.amount(spent.total * share)} "
                     f"of the {spent.amount(spent.total)} estimated for the whole pool{spent.why_tokens()}")
    elif any(str(r.get("design", "")).startswith("adaptive") for r in records):
        lines.append(f"    {ADAPTIVE_LIMIT}")
    return lines


def as_records(checks: list[DesignCheck]) -> list[dict[str, Any]]:
    return [asdict(c) | {"line": c.line()} for c in checks]


__all__ = ["ADAPTIVE_LIMIT", "DesignCheck", "adaptive_forecast", "as_records", "design_checks", "per_decision_lines"]
