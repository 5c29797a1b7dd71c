"""The machine-readable context block that closes every rendered prompt.

Each prompt ends with a fixed marker line and a fenced JSON object repeating the facts the prose
gives (role, template, problem, state, transcript, ...). A model reads the prose; the offline model
reads this block. Because the block travels inside the messages, the offline model answers the
real prompts through any transport (in process, or behind the OpenAI-compatible HTTP server).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

CONTEXT_MARKER = "### context (json)"
_FENCE = "```"


def context_block(facts: Mapping[str, Any]) -> str:
    """The marker line plus a fenced, compact, key-sorted-by-insertion JSON object."""
    body = json.dumps(facts, ensure_ascii=False, separators=(",", ":"))
    return f"{CONTEXT_MARKER}\n{_FENCE}json\n{body}\n{_FENCE}"


def _read_block(content: str) -> dict[str, Any] | None:
    at = content.rfind(CONTEXT_MARKER)
    if at < 0:
        return None
    rest = content[at + len(CONTEXT_MARKER) :]
    start = rest.find(_FENCE + "json\n")
    if start < 0:
        return None
    rest = rest[start + len(_FENCE) + len("json\n") :]
    end = rest.rfind("\n" + _FENCE)
    if end < 0:
        return None
    try:
        value = json.loads(rest[:end])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def read_context(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The context of a chat.

    A block in the system message wins (the assistant's prompt keeps it there, so text a learner
    echoes into the chat cannot hijack it); otherwise the last message carrying one (a retry
    follow-up has none, so the original prompt's block is found behind it).
    """
    if messages and messages[0].get("role") == "system":
        content = messages[0].get("content")
        if isinstance(content, str) and CONTEXT_MARKER in content:
            found = _read_block(content)
            if found is not None:
                return found
    for message in reversed(messages):
        content = message.get("content")
        if isinstance(content, str) and CONTEXT_MARKER in content:
            found = _read_block(content)
            if found is not None:
                return found
    return None
