"""The offline judges (Interaction Quality rater, termination judge) and graph extraction."""

from __future__ import annotations

import re
from typing import Any, Mapping

from ray_knowsim.llm.offline.words import _ATTEMPT, _HEDGE, ntokens, sentences, words


_DONE_MATH = re.compile(r"\b(got it|the answer is|i can solve|reach the answer|finish on my own)\b", re.I)
_DONE_QA = re.compile(r"\b(makes sense|understand now|got it|finish on my own|that helps)\b", re.I)


def _rate(ctx: Mapping[str, Any]) -> dict[str, Any]:
    pairs = ctx.get("transcript") or []
    replies = [t for r, t in pairs if r == "assistant"]
    asks = [t for r, t in pairs if r == "user"]
    lengths = [ntokens(t) for t in replies] or [0]
    mean_len = sum(lengths) / len(lengths)
    long_share = sum(1 for n in lengths if n > 150) / len(lengths)
    confused = sum(1 for t in asks if _HEDGE.search(t)) / max(1, len(asks))
    tries = sum(1 for t in asks if _ATTEMPT.search(t)) / max(1, len(asks))
    calibration = max(0.05, min(1.0, 1.0 - abs(mean_len - 70.0) / 250.0 - 0.3 * confused))
    overload = max(0.0, min(1.0, 0.7 * long_share + 0.3 * confused))
    quality = 1.0 + 9.0 * (0.6 * calibration + 0.4 * (1.0 - overload))
    learning = 1.0 + 9.0 * max(0.0, min(1.0, 0.5 * tries + 0.5 * (1.0 - confused)))
    return {
        "information_calibration": round(calibration, 2),
        "perceived_overload": round(overload, 2),
        "quality_score": round(quality, 1),
        "perceived_learning": round(learning, 1),
        "ic_reasoning": f"Tutor replies average {mean_len:.0f} words; the learner sounded confused in {confused:.0%} of turns.",
        "po_reasoning": f"{long_share:.0%} of the tutor's replies are long (over 150 words).",
        "quality_reasoning": "Combines how well the replies were sized with how rarely they overloaded the learner.",
        "pl_reasoning": f"The learner attempted steps in {tries:.0%} of turns.",
    }


def _terminate(ctx: Mapping[str, Any]) -> dict[str, Any]:
    pairs = ctx.get("transcript") or []
    asks = [t for r, t in pairs if r == "user"]
    task = ctx.get("task")
    done_re, done, stall = (
        (_DONE_MATH, "problem_completion", "circular_queries")
        if task == "math"
        else (_DONE_QA, "comprehension_satisfied", "unproductive_stalling")
    )
    analysis, end, reason = [], len(asks), "max_turns"
    for k, text in enumerate(asks, 1):
        progress = "improving"
        if k > 1 and set(words(text)) and set(words(text)) == set(words(asks[k - 2])):
            progress = "stalled"
        analysis.append({"turn": k, "summary": " ".join(text.split()[:20]), "progress": progress})
    for k, text in enumerate(asks, 1):
        if done_re.search(text):
            end, reason = k, done
            break
        if analysis[k - 1]["progress"] == "stalled":
            end, reason = k, stall
            break
    return {"turn_analysis": analysis, "ending_turn": max(1, end), "termination_reason": reason}


def _extract_graph(ctx: Mapping[str, Any]) -> dict[str, Any]:
    source = ctx.get("reference_answer") or ctx.get("question") or ""
    pieces = [s for s in sentences(source) if words(s)]
    if len(pieces) < 10:
        finer = [p.strip() for s in pieces for p in re.split(r";\s+|,\s+(?:and|so|then)\s+", s) if words(p)]
        pieces = finer if len(finer) > len(pieces) else pieces
    cap = 12 if ctx.get("attempt") == "compact" else 30
    pieces = pieces[:cap] or [ctx.get("question") or "The question"]
    k = len(pieces)
    step = min(0.3, 0.8 / max(1, k - 1))
    nodes, edges = [], []
    for i, text in enumerate(pieces):
        head = " ".join(text.split()[:6]).rstrip(".,;:")
        nodes.append(
            {"id": f"IU{i + 1}", "concept": head or f"Step {i + 1}", "abstraction_level": round(0.9 - i * step, 3), "description": text}
        )
        if i:
            edges.append(
                {"from": f"IU{i}", "to": f"IU{i + 1}", "delta_l": round(step, 3), "reason": "Each step of the answer builds on the one before."}
            )
    areas = sorted({w for w in words(ctx.get("question", "")) if len(w) > 5})[:3] or ["general"]
    return {"knowledge_areas": areas, "nodes": nodes, "edges": edges}
