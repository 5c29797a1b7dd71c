"""Each KnowSim role's defaults, in one place: sampling temperature, token cap, attempts, the
temperature of the one repair round, and the token budget of the first try.

A run config's ``roles.<role>`` overrides any of them (:class:`ray_knowsim.config.sections.RoleConfig`);
a renderer stamps the defaults on the requests it builds, and the run's settings replace them
before anything is sent (:meth:`ray_knowsim.sim.types.RoleSettings.apply`). So these values are
what a role gets when a config says nothing, and nothing else anywhere says otherwise.

The first try of a request gets fewer tokens than the cap (:func:`first_try_tokens`), so an answer
cut at the first budget can be asked again with the whole cap (:mod:`ray_knowsim.sim.ask`). A cap
that is not above the first try leaves no room for that retry: :func:`budget_warning` says so,
with the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


class RoleBudgetWarning(UserWarning):
    """A role's first try already asks for its cap: a truncated answer gets no retry with more."""


@dataclass(frozen=True)
class RoleDefaults:
    temperature: float
    max_tokens: int  # the cap; a truncated first try is asked again with this many
    attempts: int = 3  # model calls per request: the first, one repair round, one truncation retry
    # temperature of the one repair round of an unreadable answer; None: the role's own temperature
    repair_temperature: float | None = None


#: spec §12: the temperatures and token budgets of the paper runs; the extractor is asked again a
#: little warmer (spec §12.5), so a repair round can leave the refused answer's rut
ROLE_DEFAULTS: dict[str, RoleDefaults] = {
    "user_sim": RoleDefaults(temperature=0.7, max_tokens=3000),
    "assistant": RoleDefaults(temperature=0.0, max_tokens=3000),
    "extractor": RoleDefaults(temperature=0.0, max_tokens=8192, repair_temperature=0.4),
    "judge": RoleDefaults(temperature=0.0, max_tokens=4096),
}

#: the smallest first-try budget (tokens) when it is derived from the cap
MIN_BUDGET = 256
#: first-try budget of the extractor: a report needs roughly this per IU (two reasoning texts, a
#: sentence or two each, and the labels) plus the envelope
EXTRACTOR_TOKENS_PER_IU = 256
EXTRACTOR_TOKENS_BASE = 512


def extractor_budget(n_ius: int) -> int:
    """The extractor's first-try estimate for a graph of ``n_ius`` IUs (before the cap)."""
    return EXTRACTOR_TOKENS_BASE + EXTRACTOR_TOKENS_PER_IU * n_ius


def first_budget(cap: int, estimate: int | None = None) -> int:
    """Tokens for the first attempt: ``estimate`` when given, else half of ``cap`` (at least
    :data:`MIN_BUDGET`); never above ``cap`` (the role's ``max_tokens``)."""
    wanted = estimate if estimate is not None else max(MIN_BUDGET, cap // 2)
    return max(1, min(cap, wanted))


def first_try_tokens(role: str, cap: int, n_ius: int | None = None) -> int:
    """The first try's budget of ``role`` under the cap ``cap`` (the extractor's grows with the graph)."""
    estimate = extractor_budget(n_ius) if role == "extractor" and n_ius is not None else None
    return first_budget(cap, estimate)


def budget_warning(role: str, cap: int, n_ius: int | None = None) -> str | None:
    """Why ``cap`` leaves ``role`` no truncation retry (its first try already asks for the cap), or None."""
    first = first_try_tokens(role, cap, n_ius)
    if first < cap:
        return None
    if role == "extractor" and n_ius is not None:
        wanted = extractor_budget(n_ius)
        what = f"the first try for a {n_ius}-IU graph asks for {wanted:,} tokens ({EXTRACTOR_TOKENS_BASE} + {EXTRACTOR_TOKENS_PER_IU} per IU)"
    else:
        wanted = max(MIN_BUDGET, cap)
        what = f"the first try asks for {first:,} tokens"
    return (f"roles.{role}.max_tokens {cap:,}: {what}, which is the cap, so an answer cut there cannot be asked "
            f"again with more and fails as {role}_truncated; set max_tokens to at least {2 * wanted:,} where the "
            "endpoint allows it")


__all__ = [
    "EXTRACTOR_TOKENS_BASE", "EXTRACTOR_TOKENS_PER_IU", "MIN_BUDGET", "ROLE_DEFAULTS", "RoleBudgetWarning", "RoleDefaults",
    "budget_warning", "extractor_budget", "first_budget", "first_try_tokens",
]  # fmt: skip
