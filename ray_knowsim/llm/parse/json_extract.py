"""Find the JSON in a model reply (spec §12.5).

Strip a fenced block, take the first brace-balanced object (aware of strings and escapes), and on
a decoding error retry after doubling backslashes that are not valid JSON escapes (LaTeX such as
``\\sqrt``). LaTeX commands that happen to start with a valid escape letter (``\\frac``,
``\\times``, ``\\neq``) are doubled too, since decoding them would silently turn them into
control characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_VALID_AFTER_BACKSLASH = set('"\\/')
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
#: LaTeX commands that begin with a letter JSON accepts as an escape (b f n r t)
LATEX_SHADOWED = frozenset(
    """
    backslash bar beta because begin bf big bigcap bigcup bigg bigl bigr bigoplus bigotimes bigwedge
    bigvee binom blacksquare bm bmod boldsymbol bot boxed brace breve bullet
    fbox flat footnotesize forall frac frown
    nabla natural nearrow neg neq newline ngeq nleq nmid nolimits normalsize not notin nsubseteq nu nexists
    rangle rbrace rbrack rceil rfloor rho right rightarrow rightharpoonup rm root rvert
    tan tanh tau tbinom text textbf textit textnormal textrm textstyle texttt tfrac therefore theta
    thinspace tilde times tiny to top triangle triangleleft triangleright tt
    """.split()
)
_LETTERS = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class JsonExtraction:
    value: Any = None
    repairs: tuple[str, ...] = ()
    error: str | None = None  # None when a value was decoded


def balanced_end(text: str, start: int) -> int | None:
    """Index just past the bracket closing the one at ``start`` (string-aware), or None."""
    opening = text[start]
    closing = "}" if opening == "{" else "]"
    depth, in_string, escaped = 0, False, False
    for k in range(start, len(text)):
        c = text[k]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return k + 1 if c == closing else None
    return None


def repair_backslashes(text: str) -> str:
    """Double every backslash that does not start a valid JSON escape, and those starting a known
    LaTeX command that JSON would misread as an escape (``\\frac`` -> ``\\\\frac``)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1] if i + 1 < n else ""
        if nxt in _VALID_AFTER_BACKSLASH and nxt:
            out.append(text[i : i + 2])
            i += 2
        elif nxt == "u" and _HEX4.fullmatch(text[i + 2 : i + 6] or ""):
            out.append(text[i : i + 6])
            i += 6
        elif nxt and nxt in "bfnrt":
            word = _LETTERS.match(text, i + 1)
            if word and word.group(0) in LATEX_SHADOWED:
                out.append("\\\\")
                i += 1
            else:
                out.append(text[i : i + 2])
                i += 2
        else:
            out.append("\\\\")
            i += 1
    return "".join(out)


def _shadowed_latex(text: str) -> bool:
    for m in re.finditer(r"(\\+)([bfnrt][A-Za-z]*)", text):
        if len(m.group(1)) % 2 == 1 and m.group(2) in LATEX_SHADOWED:
            return True
    return False


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def decode_json(candidate: str) -> tuple[Any, tuple[str, ...], str | None]:
    repairs: list[str] = []
    if _shadowed_latex(candidate):
        candidate = repair_backslashes(candidate)
        repairs.append("latex_backslashes")
    try:
        return json.loads(candidate), tuple(repairs), None
    except json.JSONDecodeError as exc:
        first_error = exc
    if "latex_backslashes" not in repairs:
        fixed = repair_backslashes(candidate)
        if fixed != candidate:
            try:
                return json.loads(fixed), ("latex_backslashes",), None
            except json.JSONDecodeError:
                candidate = fixed
                repairs.append("latex_backslashes")
    no_commas = _TRAILING_COMMA.sub(r"\1", candidate)
    if no_commas != candidate:
        try:
            return json.loads(no_commas), tuple(repairs) + ("trailing_commas",), None
        except json.JSONDecodeError:
            pass
    e = first_error
    return None, (), f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"


def extract_json(text: str | None, *, allow_array: bool = False) -> JsonExtraction:
    """The first JSON object in a reply (or a top-level array when ``allow_array``)."""
    if text is None or not text.strip():
        return JsonExtraction(error="the reply is empty")
    repairs: list[str] = []
    body = text
    fence = next((m for m in _FENCE.finditer(text) if "{" in m.group(1) or "[" in m.group(1)), None)
    if fence is not None:
        body = fence.group(1)
        repairs.append("fenced_block")
    stripped = body.lstrip()
    if allow_array and stripped.startswith("["):
        start = len(body) - len(stripped)
    else:
        start = body.find("{")
        if start < 0:
            return JsonExtraction(repairs=tuple(repairs), error="no JSON object in the reply")
    end = balanced_end(body, start)
    if end is None:
        return JsonExtraction(repairs=tuple(repairs), error="the JSON object is not closed (reply truncated?)")
    if body[:start].strip() or body[end:].strip():
        repairs.append("surrounding_text")
    value, more, error = decode_json(body[start:end])
    if error is not None:
        return JsonExtraction(repairs=tuple(repairs), error=error)
    return JsonExtraction(value=value, repairs=tuple(repairs) + more)
