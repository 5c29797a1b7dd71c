"""Find the JSON in a model reply (spec §12.5), and read it as the model meant it.

Strip a fenced block, take the first brace-balanced object (aware of strings and escapes), then
**decode first**: a reply that is valid JSON is read exactly as JSON reads it, and only two kinds of
change follow, each recorded in ``repairs``:

* **before decoding, only what JSON refuses**: a backslash that starts no JSON escape (``\\sqrt``,
  ``\\alpha``, ``\\(``) can only be a backslash, so it is kept as one (``literal_backslashes``);
  then trailing commas, then raw control characters inside strings (a raw line break is a line
  break). None of these can change a reply that decodes, because they are tried only when it does not.
* **after decoding, only what the model cannot have meant**: JSON reads ``\\frac`` as a form feed
  and ``rac``, ``\\beta`` as a backspace and ``eta``. A chat message never holds a form feed, a
  backspace or a lone carriage return before letters, so those get their backslash back
  (``latex_from_escapes``). A newline or tab is meant, unless what follows can only be LaTeX: a
  known command whose rest is no word a sentence or formula starts with (``\\theta`` = tab + "heta",
  ``\\nabla`` = newline + "abla"), or a command that could be a word (``\\nu`` = newline + "u",
  ``\\tan`` = tab + "an") standing inside a math span (``$...$``, ``\\(...\\)``, ``\\[...\\]``) or
  directly before a ``{`` argument. So a newline before "u = x+1" stays a newline.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

#: a fence's opening: three backticks, a language tag, spaces or tabs, at most one line break
_FENCE_OPEN = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?")
_VALID_AFTER_BACKSLASH = frozenset('"\\/bfnrt')
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
#: LaTeX commands that begin with a letter JSON accepts as an escape (b f n r t): decoded, they
#: become a control character followed by the rest of the name
LATEX_SHADOWED = frozenset(
    """
    backslash bar beta because begin bf big bigcap bigcup bigg bigl bigr bigoplus bigotimes bigwedge
    bigvee binom blacksquare bm bmod boldsymbol bot boxed brace breve bullet
    fbox flat footnotesize forall frac frown
    nabla natural ne nearrow neg neq newline nexists ngeq ngtr ni nleq nless nmid nolimits normalsize not
    notin nparallel nsubseteq nu
    rangle rbrace rbrack rceil rfloor rho right rightarrow rightharpoonup rm root rvert
    tan tanh tau tbinom text textbf textit textnormal textrm textstyle texttt tfrac therefore theta
    thinspace tilde times tiny to top triangle triangleleft triangleright tt
    """.split()
)
#: commands that start with ``\\n`` or ``\\t`` whose rest is a word, an abbreviation or a variable a
#: line (after a newline) or a cell (after a tab) may well start with: read as LaTeX only in math
#: or before a ``{`` argument
NEWLINE_OR_TAB_WORDS = frozenset({"ne", "neg", "neq", "nexists", "ni", "nmid", "nu", "tan", "top", "tt"})
#: a control character a chat message never holds before letters, and the escape letter it came from
_NEVER_BEFORE_LETTERS = {"\b": "b", "\f": "f", "\r": "r"}
_MEANT_BEFORE_LETTERS = {"\n": "n", "\t": "t"}
_CONTROL_THEN_LETTERS = re.compile(r"([\b\f\r\n\t])([A-Za-z]+)")
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


@dataclass(frozen=True)
class JsonExtraction:
    value: Any = None
    repairs: tuple[str, ...] = ()
    error: str | None = None  # None when a value was decoded


def fenced_blocks(text: str) -> Iterator[str]:
    """The bodies of the text's fenced blocks, in order: from each opening (:data:`_FENCE_OPEN`) to
    the next three backticks, the search going on after them; an opening never closed ends it.

    Exactly the groups of ``re.finditer(r"```[A-Za-z0-9_-]*[ \\t]*\\n?(.*?)```", text, re.DOTALL)``
    (tests/llm/test_fast_paths.py): an opening's tag holds no backtick, so the lazy body ends at the
    first backticks after the whole opening, and when there are none no later opening closes
    either. Found by ``str.find`` instead of that lazy scan, which cost ~8 ns a character (76 us
    for a 9 KB fenced reply, more than decoding it)."""
    pos = 0
    while (m := _FENCE_OPEN.search(text, pos)) is not None:
        close = text.find("```", m.end())
        if close < 0:
            return
        yield text[m.end() : close]
        pos = close + 3


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


def literal_backslashes(text: str) -> tuple[str, list[str]]:
    """``text`` with every backslash that starts no JSON escape doubled (it can only be a
    backslash: ``\\sqrt``, ``\\alpha``, ``\\(``, ``\\u`` without four hex digits), and what those
    backslashes started (``["\\\\sqrt", "\\\\("]``). Valid escapes are left to the decoder."""
    out: list[str] = []
    kept: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1] if i + 1 < n else ""
        if nxt and nxt in _VALID_AFTER_BACKSLASH:
            out.append(text[i : i + 2])
            i += 2
        elif nxt == "u" and _HEX4.fullmatch(text[i + 2 : i + 6]):
            out.append(text[i : i + 6])
            i += 6
        else:
            word = re.match(r"[A-Za-z]+", text[i + 1 :])
            kept.append("\\" + (word.group(0) if word else nxt))
            out.append("\\\\")
            i += 1
    return "".join(out), kept


def repair_backslashes(text: str) -> str:
    """``text`` with the backslashes that start no JSON escape doubled (see :func:`literal_backslashes`)."""
    return literal_backslashes(text)[0]


def _in_math(s: str, at: int) -> bool:
    """Whether position ``at`` of the decoded string ``s`` lies inside a ``$..$``, ``\\(..\\)`` or ``\\[..\\]`` span."""
    before = s[:at]
    if (before.count("$") - before.count("\\$")) % 2 == 1:
        return True
    for open_, close in (("\\(", "\\)"), ("\\[", "\\]")):
        k = before.rfind(open_)
        if k >= 0 and before.find(close, k) < 0:
            return True
    return False


def _latex_meant(s: str, m: re.Match[str]) -> str | None:
    """The LaTeX command the control character of ``m`` stands for, when only LaTeX can be meant."""
    control, letters = m.group(1), m.group(2)
    if control in _NEVER_BEFORE_LETTERS:
        word = _NEVER_BEFORE_LETTERS[control] + letters
        # a lone carriage return (not part of a line break) before a command's rest is no text
        return word if control != "\r" or word in LATEX_SHADOWED else None
    word = _MEANT_BEFORE_LETTERS[control] + letters
    if word not in LATEX_SHADOWED:
        return None
    if word not in NEWLINE_OR_TAB_WORDS:
        return word
    if s[m.end() : m.end() + 1] == "{" or _in_math(s, m.start()):
        return word
    return None


def restore_latex(s: str) -> tuple[str, list[str]]:
    """``s`` with the control characters that can only have been LaTeX written back as backslashes
    (see the module docstring), and the commands restored (``["\\\\frac", "\\\\theta"]``)."""
    restored: list[str] = []
    out: list[str] = []
    last = 0
    for m in _CONTROL_THEN_LETTERS.finditer(s):
        word = _latex_meant(s, m)
        if word is None:
            continue
        out.append(s[last : m.start()])
        out.append("\\" + word)
        restored.append("\\" + word)
        last = m.end()
    if not restored:
        return s, []
    out.append(s[last:])
    return "".join(out), restored


def _restore_all(value: Any, restored: list[str]) -> Any:
    """``value`` (decoded JSON) with :func:`restore_latex` applied to every string, keys included."""
    if isinstance(value, str):
        fixed, got = restore_latex(value)
        restored.extend(got)
        return fixed
    if isinstance(value, list):
        return [_restore_all(v, restored) for v in value]
    if isinstance(value, dict):
        return {_restore_all(k, restored): _restore_all(v, restored) for k, v in value.items()}
    return value


def _loads(text: str, *, strict: bool = True) -> tuple[bool, Any]:
    try:
        return True, json.loads(text, strict=strict)
    except json.JSONDecodeError:
        return False, None


#: an escape that can decode to one of the control characters :func:`restore_latex` reads
#: (``\\b \\f \\n \\r \\t``, or a ``\\u00XX`` below U+0020): a strictly decoded text without one
#: holds none of them (strict JSON has no raw control characters in strings), so the restoration has
#: nothing to do. Other ``\\uXXXX`` escapes (``\\u2019``, ``\\u00e9``: a model's or json.dumps'
#: ASCII-only non-ASCII) decode to printable text and no longer send the value through the walk.
_CONTROL_ESCAPE = re.compile(r"\\(?:[bfnrt]|u00[01])")
_DECODER = json.JSONDecoder()


def _restored(value: Any, repairs: list[str]) -> Any:
    restored: list[str] = []
    value = _restore_all(value, restored)
    if restored:
        repairs.append("latex_from_escapes:" + ",".join(dict.fromkeys(restored)))
    return value


def decode_json(candidate: str) -> tuple[Any, tuple[str, ...], str | None]:
    """(value, repairs, error) of one JSON text, decoded first (see the module docstring)."""
    try:
        value = json.loads(candidate)
        repairs: list[str] = []
    except json.JSONDecodeError as exc:
        first_error = exc
        decoded, value, repairs = _decode_refused(candidate)
        if not decoded:
            e = first_error
            return None, (), f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        return _restored(value, repairs), tuple(repairs), None  # mended text may hold raw control characters
    if _CONTROL_ESCAPE.search(candidate):
        value = _restored(value, repairs)
    return value, tuple(repairs), None


def _decoded_at(body: str, start: int) -> tuple[Any, int] | None:
    """The JSON value that starts at ``body[start]`` and where it ends, when the text there is
    valid JSON (C speed); None when it is not (then the string-aware scan and the repairs read it).
    Valid JSON ends exactly where :func:`balanced_end` says and decodes as :func:`decode_json`
    decodes it, so this is only a faster way to the same answer."""
    try:
        return _DECODER.raw_decode(body, start)
    except json.JSONDecodeError:
        return None


def _decode_refused(text: str) -> tuple[bool, Any, list[str]]:
    """What JSON refused, mended one kind at a time (each kept only while decoding still fails)."""
    repairs: list[str] = []
    fixed, kept = literal_backslashes(text)
    if kept:
        text = fixed
        repairs.append("literal_backslashes:" + ",".join(dict.fromkeys(kept)))
        ok, value = _loads(text)
        if ok:
            return True, value, repairs
    no_commas = _TRAILING_COMMA.sub(r"\1", text)
    if no_commas != text:
        ok, value = _loads(no_commas)
        if ok:
            return True, value, repairs + ["trailing_commas"]
        ok, value = _loads(no_commas, strict=False)
        if ok:
            return True, value, repairs + ["trailing_commas", "raw_control_characters"]
    ok, value = _loads(text, strict=False)
    if ok:
        return True, value, repairs + ["raw_control_characters"]
    return False, None, []


def extract_json(text: str | None, *, allow_array: bool = False) -> JsonExtraction:
    """The first JSON object in a reply (or a top-level array when ``allow_array``)."""
    if text is None or not text.strip():
        return JsonExtraction(error="the reply is empty")
    repairs: list[str] = []
    body = text
    fence = next((b for b in fenced_blocks(text) if "{" in b or "[" in b), None)
    if fence is not None:
        body = fence
        repairs.append("fenced_block")
    stripped = body.lstrip()
    if allow_array and stripped.startswith("["):
        start = len(body) - len(stripped)
    else:
        start = body.find("{")
        if start < 0:
            return JsonExtraction(repairs=tuple(repairs), error="no JSON object in the reply")
    fast = _decoded_at(body, start)
    end = fast[1] if fast is not None else balanced_end(body, start)
    if end is None:
        return JsonExtraction(repairs=tuple(repairs), error="the JSON object is not closed (reply truncated?)")
    if body[:start].strip() or body[end:].strip():
        repairs.append("surrounding_text")
    if fast is not None:
        latex: list[str] = []
        value = _restored(fast[0], latex) if _CONTROL_ESCAPE.search(body, start, end) else fast[0]
        return JsonExtraction(value=value, repairs=tuple(repairs + latex))
    value, more, error = decode_json(body[start:end])
    if error is not None:
        return JsonExtraction(repairs=tuple(repairs), error=error)
    return JsonExtraction(value=value, repairs=tuple(repairs) + more)
