"""A recorded KnowSim conversation (the authors' record format, spec §1.6) as the audit's facts.

The audit is tuned on the project's own runs; the authors' recorded conversations are the only
text at hand that a real tutor and a real extractor wrote, so the audit must read them too
(docs/audit.md reports its flags on them). Pure: the parsed record and its item's graph in,
:class:`~ray_knowsim.audit.checks.SessionFacts` out.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ray_knowsim.audit.checks import SessionFacts, TurnFacts
from ray_knowsim.schema.graph import IUGraph, iu_label
from ray_knowsim.schema.states import state_value


def _states(graph: IUGraph, ks: Mapping[str, Any] | None) -> list[int]:
    """Graph-order states of a label-keyed knowledge state ([] when the record holds none)."""
    if not isinstance(ks, Mapping) or not ks:
        return []
    by_id = {str(label).split(":", 1)[0].strip(): entry for label, entry in ks.items()}
    out = []
    for node in graph.nodes:
        entry = ks.get(iu_label(node.id, node.concept)) or by_id.get(node.id) or {}
        out.append(state_value(entry.get("state") if isinstance(entry, Mapping) else None))
    return out


def _pairs(conversation: Sequence[Any]) -> list[tuple[str, str]]:
    """(learner message, tutor reply) per turn; a message without its reply gets ""."""
    pairs: list[tuple[str, str]] = []
    for entry in conversation:
        role, text = (entry[0], entry[1]) if isinstance(entry, (list, tuple)) else (entry.get("role"), entry.get("content"))
        if role == "user":
            pairs.append((str(text or ""), ""))
        elif role == "assistant" and pairs and not pairs[-1][1]:
            pairs[-1] = (pairs[-1][0], str(text or ""))
    return pairs


def record_facts(record: Mapping[str, Any], graph: IUGraph, session_id: str = "") -> SessionFacts:
    """The audit's facts of one recorded conversation: turns from ``conversation``, labels from
    ``iu_analysis_history`` and post-turn states from ``knowledge_state_history`` (structured
    records; a baseline has neither)."""
    history = list(record.get("knowledge_state_history") or [])
    analysis = list(record.get("iu_analysis_history") or [])
    structured = str(record.get("simulation_method") or "") == "structured" or bool(analysis)
    initial = _states(graph, record.get("initial_knowledge_state") or (history[0] if history else None))
    turns = []
    for k, (user, reply) in enumerate(_pairs(record.get("conversation") or []), start=1):
        signals = analysis[k - 1] if k - 1 < len(analysis) and isinstance(analysis[k - 1], list) else []
        post = _states(graph, history[k]) if k < len(history) else []
        turns.append(TurnFacts(k, user, reply, signals, post))
    sid = session_id or str(record.get("problem_id") or "record")
    return SessionFacts(sid, graph, initial, structured and bool(initial), str(record.get("problem") or ""),
                        str(record.get("reference_answer") or ""), tuple(turns))


__all__ = ["record_facts"]
