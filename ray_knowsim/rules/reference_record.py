"""Replay a recorded reference conversation and emit its deterministic part in the reference schema.

Input: a structured record (spec §1.6) and the item's graph index. Output: a dict with the
fields tools written for the reference read — ``knowledge_state_history``,
``turn_metrics_history``, ``metrics``, ``metrics_at_early_stop``, ``virtual_early_stop_*`` —
recomputed from the record's ``initial_knowledge_state`` and ``iu_analysis_history`` alone.
"""

from __future__ import annotations

import copy
from typing import Any

from ray_knowsim.schema.graph import GraphIndex
from ray_knowsim.schema.signals import normalize_signals
from ray_knowsim.schema.states import state_name, state_value
from ray_knowsim.rules.config import RuleConfig, reference_absorption_block
from ray_knowsim.rules.final_metrics import _f1, ks_basis, legacy_absorbed_total, reference_metrics
from ray_knowsim.rules.prerequisites import articulation_mode, density, gap_sum
from ray_knowsim.rules.termination import mastery_turn
from ray_knowsim.rules.trajectory import Trajectory, run_trajectory

ES_NOTE = "NKG from accumulated absorbed_gain (matches final metric)"


def initial_from_ks(g: GraphIndex, ks: dict[str, Any]) -> tuple[dict[str, int], dict[str, float]]:
    """Graph-id states and carries from a label-keyed knowledge state (id -> label -> state)."""
    states, carries = {}, {}
    for v, label in zip(g.ids, g.labels):
        entry = ks.get(label) or {}
        states[v] = state_value(entry.get("state") if isinstance(entry, dict) else None)
        fp = entry.get("fractional_progress") if isinstance(entry, dict) else None
        carries[v] = float(fp) if isinstance(fp, (int, float)) else 0.0
    return states, carries


def _uses_legacy_proxy(record: dict[str, Any]) -> bool:
    history = record.get("turn_metrics_history") or []
    return bool(history) and any("absorbed_ic_numerator" not in tm for tm in history)


def replay_record(record: dict[str, Any], g: GraphIndex, rules: RuleConfig) -> tuple[Trajectory, dict[str, Any]]:
    ks0 = record["initial_knowledge_state"]
    initial, carries = initial_from_ks(g, ks0)
    signal_lists = [normalize_signals(turn) for turn in record.get("iu_analysis_history") or []]
    max_turns = int(record.get("turns") or len(signal_lists) or 15)
    basis = ks_basis(g, ks0) if isinstance(ks0, dict) else None
    traj = run_trajectory(
        g, initial, signal_lists, rules, initial_carries=carries, max_turns=max(max_turns, 1), basis=basis
    )
    return traj, reference_view(record, g, traj, rules, legacy_proxy=_uses_legacy_proxy(record))


def _ks_after(g: GraphIndex, ks_prev: dict[str, Any], traj: Trajectory, t: int) -> dict[str, Any]:
    update = traj.updates[t - 1]
    by_id = {e.id: e for e in traj.entries[t - 1] if e.id is not None}
    ks = copy.deepcopy(ks_prev)
    for v, label in zip(g.ids, g.labels):
        prev = ks.get(label)
        entry = dict(prev) if isinstance(prev, dict) else {}  # a malformed entry reads as empty
        entry["state"] = state_name(update.post[v])
        entry["evidence"] = by_id[v].teaching_quality_reasoning if v in by_id else ""
        entry["fractional_progress"] = update.carries[v]
        ks[label] = entry
    return ks


def reference_view(
    record: dict[str, Any], g: GraphIndex, traj: Trajectory, rules: RuleConfig, *, legacy_proxy: bool
) -> dict[str, Any]:
    ks_history = [copy.deepcopy(record["initial_knowledge_state"])]
    for t in range(1, len(traj.updates) + 1):
        ks_history.append(_ks_after(g, ks_history[-1], traj, t))

    turn_rows = []
    for t, (u, m) in enumerate(zip(traj.updates, traj.metrics), start=1):
        row = {
            "turn": t,
            "engagement": m.engagement,
            "information_calibration_turn": m.information_calibration,
            "ic_numerator": float(m.ic_numerator),
            "ic_denominator": float(m.ic_denominator),
            "zpd_size": float(m.zpd_size),
            "perceived_overload_turn": m.perceived_overload,
            "overload_threshold": float(traj.tau),
            "familiarity_term": m.familiarity,
            "novelty_term": m.novelty,
            "overload": u.overload,
            "n_upward_transitions": m.n_upward_transitions,
            "absorbed_gain": m.absorbed_gain,
            "comprehension_load": u.comprehension_load,
            "attempt_load": u.attempt_load,
            "effective_load": u.effective_load,
        }
        if not legacy_proxy:
            row["absorbed_ic_numerator"] = m.absorbed_ic_numerator_any_partial
        turn_rows.append(row)

    metrics = reference_metrics(traj.metrics, traj.initial, traj.final, basis=traj.basis)
    absorbed = (
        legacy_absorbed_total(traj.metrics)
        if legacy_proxy
        else sum(m.absorbed_ic_numerator_any_partial for m in traj.metrics)
    )
    precision, recall, f1 = _f1(absorbed, metrics["ic_denominator_total"], metrics["zpd_size_total"])
    metrics.update(
        {
            "absorbed_ic_numerator_total": absorbed,
            "absorbed_ic_precision": precision,
            "absorbed_ic_recall": recall,
            "absorbed_ic_f1": f1,
            "absorbed_ic_uses_legacy_proxy": legacy_proxy,
        }
    )

    stop = traj.early_stop(rules)
    k = stop.turn if stop else len(traj.updates)
    at_stop = reference_metrics(traj.metrics[:k], traj.initial, traj.states[k], prefix_only=True, basis=traj.basis)
    at_stop["turns_included"] = k
    at_stop["turn_metrics_history"] = turn_rows[:k]
    at_stop["note"] = ES_NOTE

    final = traj.final
    mentioned_last = [e.id for e in traj.entries[-1] if e.mentioned] if traj.entries else []
    dens = density(g, final)
    gsum = gap_sum(g, mentioned_last, final)
    explained = traj.explained_concepts(g)
    absorption = reference_absorption_block(rules)
    out: dict[str, Any] = {
        "problem_id": record.get("problem_id"),
        "task": record.get("task"),
        "knowledge_level": record.get("knowledge_level"),
        "turns": len(traj.updates),
        "absorption_mode": absorption[0],
        "absorption_config": absorption[1],
        "initial_overload_threshold": traj.tau,
        "initial_knowledge_state": ks_history[0],
        "knowledge_state_history": ks_history,
        "knowledge_state": ks_history[-1],
        "turn_metrics_history": turn_rows,
        "engagement_score_history": [
            {"engagement": m.engagement, "familiarity": m.familiarity, "novelty": m.novelty} for m in traj.metrics
        ],
        "ic_numerator_total": metrics["ic_numerator_total"],
        "ic_denominator_total": metrics["ic_denominator_total"],
        "zpd_size_total": metrics["zpd_size_total"],
        "absorbed_gain_total": float(sum(m.absorbed_gain for m in traj.metrics)),
        "new_ius_total": metrics["new_ius_total"],
        "disallowed_total": metrics["disallowed_total"],
        "explained_concepts": explained,
        "overall_density": dens,
        "articulation_mode": articulation_mode(dens),
        "gap_sum": gsum,
        "query_tone": "Vague" if gsum >= 2 else "Explicit",
        "metrics": metrics,
        "metrics_at_early_stop": at_stop,
        "virtual_early_stop_turn": stop.index if stop else None,
        "virtual_early_stop_reason": stop.reason if stop else None,
    }
    mastered = mastery_turn(traj.stop_signals(), rules.termination)
    if mastered is not None:
        out["virtual_mastery_turn"] = mastered
    return out
