"""The one place a rendered template becomes a :class:`ChatRequest`.

Every renderer fills a template's ``system`` section (static instructions) and, when the template
has one, its ``user`` section (per-session facts, then the transcript, then per-turn facts), and
hands the offline test double its facts out of band. The facts always name the template, its
version and the role, so the offline model can answer any prompt set.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ray_knowsim.model.chat import ChatRequest
from ray_knowsim.model.items import Item
from ray_knowsim.model.outputs import StructuredOutput
from ray_knowsim.model.roles import ROLE_DEFAULTS
from ray_knowsim.prompts.templates import Template


#: fillers for a fact an item or a caller does not have (the prompt says so instead of a blank)
NO_REFERENCE = "(No reference answer provided.)"
NO_LEVEL = "(not stated)"

def build_request(
    tpl: Template,
    values: Mapping[str, Any],
    facts: Mapping[str, Any],
    *,
    role: str,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    request_id: str = "",
    schema: Mapping[str, Any] | None = None,
    schema_name: str | None = None,
    output: type[StructuredOutput] | None = None,
    chat: Iterable[Mapping[str, str]] = (),
) -> ChatRequest:
    """System message, then the ``user`` section if the template has one, then ``chat`` messages.

    ``values`` may hold more names than the template uses (one renderer serves every prompt set);
    a name the template needs and ``values`` lacks is an error. ``context`` is filled empty unless
    given: v1 templates keep the slot of the old in-prompt block, and the facts travel out of band.
    ``temperature`` and ``max_tokens`` default to the role's (:data:`~ray_knowsim.model.roles.ROLE_DEFAULTS`;
    a run's settings replace them before a request is sent).
    """
    if temperature is None or max_tokens is None:
        if role not in ROLE_DEFAULTS:
            raise ValueError(f"role {role!r} has no defaults: give temperature and max_tokens")
        defaults = ROLE_DEFAULTS[role]
        temperature = defaults.temperature if temperature is None else temperature
        max_tokens = defaults.max_tokens if max_tokens is None else max_tokens
    if output is not None:  # a fixed output model: its schema, under its name
        schema, schema_name = output.json_schema(), output.__name__
    values = {"context": "", **values}
    messages = [{"role": "system", "content": tpl.fill("system", values)}]
    if "user" in tpl.sections:
        messages.append({"role": "user", "content": tpl.fill("user", values)})
    messages.extend({"role": m["role"], "content": m["content"]} for m in chat)
    return ChatRequest(
        messages=tuple(messages),
        role=role,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        json_schema=dict(schema) if schema is not None else None,
        schema_name=schema_name,
        prompt_version=tpl.prompt_version,
        request_id=request_id,
        offline_facts={"template": tpl.name, "version": tpl.version, "role": role, **facts},
    )


def item_facts(item: Item) -> dict[str, Any]:
    """The offline facts naming the item, which every learner and judge prompt starts with."""
    return {"task": item.task, "item_id": item.id, "problem": item.question}


def section_or(tpl: Template, key: str, default: str) -> str:
    """A template fragment when this version has it, else ``default`` (older prompt sets)."""
    return tpl.sections.get(key, default)


__all__ = ["build_request", "item_facts", "section_or"]
