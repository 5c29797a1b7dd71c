"""Pydantic models of every structured model output, and JSON Schemas for constrained decoding.

``Model.json_schema()`` is the schema sent with a request: references inlined, every property
required, no extra properties, and no keywords that some constrained decoders reject (numeric and
length bounds, titles, defaults). The bounds still apply when :mod:`.parse` validates a reply.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ray_knowsim.model.signals import AttemptType, ResponseRole, TeachingQuality

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


class UserTurn(StructuredOutput):
    """The KnowSim simulator's reply; only ``message`` reaches the assistant (spec §12.3)."""

    thought: str = Field("", description="private reasoning, never shown to the assistant")
    message: str = Field(description="the text the assistant reads")
    attempt_verify: bool = Field(False, description="the message offers an answer and asks for a check")
    terminate: bool = Field(False, description="the learner ends the conversation")


class BaselineTurn(StructuredOutput):
    """Zero-shot baseline simulator."""

    message: str
    terminate: bool = False


class BaselineCoTTurn(StructuredOutput):
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


__all__ = [
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
