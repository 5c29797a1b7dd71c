"""The run's cost re-estimated while it runs, from what its committed sessions spent (pure: no Ray, no I/O).

Why: the dry run (:mod:`ray_knowsim.preflight.estimate`) prices completions from priors, and a
model that answers longer, thinks, or is asked again after a truncation costs more than it said.
Once some sessions are committed the run knows better: their spend, per role and model, scaled
to the planned sessions. Sessions end at different turns, so the unit is the SESSION (a
committed session's whole spend), never the call: scaling calls would need the calls a session
will make, which is what turns out differently.

Per (role, model): the committed sessions' tokens x planned sessions / committed sessions, where
both counts are of the sessions that use that model in that role (an assistant model: the
sessions of its conditions). A model no committed session used yet keeps its share of the first
estimate (the role's figures x its share of the role's planned sessions), and a role no
committed session called at all keeps the first estimate whole (the judges: they run after the
sessions, in the scoring stage). Dollars come from :meth:`ray_knowsim.schema.price.Price.cost`,
the function every recorded call and every session's ``cost_usd`` is priced with, so the cost
shown here and at the end are one fact.

Compared in dollars when the first estimate and the projection are priced and the first is above
zero; otherwise in tokens (a model without a price, or the free offline model).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict

from ray_knowsim.preflight.estimate import Estimate, RoleEstimate
from ray_knowsim.schema.price import NO_PRICE, PRICED_AT_ZERO, usd_text

#: projected / first estimate above which the run warns (once)
OVERRUN = 1.25
#: a projection at least this far (relative) from the last one shown is shown again
MATERIAL = 0.10
#: the share of the planned sessions committed before the first projection (or one shard's worth
#: of sessions, whichever is fewer: see :func:`first_after`)
FIRST_SHARE = 0.05

TOKEN_FIELDS = ("prompt_tokens", "cached_prompt_tokens", "cache_write_tokens", "completion_tokens", "reasoning_tokens")


class Tokens(BaseModel):
    """Token counts in the price's terms: cached and written prompt tokens are of ``prompt_tokens``,
    reasoning tokens of ``completion_tokens`` (OpenAI's convention, :mod:`ray_knowsim.schema.price`)."""

    model_config = ConfigDict(extra="forbid")
    prompt_tokens: float = 0
    cached_prompt_tokens: float = 0
    cache_write_tokens: float = 0
    completion_tokens: float = 0
    reasoning_tokens: float = 0

    @property
    def total(self) -> float:
        return self.prompt_tokens + self.completion_tokens

    def scaled(self, factor: float) -> "Tokens":
        return Tokens(**{f: getattr(self, f) * factor for f in TOKEN_FIELDS})

    def plus(self, other: "Tokens") -> "Tokens":
        return Tokens(**{f: getattr(self, f) + getattr(other, f) for f in TOKEN_FIELDS})

    @classmethod
    def of(cls, role: RoleEstimate) -> "Tokens":
        return cls(**{f: getattr(role, f) for f in TOKEN_FIELDS})


class UnitSpend(BaseModel):
    """What the committed sessions spent on one model in one role."""

    model_config = ConfigDict(extra="forbid")
    role: str
    model: str
    tokens: Tokens


class Progress(BaseModel):
    """The committed sessions' spend and how many of the plan's sessions they are. The assistant's
    counts are per model: the sessions of the conditions it tutors (other roles: all sessions)."""

    model_config = ConfigDict(extra="forbid")
    committed: int
    planned: int
    spent: list[UnitSpend] = []
    committed_by_assistant: dict[str, int] = {}
    planned_by_assistant: dict[str, int] = {}

    def sessions(self, role: str, model: str) -> tuple[int, int]:
        """(committed, planned) sessions that use ``model`` in ``role``."""
        if role == "assistant" and self.planned_by_assistant:
            return self.committed_by_assistant.get(model, 0), self.planned_by_assistant.get(model, 0)
        return self.committed, self.planned


class RoleProjection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    so_far: Tokens
    so_far_usd: float | None
    projected: Tokens
    projected_usd: float | None
    first_tokens: float
    first_usd: float | None
    measured: bool  # False: no committed session called the role yet, its first estimate stands


class Projection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    committed: int
    planned: int
    per_role: dict[str, RoleProjection]
    so_far_tokens: float
    so_far_usd: float | None
    projected_tokens: float
    projected_usd: float | None
    first_tokens: float
    first_usd: float | None
    unit: Literal["usd", "tokens"]  # what the comparison is in
    ratio: float | None  # projected / first estimate in ``unit``; None when the first is 0
    exceeded: bool  # ratio above OVERRUN

    @property
    def value(self) -> float:
        """The projected total in :attr:`unit`."""
        return (self.projected_usd or 0.0) if self.unit == "usd" else self.projected_tokens

    def record(self, at: str) -> dict[str, Any]:
        """The manifest's entry of this re-estimate (run/cost_watch.py writes it)."""
        return {"at": at, "committed": self.committed, "planned": self.planned, "unit": self.unit,
                "so_far_usd": _round(self.so_far_usd), "so_far_tokens": int(round(self.so_far_tokens)),
                "projected_usd": _round(self.projected_usd), "projected_tokens": int(round(self.projected_tokens)),
                "first_estimate_usd": _round(self.first_usd), "first_estimate_tokens": int(round(self.first_tokens)),
                "ratio": None if self.ratio is None else round(self.ratio, 4), "exceeded": self.exceeded}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _priced(tokens: Tokens, price: Any) -> float | None:
    """USD of ``tokens`` at ``price`` (None: no price): THE pricing function of every call."""
    if price is None:
        return None
    return price.cost(tokens.prompt_tokens, tokens.completion_tokens, tokens.cached_prompt_tokens, tokens.cache_write_tokens)


def _add_usd(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def project_role(role: str, first: RoleEstimate | None, spent: Mapping[str, Tokens], progress: Progress,
                 prices: Mapping[str, Any]) -> RoleProjection:
    """One role's projection (see the module docstring): measured models scaled by their sessions,
    the others at their share of the role's first estimate."""
    first_tokens = Tokens.of(first) if first is not None else Tokens()
    first_usd = first.cost_usd if first is not None else 0.0
    if not spent:
        return RoleProjection(so_far=Tokens(), so_far_usd=0.0, projected=first_tokens, projected_usd=first_usd,
                              first_tokens=first_tokens.total, first_usd=first_usd, measured=False)
    models = list(dict.fromkeys([*(first.models if first is not None else []), *spent]))
    role_planned = sum(progress.sessions(role, m)[1] for m in models) or 1
    so_far, so_far_usd, projected, projected_usd = Tokens(), 0.0, Tokens(), 0.0
    for model in models:
        committed, planned = progress.sessions(role, model)
        tokens = spent.get(model, Tokens())
        so_far = so_far.plus(tokens)
        so_far_usd = _add_usd(so_far_usd, _priced(tokens, prices.get(model)))
        if committed > 0:
            whole = tokens.scaled(planned / committed)
            usd = _priced(whole, prices.get(model))
        else:  # not measured yet: its share of the role's first estimate
            share = planned / role_planned
            whole = first_tokens.scaled(share)
            usd = None if first_usd is None else first_usd * share
        projected, projected_usd = projected.plus(whole), _add_usd(projected_usd, usd)
    return RoleProjection(so_far=so_far, so_far_usd=so_far_usd, projected=projected, projected_usd=projected_usd,
                          first_tokens=first_tokens.total, first_usd=first_usd, measured=True)


def project(first: Estimate, progress: Progress, prices: Mapping[str, Any]) -> Projection:
    """The run's total projected from ``progress`` (the committed sessions' spend), compared with
    ``first`` (the dry run's estimate of the same plan); ``prices``: model key -> Price (a key
    without one: unpriced)."""
    spent: dict[str, dict[str, Tokens]] = {}
    for unit in progress.spent:
        by_model = spent.setdefault(unit.role, {})
        by_model[unit.model] = by_model.get(unit.model, Tokens()).plus(unit.tokens)
    roles = list(dict.fromkeys([*first.per_role, *spent]))
    per_role = {r: project_role(r, first.per_role.get(r), spent.get(r, {}), progress, prices) for r in roles}
    so_far_usd: float | None = 0.0
    projected_usd: float | None = 0.0
    for p in per_role.values():
        so_far_usd, projected_usd = _add_usd(so_far_usd, p.so_far_usd), _add_usd(projected_usd, p.projected_usd)
    first_tokens = float(first.totals.prompt_tokens + first.totals.completion_tokens)
    projected_tokens = sum(p.projected.total for p in per_role.values())
    first_usd = first.totals.cost_usd
    in_usd = projected_usd is not None and first_usd is not None and first_usd > 0
    base, now = (first_usd, projected_usd) if in_usd else (first_tokens, projected_tokens)
    ratio = now / base if base else None
    return Projection(committed=progress.committed, planned=progress.planned, per_role=per_role,
                      so_far_tokens=sum(p.so_far.total for p in per_role.values()), so_far_usd=so_far_usd,
                      projected_tokens=projected_tokens, projected_usd=projected_usd, first_tokens=first_tokens,
                      first_usd=first_usd, unit="usd" if in_usd else "tokens", ratio=ratio,
                      exceeded=ratio is not None and ratio > OVERRUN)


def first_after(planned: int, shard_size: int) -> int:
    """Committed sessions before the first projection: 5 % of the planned ones, or one shard's
    worth when that is fewer, at least 1. A mean over a handful of sessions is noisy (they end at
    different turns), so a large run waits for 5 %; but a run of 100,000 sessions should not spend
    5,000 of them before it says anything, and one shard (what a worker commits as a unit, and
    the first thing a run finishes) is the smallest sample the engine treats as one."""
    return max(1, min(math.ceil(FIRST_SHARE * planned), max(1, shard_size)))


def changed(last: Projection | None, new: Projection) -> bool:
    """Whether ``new`` is worth a line after ``last`` (the last one shown): the first, one that
    crosses the warning threshold, or one :data:`MATERIAL` away from it."""
    if last is None or last.unit != new.unit or last.exceeded != new.exceeded:
        return True
    return abs(new.value - last.value) >= MATERIAL * abs(last.value) if last.value else new.value != 0


def _amount(usd: float | None, tokens: float, unit: str) -> str:
    return usd_text(usd, digits=2) if unit == "usd" else f"{tokens:,.0f} tokens"


def line(p: Projection) -> str:
    """``cost so far $X; projected total $Y (first estimate $Z)``: in dollars when priced, else in
    tokens with why (no price given, or models priced at $0, the offline model's)."""
    sessions = f"{p.committed:,} of {p.planned:,} sessions committed"
    if p.unit == "usd":
        return (f"cost so far {_amount(p.so_far_usd, p.so_far_tokens, 'usd')}; projected total "
                f"{_amount(p.projected_usd, p.projected_tokens, 'usd')} (first estimate {_amount(p.first_usd, p.first_tokens, 'usd')}); "
                f"{sessions}")
    why = NO_PRICE if p.projected_usd is None or p.first_usd is None else PRICED_AT_ZERO
    return (f"tokens so far {p.so_far_tokens:,.0f}; projected total {p.projected_tokens:,.0f} tokens "
            f"(first estimate {p.first_tokens:,.0f} tokens; cost: {why}); {sessions}")


def warning_line(p: Projection) -> str:
    """The one-time warning of a projection above :data:`OVERRUN` x the first estimate, worded as
    the run's Ctrl-C message: what is committed is kept, and the same command resumes."""
    now = _amount(p.projected_usd, p.projected_tokens, p.unit)
    first = _amount(p.first_usd, p.first_tokens, p.unit)
    return (f"cost warning: the projected total {now} is {p.ratio:.0%} of the first estimate {first} "
            f"(more than {OVERRUN:.0%}); Ctrl-C stops the run and every committed session is kept and safe "
            "(the same command resumes)")


def recorded_note(manifest: Mapping[str, Any]) -> str | None:
    """The report's sentence on the re-estimates a run recorded (its latest invocation that made
    any; run/cost_watch.py writes them), in the units and words of :func:`line`; None: none made."""
    for inv in reversed(manifest.get("invocations") or []):
        entry = inv.get("cost_reestimates") or {}
        records = entry.get("records") or []
        if not records:
            continue
        r = records[-1]
        unit = r.get("unit", "tokens")
        now = _amount(r.get("projected_usd"), r.get("projected_tokens", 0), unit)
        first = _amount(r.get("first_estimate_usd"), r.get("first_estimate_tokens", 0), unit)
        ratio = f" ({r['ratio']:.0%} of it)" if r.get("ratio") is not None else ""
        warned = (f"; above {OVERRUN:.0%} of the first estimate at {sum(x.get('exceeded', False) for x in records)} of "
                  f"{len(records)} re-estimates shown, and the run warned") if any(x.get("exceeded") for x in records) else ""
        return (f"Re-estimated while it ran from its committed sessions' spend: last projected total {now} after "
                f"{r.get('committed', 0):,} of {r.get('planned', 0):,} sessions, first estimate {first}{ratio}{warned}.")
    return None


__all__ = ["FIRST_SHARE", "MATERIAL", "OVERRUN", "Progress", "Projection", "RoleProjection", "Tokens", "UnitSpend", "changed",
           "first_after", "line", "project", "project_role", "recorded_note", "warning_line"]
