"""Pydantic models of every structured model output, and JSON Schemas for constrained decoding.

``Model.json_schema()`` is the schema sent with a request: references inlined, every property
required, no extra properties, and no keywords that some constrained decoders reject (numeric and
length bounds, titles, defaults). The bounds still apply when :mod:`.parse` validates a reply.
The extractor's schema is built per request from the item's graph (:func:`signal_report_schema`:
ids fixed slot by slot, labels as enums).

Free text carries no length bound in the decoding schema (prompt set v3 on, spec §12.8): a
constrained decoder enforces ``maxLength`` by closing the string, so a bound cuts a private
thought, a rationale or a message in the middle of a sentence. Cost is bounded by each role's
``max_tokens`` instead, with one retry at the whole budget for a truncated answer (``sim/ask.py``);
sentence limits are instructions in the prompt. Prompt sets v1 and v2 were sent with character
bounds (:data:`V2_TEXT_BOUNDS`, :data:`V2_REASONING_MAX_CHARS`); their renderers still ask for
them, so an earlier run re-renders exactly what it sent.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar, Literal, Mapping, get_args

import orjson
from pydantic import BaseModel, ConfigDict, Field

from ray_knowsim.identity_memo import IdentityMemo
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.signals import AttemptType, ResponseRole, TeachingQuality

#: Character bounds that prompt sets v1 and v2 put on free text in the decoding schema (v3 has
#: none, see the module docstring). They were never validity rules: the parser does not refuse a
#: longer text from a model that was not constrained.
V2_TEXT_BOUNDS: Mapping[str, int] = MappingProxyType({"thought": 300, "message": 300})  # learner replies
V2_REASONING_MAX_CHARS = 240  # the extractor's two reasoning fields

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
    """A fresh copy every call (callers may edit it); generated once per model (the copy is
    decoded by orjson: every learner request asks for one)."""
    return orjson.loads(_decoding_schema_json(model))


class StructuredOutput(BaseModel):
    """Base of the output models: tolerant of extra keys (ignored), strict about the ones we read."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @classmethod
    def json_schema(cls, *, text_bounds: Mapping[str, int] | None = None) -> dict[str, Any]:
        """The decoding schema; ``text_bounds`` ({field: characters}) adds ``maxLength`` to those
        top-level string fields (only the re-rendered v1/v2 learner prompts ask for it)."""
        schema = decoding_schema(cls)
        for name, limit in (text_bounds or {}).items():
            if name in schema.get("properties", {}):
                schema["properties"][name]["maxLength"] = limit
        return schema

    @classmethod
    def shared_json_schema(cls, *, text_bounds: Mapping[str, int] | None = None) -> dict[str, Any]:
        """:meth:`json_schema` as ONE object per model and bounds, shared by every request that
        asks with it: READ-ONLY (as :func:`shared_signal_report_schema`). Every learner request
        carries one; decoding a fresh copy for each was ~1.5 us and a dozen objects for the
        garbage collector to track."""
        return _shared_json_schema(cls, tuple(sorted((text_bounds or {}).items())))


@lru_cache(maxsize=64)
def _shared_json_schema(model: type[StructuredOutput], bounds: tuple[tuple[str, int], ...]) -> dict[str, Any]:
    return share_json(model.json_schema(text_bounds=dict(bounds)))


#: a READ-ONLY object the request path shares -> its JSON as an orjson.Fragment
_SHARED_JSON = IdentityMemo(4096)


def share_json(obj: Any) -> Any:
    """Record ``obj`` as shared and read-only (a graph's decoding schema, its JSON dict) and
    return it: the HTTP client then writes it from bytes made once (:func:`shared_json_fragment`)
    instead of encoding it again in every request body (an extractor's schema was ~6 us of its
    ~20 us body). An object recorded here must never be changed."""
    _SHARED_JSON.put(obj, orjson.Fragment(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)))
    return obj


def shared_json_fragment(obj: Any) -> orjson.Fragment | None:
    """The JSON bytes of ``obj`` if it was recorded by :func:`share_json`, else None."""
    return _SHARED_JSON.get(obj)


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
    :func:`ray_knowsim.schema.signals.normalize_entry`, which tolerates the known drifts."""

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


def signal_report_schema(graph: IUGraph, *, reasoning_max_chars: int | None = None) -> dict[str, Any]:
    """The extractor's decoding schema for one item's graph: exactly one entry per IU, in graph
    order (array slot k is fixed to node k's ``id`` and ``concept`` through ``prefixItems`` with
    ``const``; ``minItems`` = ``maxItems`` = n and no further items) and labels as enums; the two
    reasoning fields are unbounded unless ``reasoning_max_chars`` is given (prompt sets v1/v2
    re-rendered, :data:`V2_REASONING_MAX_CHARS`). xgrammar, vLLM's default structured-output
    backend, accepts every keyword used here. The parser checks the same facts on every reply
    (:func:`ray_knowsim.llm.parse.signals.parse_signal_report`), so a decoder that ignores the
    schema cannot slip drift through. Built once per graph (every turn of every session of an item
    asks with it); each call returns a fresh copy the caller may edit.
    """
    nodes = tuple((node.id, node.concept) for node in graph.nodes)
    return orjson.loads(_signal_report_schema_json(nodes, reasoning_max_chars))


def shared_signal_report_schema(graph: IUGraph, *, reasoning_max_chars: int | None = None) -> dict[str, Any]:
    """:func:`signal_report_schema`'s schema as ONE object per graph, shared by every request that
    asks with it: READ-ONLY (the request path only reads it: the HTTP body encodes it, a portable
    subset is made from a deep copy, cache keys serialise it). Decoding a fresh copy for each
    extractor request (~400 objects for a 14-IU graph) was ~0.1 ms of CPU per request plus the
    garbage collections those objects drive (docs/performance.md); the extractor's renderer asks
    for this one. Callers that edit a schema use :func:`signal_report_schema`."""
    return _shared_signal_report_schema(tuple((node.id, node.concept) for node in graph.nodes), reasoning_max_chars)


@lru_cache(maxsize=1024)
def _shared_signal_report_schema(nodes: tuple[tuple[str, str], ...], reasoning_max_chars: int | None) -> dict[str, Any]:
    return share_json(orjson.loads(_signal_report_schema_json(nodes, reasoning_max_chars)))


@lru_cache(maxsize=1024)
def _signal_report_schema_json(nodes: tuple[tuple[str, str], ...], reasoning_max_chars: int | None) -> str:
    base = SignalReport.json_schema()
    listing = base["properties"]["iu_analysis"]
    entry = listing.pop("items")
    props = entry["properties"]
    props["teaching_quality"] = {"type": "string", "enum": list(TEACHING_QUALITIES)}
    props["user_attempt_type"] = {"type": "string", "enum": list(ATTEMPT_TYPES)}
    props["assistant_response_role"] = {"type": "string", "enum": list(RESPONSE_ROLES)}
    for name in ("teaching_quality_reasoning", "user_attempt_reasoning"):
        props[name] = {"type": "string"}
        if reasoning_max_chars is not None:
            props[name]["maxLength"] = reasoning_max_chars
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
    """The spec §1.2 graph as extraction output (parsed into :class:`~ray_knowsim.schema.graph.IUGraph`)."""

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
    "RESPONSE_ROLES",
    "TEACHING_QUALITIES",
    "V2_REASONING_MAX_CHARS",
    "V2_TEXT_BOUNDS",
    "shared_signal_report_schema",
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
