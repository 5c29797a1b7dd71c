"""Pydantic models of every structured model output, and JSON Schemas for constrained decoding.

``Model.json_schema()`` is the schema sent with a request: references inlined, every property
required, no extra properties, and no keywords that some constrained decoders reject (numeric and
length bounds, titles, defaults). The bounds still apply when :mod:`.parse` validates a reply.
Two deliberate exceptions: the learner replies carry ``maxLength`` decoding budgets on their free
text, and the extractor's schema is built per request from the item's graph
(:func:`signal_report_schema`: ids fixed slot by slot, labels as enums, bounded reasoning).
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from ray_knowsim.model.graph import IUGraph
from ray_knowsim.model.signals import AttemptType, ResponseRole, TeachingQuality

#: Decoding budgets for free text, in characters. A constrained decoder may not write more, so a
#: model that rambles inside a string (small models do: "1.1.1.1...") stops at the bound instead
#: of running into max_tokens. They are budgets for decoding, not validity rules: the parser does
#: not refuse a longer text from a model that was not constrained.
REASONING_MAX_CHARS = 240  # the extractor's two reasoning fields: a sentence or two each
MESSAGE_MAX_CHARS = 300  # the learner's message: 1-2 sentences (spec §12.7)
THOUGHT_MAX_CHARS = 300  # the learner's private thought

_DROP_KEYS = frozenset(
    {"title", "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems"}
)


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            return _inline(copy.deepcopy(target), defs)
        out = {}
        for key, value in node.items():
            if key in _DROP_KEYS or key == "$defs":
                continue
            if key == "properties":
                out[key] = {name: _inline(sub, defs) for name, sub in value.items()}
            else:
                out[key] = _inline(value, defs)
        if out.get("type") == "object" and "properties" in out:
            out.pop("description", None)  # a class docstring: notes for us, noise for the model
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_inline(x, defs) for x in node]
    return node


@lru_cache(maxsize=None)
def _decoding_schema_json(model: type[BaseModel]) -> str:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return json.dumps(_inline(raw, raw.get("$defs", {})))


def decoding_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A fresh copy every call (callers may edit it); generated once per model."""
    return json.loads(_decoding_schema_json(model))


class StructuredOutput(BaseModel):
    """Base of the output models: tolerant of extra keys (ignored), strict about the ones we read."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        return decoding_schema(cls)


# --- learner simulators ---------------------------------------------------------------------


def _bounded_text(schema: dict[str, Any], bounds: dict[str, int]) -> dict[str, Any]:
    for name, limit in bounds.items():
        if name in schema.get("properties", {}):
            schema["properties"][name]["maxLength"] = limit
    return schema


class _LearnerTurn(StructuredOutput):
    """Learner replies: the decoding schema bounds the free text (see ``MESSAGE_MAX_CHARS``)."""

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        return _bounded_text(decoding_schema(cls), {"thought": THOUGHT_MAX_CHARS, "message": MESSAGE_MAX_CHARS})


class UserTurn(_LearnerTurn):
    """The KnowSim simulator's reply; only ``message`` reaches the assistant (spec §12.3)."""

    thought: str = Field("", description="private reasoning, never shown to the assistant")
    message: str = Field(description="the text the assistant reads")
    attempt_verify: bool = Field(False, description="the message offers an answer and asks for a check")
    terminate: bool = Field(False, description="the learner ends the conversation")


class BaselineTurn(_LearnerTurn):
    """Zero-shot baseline simulator."""

    message: str
    terminate: bool = False


class BaselineCoTTurn(_LearnerTurn):
    """Baseline simulators that think first (zero-shot CoT, and CoT with a profile)."""

    thought: str = ""
    message: str
    terminate: bool = False


# --- signal extraction ----------------------------------------------------------------------


class SignalEntryOut(StructuredOutput):
    """One IU's entry as the extractor is asked to write it (spec §1.5). Replies are read through
    :func:`ray_knowsim.model.signals.normalize_entry`, which tolerates the known drifts."""

    id: str
    concept: str
    teaching_quality_reasoning: str
    teaching_quality: TeachingQuality
    user_attempt_reasoning: str
    user_attempt_type: AttemptType
    assistant_response_role: ResponseRole


class SignalReport(StructuredOutput):
    iu_analysis: list[SignalEntryOut]


TEACHING_QUALITIES: tuple[str, ...] = get_args(TeachingQuality)
ATTEMPT_TYPES: tuple[str, ...] = get_args(AttemptType)
RESPONSE_ROLES: tuple[str, ...] = get_args(ResponseRole)


def signal_report_schema(graph: IUGraph) -> dict[str, Any]:
    """The extractor's decoding schema for one item's graph: exactly one entry per IU, in graph
    order (array slot k is fixed to node k's ``id`` and ``concept`` through ``prefixItems`` with
    ``const``; ``minItems`` = ``maxItems`` = n and no further items), labels as enums, and the two
    reasoning fields bounded (``REASONING_MAX_CHARS``). xgrammar, vLLM's default structured-output
    backend, accepts every keyword used here. The parser checks the same facts on every reply
    (:func:`ray_knowsim.llm.parse.signals.parse_signal_report`), so a decoder that ignores the
    schema cannot slip drift through. Built once per graph (every turn of every session of an item
    asks with it); each call returns a fresh copy the caller may edit.
    """
    return json.loads(_signal_report_schema_json(tuple((node.id, node.concept) for node in graph.nodes)))


@lru_cache(maxsize=1024)
def _signal_report_schema_json(nodes: tuple[tuple[str, str], ...]) -> str:
    base = SignalReport.json_schema()
    listing = base["properties"]["iu_analysis"]
    entry = listing.pop("items")
    props = entry["properties"]
    props["teaching_quality"] = {"type": "string", "enum": list(TEACHING_QUALITIES)}
    props["user_attempt_type"] = {"type": "string", "enum": list(ATTEMPT_TYPES)}
    props["assistant_response_role"] = {"type": "string", "enum": list(RESPONSE_ROLES)}
    for name in ("teaching_quality_reasoning", "user_attempt_reasoning"):
        props[name] = {"type": "string", "maxLength": REASONING_MAX_CHARS}
    slots = []
    for node_id, concept in nodes:
        slot = copy.deepcopy(entry)
        slot["properties"]["id"] = {"type": "string", "const": node_id}
        slot["properties"]["concept"] = {"type": "string", "const": concept}
        slots.append(slot)
    n = len(slots)
    listing.update(prefixItems=slots, items=False, minItems=n, maxItems=n)
    return json.dumps(base)


# --- IU-graph extraction --------------------------------------------------------------------


class GraphNodeOut(StructuredOutput):
    id: str = Field(min_length=1)
    concept: str = Field(min_length=1)
    abstraction_level: float = Field(ge=0.0, le=1.0, description="1 = broad principle, 0 = problem-specific fact")
    description: str = Field(min_length=1)


class GraphEdgeOut(StructuredOutput):
    source: str = Field(alias="from", min_length=1, description="the prerequisite")
    target: str = Field(alias="to", min_length=1, description="the IU that needs it")
    delta_l: float = Field(description="abstraction_level(from) - abstraction_level(to)")
    reason: str = ""


class GraphExtraction(StructuredOutput):
    """The spec §1.2 graph as extraction output (parsed into :class:`~ray_knowsim.model.graph.IUGraph`)."""

    knowledge_areas: list[str] = Field(default_factory=list)
    nodes: list[GraphNodeOut] = Field(min_length=1)
    edges: list[GraphEdgeOut] = Field(default_factory=list)


# --- judges ---------------------------------------------------------------------------------


class InteractionRating(StructuredOutput):
    """Conversation-quality judge (spec §12.6); ``quality_score`` is the Interaction Quality (IQ)."""

    information_calibration: float = Field(ge=0.0, le=1.0, description="0 to 1")
    perceived_overload: float = Field(ge=0.0, le=1.0, description="0 to 1")
    quality_score: float = Field(ge=1.0, le=10.0, description="1 to 10")
    perceived_learning: float = Field(ge=1.0, le=10.0, description="1 to 10")
    ic_reasoning: str = ""
    po_reasoning: str = ""
    quality_reasoning: str = ""
    pl_reasoning: str = ""


TERMINATION_REASONS: dict[str, tuple[str, ...]] = {
    "math": ("problem_completion", "problem_shift", "circular_queries", "max_turns"),
    "expertqa": ("comprehension_satisfied", "unproductive_stalling", "max_turns"),
}
Progress = Literal["improving", "stalled", "regressing"]


def termination_reasons(task: str) -> tuple[str, ...]:
    try:
        return TERMINATION_REASONS[task]
    except KeyError:
        raise ValueError(f"no termination reasons for task {task!r}") from None


class TurnAnalysis(StructuredOutput):
    turn: int = Field(ge=1)
    summary: str = ""
    progress: Progress = "improving"


class TerminationJudgement(StructuredOutput):
    """Baseline stop point (1-based ``ending_turn``) and reason (spec §1.6, §12.6)."""

    turn_analysis: list[TurnAnalysis] = Field(default_factory=list)
    ending_turn: int = Field(ge=1)
    termination_reason: str

    task_reasons: ClassVar[dict[str, tuple[str, ...]]] = TERMINATION_REASONS

    @classmethod
    def json_schema_for(cls, task: str) -> dict[str, Any]:
        schema = cls.json_schema()
        schema["properties"]["termination_reason"] = {"type": "string", "enum": list(termination_reasons(task))}
        return schema


#: keywords outside the strictest subset that hosted providers share (OpenAI's strict mode, Gemini):
#: length and count bounds, and per-slot array schemas
_NON_PORTABLE = frozenset({"maxLength", "minLength", "minItems", "maxItems"})


def portable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` within the strictest common subset of hosted structured-output APIs, for
    endpoints that reject the rest (OpenAI's ``strict`` mode rejects length bounds and
    ``prefixItems``): length and count bounds are dropped, and an array with per-slot schemas
    (``prefixItems``) becomes one ``items`` schema whose ``const`` fields become enums of the
    slots' values. The constraint is looser, never different: the parser still checks every
    fact the full schema states (each IU exactly once, known labels)."""
    return _portable(copy.deepcopy(schema))


def _portable(node: Any) -> Any:
    if isinstance(node, list):
        return [_portable(x) for x in node]
    if not isinstance(node, dict):
        return node
    if "prefixItems" in node:
        slots = node.pop("prefixItems")
        node.pop("items", None)
        merged = copy.deepcopy(slots[0]) if slots else {}
        for name, prop in merged.get("properties", {}).items():
            if "const" in prop:
                values = [slot["properties"][name]["const"] for slot in slots]
                prop.pop("const")
                prop["enum"] = list(dict.fromkeys(values))
        node["items"] = merged
    return {k: _portable(v) for k, v in node.items() if k not in _NON_PORTABLE}


__all__ = [
    "portable_schema",
    "ATTEMPT_TYPES",
    "MESSAGE_MAX_CHARS",
    "REASONING_MAX_CHARS",
    "RESPONSE_ROLES",
    "TEACHING_QUALITIES",
    "THOUGHT_MAX_CHARS",
    "signal_report_schema",
    "BaselineCoTTurn",
    "BaselineTurn",
    "GraphEdgeOut",
    "GraphExtraction",
    "GraphNodeOut",
    "InteractionRating",
    "SignalEntryOut",
    "SignalReport",
    "StructuredOutput",
    "TERMINATION_REASONS",
    "TerminationJudgement",
    "TurnAnalysis",
    "UserTurn",
    "decoding_schema",
    "termination_reasons",
]
