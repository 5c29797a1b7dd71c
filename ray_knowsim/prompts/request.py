"""The one place a rendered template becomes a :class:`ChatRequest`.

Every renderer fills a template's ``system`` section (static instructions) and, when the template
has one, its ``user`` section (per-session facts, then the transcript, then per-turn facts), and
hands the offline test double its facts out of band. The facts always name the template, its
version and the role, so the offline model can answer any prompt set.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.items import Item
from ray_knowsim.schema.outputs import V2_REASONING_MAX_CHARS, V2_TEXT_BOUNDS, StructuredOutput, shared_json_fragment
from ray_knowsim.schema.roles import ROLE_DEFAULTS
from ray_knowsim.prompts.templates import Template, in_prompt_set, load_template, version_number
from ray_knowsim.prompts.views import DEFAULT_SPEAKERS


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
    text_bounds: Mapping[str, int] | None = None,
    chat: Iterable[Mapping[str, str]] = (),
) -> ChatRequest:
    """System message, then the ``user`` section if the template has one, then ``chat`` messages.

    ``values`` may hold more names than the template uses (one renderer serves every prompt set);
    a name the template needs and ``values`` lacks is an error. ``context`` is filled empty unless
    given: v1 templates keep the slot of the old in-prompt block, and the facts travel out of band.
    ``temperature`` and ``max_tokens`` default to the role's (:data:`~ray_knowsim.schema.roles.ROLE_DEFAULTS`;
    a run's settings replace them before a request is sent).
    ``text_bounds`` puts character bounds into ``output``'s schema (:func:`legacy_text_bounds`).
    """
    if temperature is None or max_tokens is None:
        if role not in ROLE_DEFAULTS:
            raise ValueError(f"role {role!r} has no defaults: give temperature and max_tokens")
        defaults = ROLE_DEFAULTS[role]
        temperature = defaults.temperature if temperature is None else temperature
        max_tokens = defaults.max_tokens if max_tokens is None else max_tokens
    if output is not None:  # a fixed output model: its (shared, read-only) schema, under its name
        schema, schema_name = output.shared_json_schema(text_bounds=text_bounds), output.__name__
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
        json_schema=_own(schema),
        schema_name=schema_name,
        prompt_version=tpl.prompt_version,
        request_id=request_id,
        offline_facts={"template": tpl.name, "version": tpl.version, "role": role, **facts},
    )


def _own(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The request's schema: a shared read-only one as it is (so the HTTP client writes it from
    its bytes made once, :func:`~ray_knowsim.schema.outputs.share_json`), any other one copied."""
    if schema is None:
        return None
    return schema if shared_json_fragment(schema) is not None else dict(schema)


#: the newest prompt set whose decoding schemas bound free text by characters; from v3 on, the
#: role's token budget bounds cost and nothing cuts a thought or a message mid-sentence (spec §12.8)
LAST_TEXT_BOUNDED_SET = 2


def legacy_text_bounds(tpl: Template) -> dict[str, int]:
    """The learner reply's character bounds for ``tpl``: v1/v2's (re-rendered as sent), else none."""
    return dict(V2_TEXT_BOUNDS) if version_number(tpl.version) <= LAST_TEXT_BOUNDED_SET else {}


def legacy_reasoning_bound(tpl: Template) -> int | None:
    """The extractor rationales' character bound for ``tpl``: v1/v2's, else none."""
    return V2_REASONING_MAX_CHARS if version_number(tpl.version) <= LAST_TEXT_BOUNDED_SET else None


def speakers(tpl: Template, defaults: Mapping[str, str] = DEFAULT_SPEAKERS) -> dict[str, str]:
    """What a transcript calls each speaker: the template's ``speaker_user`` / ``speaker_assistant``
    sections (v3: the names its own instructions use), else the older prompt sets' ``defaults``."""
    return {"user": section_or(tpl, "speaker_user", defaults["user"]),
            "assistant": section_or(tpl, "speaker_assistant", defaults["assistant"])}


#: what the prompt sets before v3 called every task
LEGACY_TASK_NOUN = "problem"


def shared_fragments(task: str, prompts: str) -> dict[str, str]:
    """``task_noun`` and ``opening_rule`` from the ``common`` template of prompt set ``prompts``:
    what the prompts call the task, and the one text every learner simulator gets about stating
    it in the opening (spec §12.8). Sets before v3 have neither (the noun was always "problem")."""
    if not in_prompt_set("common", prompts):
        return {"task_noun": LEGACY_TASK_NOUN, "opening_rule": ""}
    common = load_template("common", prompts)
    noun = common.section(f"noun_{task}")
    return {"task_noun": noun, "opening_rule": common.fill("opening", {"task_noun": noun})}


def item_facts(item: Item) -> dict[str, Any]:
    """The offline facts naming the item, which every learner and judge prompt starts with."""
    return {"task": item.task, "item_id": item.id, "problem": item.question}


def section_or(tpl: Template, key: str, default: str) -> str:
    """A template fragment when this version has it, else ``default`` (older prompt sets)."""
    return tpl.sections.get(key, default)


__all__ = [
    "build_request", "item_facts", "legacy_reasoning_bound", "legacy_text_bounds", "section_or", "shared_fragments", "speakers",
]
