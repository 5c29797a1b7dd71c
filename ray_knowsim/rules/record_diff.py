"""Leaf-by-leaf comparison of a recorded reference record with our replay of it."""

from __future__ import annotations

import math
from typing import Any

#: the deterministic fields a replay recomputes (spec §1.6, §7.8, §9)
REPLAYED_FIELDS: tuple[str, ...] = (
    "knowledge_state_history",
    "knowledge_state",
    "turn_metrics_history",
    "engagement_score_history",
    "metrics",
    "metrics_at_early_stop",
    "virtual_early_stop_turn",
    "virtual_early_stop_reason",
    "virtual_mastery_turn",
    "ic_numerator_total",
    "ic_denominator_total",
    "zpd_size_total",
    "absorbed_gain_total",
    "new_ius_total",
    "disallowed_total",
    "explained_concepts",
    "overall_density",
    "articulation_mode",
    "gap_sum",
    "query_tone",
    "initial_overload_threshold",
    "initial_knowledge_state",
    "absorption_mode",
    "absorption_config",
    "turns",
)


def differences(expected: Any, actual: Any, path: str = "", tol: float = 1e-9) -> list[tuple]:
    """Every leaf of ``expected`` that ``actual`` lacks or disagrees with (floats to ``tol``)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [(path, "expected an object", type(actual).__name__)]
        out: list[tuple] = []
        for key, value in expected.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                out.append((sub, "missing in replay"))
            else:
                out += differences(value, actual[key], sub, tol)
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            n = len(actual) if isinstance(actual, list) else type(actual).__name__
            return [(path, f"length {len(expected)}", f"length {n}")]
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in differences(e, a, f"{path}[{i}]", tol)]
    if isinstance(expected, bool) or isinstance(actual, bool):
        return [] if expected is actual else [(path, expected, actual)]
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return [] if math.isclose(expected, actual, rel_tol=0, abs_tol=tol) else [(path, expected, actual)]
    return [] if expected == actual else [(path, expected, actual)]


def record_differences(recorded: dict[str, Any], replayed: dict[str, Any]) -> list[tuple]:
    out: list[tuple] = []
    for key in REPLAYED_FIELDS:
        if key in recorded:
            out += differences(recorded[key], replayed.get(key), key)
    return out
