"""Conversation-level metrics from a state trajectory (spec §9), under the paper's names.

KG/NKG knowledge gain, DC the exact absorbed calibration F1, IC the reference's ic_f1,
CO capacity overload, PO excess-share overload. ``reference_metrics`` emits the reference
record's field names so tools written for it can read ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.states import KNOWS_WELL, state_value
from ray_knowsim.rules.turn_metrics import TurnMetrics


def _f1(num: float, den: float, zpd_total: float) -> tuple[float, float, float]:
    precision = num / den if den else 0.0
    recall = num / zpd_total if zpd_total else 1.0
    f1 = 2 * precision * recall / (precision + recall) if (precision + recall) else 0.0
    return precision, recall, f1


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _pvar(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / len(xs)


@dataclass(frozen=True)
class Headroom:
    """Initial facts the normalisations need."""

    headroom: int  # sum of (3 - s) over IUs not known well at t=0
    n_ius: int


@dataclass(frozen=True)
class KSBasis:
    """What the KG normalisations (H, n, raw progress; spec §9.1) sum over: the labels of the
    INITIAL knowledge state, not the graph's nodes.

    ``nodes``: the graph ids that stand for a label of the initial KS (a label shared by several
    nodes stands once, for the last of them in node order: the one the final KS keeps);
    a graph IU whose label is missing from the initial KS is left out.
    ``extra``: the recorded states of initial-KS labels that are no graph IU; they count in H and
    n at that state and never progress (their final entry is the recorded one, or absent = unaware).
    """

    nodes: tuple[str, ...]
    extra: tuple[int, ...] = ()


def ks_basis(g: GraphIndex, ks: Mapping[str, Any]) -> KSBasis | None:
    """The basis of an initial KS (label -> ``{"state": ...}``) over graph ``g``; None when it is
    exactly the graph's nodes (the regular case: no normalisation differs)."""
    by_label: dict[str, str] = {}
    for v, label in zip(g.ids, g.labels):
        by_label[label] = v  # the last node of a shared label wins, as in the final KS
    nodes = tuple(by_label[label] for label in ks if label in by_label)
    extra = tuple(
        state_value(entry.get("state") if isinstance(entry, Mapping) else None)
        for label, entry in ks.items()
        if label not in by_label
    )
    if not extra and len(nodes) == len(g.ids) and set(nodes) == set(g.ids):
        return None
    return KSBasis(nodes, extra)


def _basis_states(initial: Mapping[str, int], basis: KSBasis | None) -> list[int]:
    if basis is None:  # the initial state is over the graph's nodes
        return list(initial.values())
    return [initial.get(v, 0) for v in basis.nodes] + list(basis.extra)


def headroom(initial: Mapping[str, int], basis: KSBasis | None = None) -> Headroom:
    """H and n over the initial KS's labels (``basis``; None: every key of ``initial``)."""
    states = _basis_states(initial, basis)
    return Headroom(sum(KNOWS_WELL - s for s in states if s < KNOWS_WELL), len(states))


def raw_progress(initial: Mapping[str, int], final: Mapping[str, int], basis: KSBasis | None = None) -> int:
    """Sum of positive state changes over the initial KS's labels (a missing final reads as unaware)."""
    keys = initial.keys() if basis is None else basis.nodes
    return sum(max(0, final.get(k, 0) - initial.get(k, 0)) for k in keys)


def reference_metrics(
    turns: Sequence[TurnMetrics],
    initial: Mapping[str, int],
    final: Mapping[str, int],
    *,
    prefix_only: bool = False,
    basis: KSBasis | None = None,
) -> dict:
    """The reference record's ``metrics`` block (or, with ``prefix_only``, its
    ``metrics_at_early_stop`` fields) over the given turns."""
    h = headroom(initial, basis)
    kg = 0.0
    for t in turns:
        kg += t.absorbed_gain
    num = float(sum(t.ic_numerator for t in turns))
    den = float(sum(t.ic_denominator for t in turns))
    zpd_total = float(sum(t.zpd_size for t in turns))
    precision, recall, f1 = _f1(num, den, zpd_total)
    po_turns = [t.perceived_overload for t in turns]
    eng_turns = [t.engagement for t in turns]
    po = _mean(po_turns) or 0.0
    engagement = _mean(eng_turns) or 0.0
    overload_inverse = max(0.0, 1 - po)
    progress = raw_progress(initial, final, basis)
    out = {
        "knowledge_gain": kg,
        "normalized_knowledge_gain": kg / h.headroom if h.headroom else 0.0,
        "normalized_knowledge_gain_3N": progress / (3 * h.n_ius) if h.n_ius else 0.0,
        "raw_state_progress": progress,
        "information_calibration": precision,
        "perceived_overload": po,
        "engagement": engagement,
        "learning_experience": (overload_inverse + precision + engagement) / 3,
        "overload_inverse": overload_inverse,
    }
    if prefix_only:
        out.update({"ic_precision": precision, "ic_recall": recall, "ic_f1": f1})
        return out
    absorbed = sum(t.absorbed_ic_numerator for t in turns)
    a_precision, a_recall, a_f1 = _f1(absorbed, den, zpd_total)
    out.update(
        {
            "ic_numerator_total": num,
            "ic_denominator_total": den,
            "zpd_size_total": zpd_total,
            "ic_precision": precision,
            "ic_recall": recall,
            "ic_f1": f1,
            "perceived_overload_capacity": _mean([t.capacity_load for t in turns]) or 0.0,
            "absorbed_ic_numerator_total": absorbed,
            "absorbed_ic_precision": a_precision,
            "absorbed_ic_recall": a_recall,
            "absorbed_ic_f1": a_f1,
            "absorbed_ic_uses_legacy_proxy": False,
            "new_ius_total": float(sum(t.new_ius for t in turns)),
            "disallowed_total": float(sum(t.disallowed for t in turns)),
        }
    )
    series = {
        "engagement": eng_turns,
        "information_calibration_turn": [t.information_calibration for t in turns],
        "perceived_overload_turn": po_turns,
        "familiarity_term": [t.familiarity for t in turns],
        "novelty_term": [t.novelty for t in turns],
    }
    for name, xs in series.items():
        out[f"{name}_mean"] = _mean(xs)
        out[f"{name}_var"] = _pvar(xs)
    return out


def legacy_absorbed_total(turns: Sequence[TurnMetrics]) -> int:
    """The proxy the reference's example records used: sum of min(ic_numerator, n_upward)."""
    return sum(min(t.ic_numerator, t.n_upward_transitions) for t in turns)


def paper_metrics(
    turns: Sequence[TurnMetrics], initial: Mapping[str, int], final: Mapping[str, int], basis: KSBasis | None = None
) -> dict[str, float]:
    """Our clear names (the session table's columns): kg, nkg, dc, ic, co, po, engagement, ..."""
    ref = reference_metrics(turns, initial, final, basis=basis)
    return {
        "kg": ref["knowledge_gain"],
        "nkg": ref["normalized_knowledge_gain"],
        "dc": ref["absorbed_ic_f1"],
        "dc_precision": ref["absorbed_ic_precision"],
        "dc_recall": ref["absorbed_ic_recall"],
        "ic": ref["ic_f1"],
        "ic_precision": ref["ic_precision"],
        "ic_recall": ref["ic_recall"],
        "co": ref["perceived_overload_capacity"],
        "po": ref["perceived_overload"],
        "engagement": ref["engagement"],
        "learning_experience": ref["learning_experience"],
    }
