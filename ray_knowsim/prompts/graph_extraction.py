"""Renderer for IU-graph extraction (offline step; the shipped caches replace it, spec §12.1).

:func:`graph_extraction_plan` is the spec's retry ladder: one normal attempt at temperature 0.2,
then a "JSON only" variant and finally a compact (<= 12 nodes) variant, each at temperature 0
under a growing token budget.
"""

from __future__ import annotations

from typing import Literal

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.outputs import GraphExtraction
from ray_knowsim.schema.items import Item
from ray_knowsim.prompts.request import NO_REFERENCE, build_request
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS, load_template

GraphAttempt = Literal["normal", "json_only", "compact"]
GRAPH_TEMPERATURE = 0.2
GRAPH_RETRY_TEMPERATURE = 0.0
GRAPH_MAX_TOKENS = 8192


def graph_template_name(task: str) -> str:
    return "graph_math" if task == "math" else "graph_open"


def graph_extraction_plan(max_tokens: int = GRAPH_MAX_TOKENS) -> list[tuple[GraphAttempt, float, int]]:
    """(attempt, temperature, max_tokens) in the order to try them until one parses with nodes."""
    ladder = (max_tokens, min(max(2 * max_tokens, 8192), 32768), 32768)
    plan: list[tuple[GraphAttempt, float, int]] = [("normal", GRAPH_TEMPERATURE, max_tokens)]
    for attempt in ("json_only", "compact"):
        plan.extend((attempt, GRAPH_RETRY_TEMPERATURE, budget) for budget in ladder)
    return plan


def render_graph_extraction(
    item: Item,
    *,
    attempt: GraphAttempt = "normal",
    temperature: float | None = None,
    max_tokens: int = GRAPH_MAX_TOKENS,
    seed: int | None = None,
    request_id: str = "",
    prompts: str = DEFAULT_PROMPTS,
) -> ChatRequest:
    """Ask for the item's IU graph in the spec §1.2 format (math or open-ended variant)."""
    if attempt not in ("normal", "json_only", "compact"):
        raise ValueError(f"unknown graph extraction attempt {attempt!r}")
    tpl = load_template(graph_template_name(item.task), prompts)
    meta = item.metadata or {}
    field = " / ".join(str(x) for x in (meta.get("field"), meta.get("specific_field")) if x) or "(not stated)"
    facts = {
        "task": item.task,
        "item_id": item.id,
        "question": item.question,
        "reference_answer": item.reference_answer,
        "field": field,
        "attempt": attempt,
    }
    values = {
        "question": item.question,
        "reference_answer": item.reference_answer or NO_REFERENCE,
        "field": field,
        "suffix": "" if attempt == "normal" else "\n" + tpl.section(f"suffix_{attempt}") + "\n",
    }
    if temperature is None:
        temperature = GRAPH_TEMPERATURE if attempt == "normal" else GRAPH_RETRY_TEMPERATURE
    return build_request(tpl, values, facts, role="graph_extractor", temperature=temperature, max_tokens=max_tokens,
                         seed=seed, request_id=request_id, output=GraphExtraction)
