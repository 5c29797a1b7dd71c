"""Reasoning ("thinking") text of reasoning models, kept out of transcripts.

Open reasoning models (Qwen3, DeepSeek-R1 and their distills, ...) write their reasoning inside
``<think>...</think>`` in the answer when the server does not split it out; some chat templates
open the block in the prompt, so the answer starts inside it and only ``</think>`` appears; an
answer cut short by the token budget leaves a block unterminated. None of it is the answer.
"""

from __future__ import annotations

import re

_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)


def strip_thinking(text: str) -> tuple[str, str]:
    """``(answer, reasoning)``: every ``<think>...</think>`` block removed from ``text``; a
    ``</think>`` with no opening tag ends reasoning that began with the answer; an unterminated
    ``<think>`` runs to the end. The answer is stripped of surrounding whitespace when anything
    was removed; otherwise it is returned unchanged."""
    if "think" not in text.lower():
        return text, ""
    reasoning: list[str] = []
    first_open = _OPEN.search(text)
    first_close = _CLOSE.search(text)
    if first_close is not None and (first_open is None or first_close.start() < first_open.start()):
        reasoning.append(text[: first_close.start()])
        text = text[first_close.end():]
    out: list[str] = []
    pos = 0
    while True:
        m = _OPEN.search(text, pos)
        if m is None:
            out.append(text[pos:])
            break
        out.append(text[pos: m.start()])
        end = _CLOSE.search(text, m.end())
        if end is None:  # dangling: the rest is reasoning
            reasoning.append(text[m.end():])
            break
        reasoning.append(text[m.end(): end.start()])
        pos = end.end()
    if not reasoning:
        return text, ""
    answer = "".join(out).strip()
    return answer, "\n".join(r.strip() for r in reasoning if r.strip())


__all__ = ["strip_thinking"]
