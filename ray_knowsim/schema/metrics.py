"""THE metric catalogue: every conversation metric, once, with what each consumer needs.

The session row's metric columns (:mod:`ray_knowsim.schema.results`), the run's tables
(``tables``' reduction), ``compare``'s default metrics and its verdict sentences, the mean rank
(:mod:`ray_knowsim.stats.ranks`), the report's metric table (:mod:`ray_knowsim.report.metrics`),
the sweep's re-scored columns and the run config's choices of a decision metric are all derived
from :data:`BUILTIN_METRICS` (and the metrics plugins register): adding a field here is how a
metric is added, and tests check the consumers that cannot derive (the numba kernel's fixed
counters, the sweep's vectorised twin) against it.

What a metric *is* lives elsewhere, once: the built-ins are computed from the state trajectory by
:mod:`ray_knowsim.rules.final_metrics` (spec §9), IQ by the judge (:mod:`ray_knowsim.score`).
An **outside metric** (a plugin's, ``docs/extending.md`` "Adding a metric") carries its own
``compute``: a function of the session's :class:`ray_knowsim.rules.trajectory.Trajectory` that
:meth:`~ray_knowsim.rules.trajectory.Trajectory.summary` calls for every structured session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal

from ray_knowsim.registry import Registry

#: who fills a metric's column: the state trajectory (the rules), the LLM judge (the score stage),
#: or a plugin's ``compute`` over the state trajectory
Source = Literal["state", "judge", "outside"]
ES_SUFFIX = "_es"


@dataclass(frozen=True)
class Metric:
    """One conversation metric: a float column of the session row (plus ``<name>_es`` at the
    virtual early stop when ``early_stop``), reduced per (task, condition, level) by its mean over
    ok sessions with an item-clustered interval (:mod:`ray_knowsim.stats.descriptive`)."""

    name: str  # the session column (final value); also the name configs and ``--metrics`` use
    label: str  # the report's column header, e.g. "KG"
    description: str  # what it measures, one clause (the report appends where: final / early stop)
    higher_is_better: bool = True
    decimals: int = 3  # the report's and the terminal's number format
    source: Source = "state"
    early_stop: bool = True  # also a ``<name>_es`` column (state metrics only: the judge rates the whole conversation)
    #: further float columns of the session row that belong to it (its precision and recall), right after it
    parts: tuple[str, ...] = ()
    compared: bool = True  # compare tests it, and the run's rank table ranks it, by default
    mean_rank: bool = False  # one of the paper's mean-rank metrics (spec §11; one per construct)
    phrase: str = ""  # what "better" means, as a verdict's verb phrase ("teaches more")
    #: the reference record's ``metrics`` / ``metrics_at_early_stop`` field it equals (spec §9)
    reference: str | None = None
    reference_es: str | None = None
    #: the per-turn counters (TurnMetrics fields, the kernel's counters) it is computed from
    turn_inputs: tuple[str, ...] = ()
    #: an outside metric's computation: ``compute(trajectory) -> float | None`` (None: no value)
    compute: Callable[[Any], float | None] | None = None

    @property
    def es_name(self) -> str | None:
        return f"{self.name}{ES_SUFFIX}" if self.early_stop else None

    def columns(self, variant: Literal["final", "es"] = "final") -> tuple[str, ...]:
        """The metric's session columns of one variant (its parts only with the final value)."""
        if variant == "es":
            return (self.es_name,) if self.es_name else ()
        return (self.name, *self.parts)

    def verb(self) -> str:
        return self.phrase or f"is better on {self.label}"


#: the built-in metrics in the session row's (and the tables') order
BUILTIN_METRICS: tuple[Metric, ...] = (
    Metric("kg", "KG", "knowledge gain: sum of upward ordinal steps", mean_rank=True, phrase="teaches more",
           reference="knowledge_gain", reference_es="knowledge_gain", turn_inputs=("absorbed_gain",)),
    Metric("nkg", "NKG", "normalised knowledge gain: KG / initial headroom", phrase="teaches more",
           reference="normalized_knowledge_gain", reference_es="normalized_knowledge_gain", turn_inputs=("absorbed_gain",)),
    Metric("dc", "DC", "delivery calibration: F1 of absorbed explained IUs vs the ZPD", parts=("dc_precision", "dc_recall"),
           # the reference's ``absorbed_ic_f1`` is another variant (the any-partial ceiling or the legacy proxy,
           # spec §7.4): re-scores read it as dc_any / dc_legacy, never as dc
           mean_rank=True, phrase="calibrates delivery better",
           turn_inputs=("absorbed_ic_numerator", "ic_denominator", "zpd_size")),
    Metric("ic", "IC", "information calibration: the reference's F1 of explained teachable IUs", parts=("ic_precision", "ic_recall"),
           phrase="calibrates information better", reference="ic_f1", reference_es="ic_f1",
           turn_inputs=("ic_numerator", "ic_denominator", "zpd_size")),
    Metric("co", "CO", "cognitive overload: mean min(1, load/τ) over turns", higher_is_better=False, mean_rank=True,
           phrase="overloads less", reference="perceived_overload_capacity", turn_inputs=("capacity_load",)),
    Metric("po", "PO", "perceived overload: mean excess share max(0, load - τ) / load over turns", higher_is_better=False,
           phrase="overloads less (as perceived)", reference="perceived_overload", reference_es="perceived_overload",
           turn_inputs=("perceived_overload",)),
    Metric("engagement", "ENG", "engagement: mean familiarity x novelty over turns", phrase="engages more",
           reference="engagement", reference_es="engagement", turn_inputs=("engagement",)),
    Metric("learning_experience", "LX", "learning experience: mean of (1 - PO), IC precision and engagement",
           compared=False, phrase="gives a better experience", reference="learning_experience",
           reference_es="learning_experience", turn_inputs=("perceived_overload", "ic_numerator", "ic_denominator", "engagement")),
    Metric("iq", "IQ", "interaction quality: LLM judge score 1-10 of the whole conversation", decimals=2, source="judge",
           early_stop=False, mean_rank=True, phrase="interacts better"),
)

#: metrics registered from outside the package (:func:`register_metric`)
OUTSIDE_METRICS: Registry[Metric] = Registry("metric")


class MetricError(ValueError):
    """A metric that cannot be registered (a taken name, a missing computation)."""


#: the session row's columns beyond the catalogue's own: the row's module
#: (:mod:`ray_knowsim.schema.results`, which imports this one) declares them when it is defined
_ROW_COLUMNS: set[str] = set()


def reserve_columns(columns: Iterable[str]) -> None:
    """Declare session columns no outside metric may take (the session row's module declares all of its own)."""
    _ROW_COLUMNS.update(columns)


def check_free_column(name: str) -> None:
    """Raise :class:`MetricError` unless ``name`` is free for an outside metric's column: an
    identifier that is none of the catalogue's columns and none the session row declared."""
    if name in _ROW_COLUMNS or name in row_fields() or not name.isidentifier():
        raise MetricError(f"metric {name!r}: not a free column name (the session row has it, or it is no identifier)")


def register_metric(metric: Metric, *, replace: bool = False) -> Metric:
    """Register an outside metric (``source="outside"``, with ``compute``): every structured
    session of a run that imports the module (the run config's ``plugins``) gets its column."""
    if metric.source != "outside" or metric.compute is None:
        raise MetricError(f"metric {metric.name!r}: an outside metric has source='outside' and a compute function")
    if metric.early_stop or metric.parts:
        raise MetricError(f"metric {metric.name!r}: outside metrics have one column (early_stop=False, no parts)")
    check_free_column(metric.name)
    OUTSIDE_METRICS.register(metric.name, metric, replace=replace)
    return metric


def outside_metrics() -> tuple[Metric, ...]:
    return tuple(OUTSIDE_METRICS.get(n) for n in OUTSIDE_METRICS.names())


def catalogue() -> tuple[Metric, ...]:
    """Every metric this process knows: the built-ins, then the registered outside metrics."""
    return (*BUILTIN_METRICS, *outside_metrics())


def find_metric(column: str) -> Metric | None:
    """The metric a session column (``kg``, ``kg_es``, ``iq@other`` of another score set) is a variant of."""
    base = column.split("@", 1)[0]
    for m in catalogue():
        if base == m.name or base == m.es_name:
            return m
    return None


def names(*, source: Source | None = None, variant: Literal["final", "es"] = "final", compared: bool | None = None,
          mean_rank: bool | None = None, builtin: bool = True) -> tuple[str, ...]:
    """Metric column names, in catalogue order, filtered by the given facts."""
    out = []
    for m in (BUILTIN_METRICS if builtin else catalogue()):
        if source is not None and m.source != source:
            continue
        if compared is not None and m.compared != compared:
            continue
        if mean_rank is not None and m.mean_rank != mean_rank:
            continue
        out += [m.name] if variant == "final" else [m.es_name] if m.es_name else []
    return tuple(out)


def row_fields() -> dict[str, tuple[type, None]]:
    """The session row's metric columns, in order: each state metric and its parts, then the state
    metrics at the early stop, then the judge's metrics (all ``float | None``, None for baselines)."""
    state = [m for m in BUILTIN_METRICS if m.source == "state"]
    judge = [m for m in BUILTIN_METRICS if m.source == "judge"]
    cols = [c for m in state for c in m.columns()] + [m.es_name for m in state if m.es_name] + [c for m in judge for c in m.columns()]
    return {c: (float | None, None) for c in cols}  # type: ignore[misc]


__all__ = ["BUILTIN_METRICS", "ES_SUFFIX", "Metric", "MetricError", "OUTSIDE_METRICS", "Source", "catalogue",
           "check_free_column", "find_metric", "names", "outside_metrics", "register_metric", "reserve_columns", "row_fields"]
