"""Verdicts as sentences: what a pair's verdict says, with the counts it rests on (pure).

One function words every verdict -- compare's fixed-sample rows, an adaptive run's own sequential
records, the report and the viewer -- so the same counts read the same everywhere, e.g.
``A teaches more (KG) than B on novices: 14 of 20 items won, 2 lost, 4 tied; exact sign test p_adj = 0.004``.
"""

from __future__ import annotations

import math

from ray_knowsim.schema.metrics import find_metric

#: what "better" means beyond the metric catalogue's phrases (ray_knowsim.schema.metrics)
PHRASES = {"cost_usd": "costs less"}


def better_phrase(metric: str) -> str | None:
    """What "better" means on ``metric`` as a verb phrase: the catalogue's (outside metrics
    included; ``kg_es`` and ``iq@other`` read their metric's), else :data:`PHRASES`', else None."""
    base = metric.split("@", 1)[0]
    found = find_metric(base)
    return (found.phrase or None) if found is not None else PHRASES.get(base)


SCOPES = {"novice": "on novices", "intermediate": "on intermediate learners", "advanced": "on advanced learners",
          "all": "over all levels"}


def scope_text(level: str) -> str:
    return SCOPES.get(level, f"at level {level}")


def _metric(metric: str) -> str:
    return metric.upper()


def _p(p: float | None) -> str:
    return "" if p is None else " p_adj = 1" if p >= 1 else f" p_adj = {p:.2g}"


def interval_text(lo: float, hi: float, decimals: int = 2, zero_width_why: str = "every item has the same value") -> str:
    """``[lo, hi]``, and a zero-width interval said to be one: ``[0.50, 0.50] (zero width: all items tie)``."""
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "[–]"
    out = f"[{lo:.{decimals}f}, {hi:.{decimals}f}]"
    return out + f" (zero width: {zero_width_why})" if lo == hi else out


def verdict_sentence(a: str, b: str, metric: str, level: str, wins: int, losses: int, ties: int, *, better: str | None,
                     p_adj: float | None, test: str = "exact sign test", equivalent: bool = False, effect: float | None = None,
                     min_items: int | None = None, net_interval: tuple[float, float] | None = None) -> str:
    """One pair's verdict; ``wins`` / ``losses`` / ``ties`` are items from ``a``'s side (a win: a
    better on the metric); ``better`` the significant winner (None: no verdict)."""
    n = wins + losses + ties
    if better is not None:
        w, l = (wins, losses) if better == a else (losses, wins)
        worse = b if better == a else a
        phrase = better_phrase(metric)
        what = f"{phrase} ({_metric(metric)})" if phrase else f"is better on {_metric(metric)}"
        return (f"{better} {what} than {worse} {scope_text(level)}: {w} of {n} items won, {l} lost, {ties} tied; "
                f"{test}{_p(p_adj)}")
    counts = f"{a} won {wins} of {n} items, lost {losses}, {ties} tied"
    if equivalent and effect is not None:
        net = f"; net win rate {interval_text(*net_interval)}" if net_interval else ""
        return (f"{a} and {b} differ by less than the effect on {_metric(metric)} {scope_text(level)}: win rate within "
                f"1/2 ± {effect:g} ({counts}{net})")
    tail = ""
    if min_items is not None and wins + losses < min_items:
        tail = f"; cannot decide at this family size: needs at least {min_items} non-tied items, has {wins + losses}"
    return f"{a} vs {b} on {_metric(metric)} {scope_text(level)}: no verdict ({counts}; {test}{_p(p_adj)}{tail})"


__all__ = ["PHRASES", "better_phrase", "interval_text", "scope_text", "verdict_sentence"]
