"""Tolerant reading of model replies: find the JSON, repair the known drifts, validate, explain.

Every ``parse_*`` function returns a :class:`ParseResult`: either a value, or a named failure
reason (``<role>_empty``, ``<role>_invalid_json``, ``<role>_invalid_output``) with a precise
message that can be sent back to the model once (:func:`ray_knowsim.prompts.repair.build_retry`). Repairs that changed what
was read are listed in ``repairs`` and anything suspicious that was accepted in ``warnings``, so a
run records them instead of hiding them.

JSON extraction (spec §12.5): strip a fenced block, take the first brace-balanced object (aware of
strings and escapes), and on a decoding error retry after doubling backslashes that are not valid
JSON escapes (LaTeX such as ``\\sqrt``). LaTeX commands that happen to start with a valid escape
letter (``\\frac``, ``\\times``, ``\\neq``) are doubled too, since decoding them would silently
turn them into control characters.
"""

from __future__ import annotations

import json
import re
import warnings as pywarnings
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Iterable, TypeVar

from pydantic import ValidationError

from ray_knowsim.model.chat import ChatRequest
from ray_knowsim.model.outputs import (
    InteractionRating,
    TerminationJudgement,
    UserTurn,
    termination_reasons,
)
from ray_knowsim.model.graph import GraphError, GraphIndex, GraphMode, IUGraph, build_index, check_graph, parse_graph
from ray_knowsim.model.signals import SignalEntry, normalize_entry

T = TypeVar("T")

TQ_LABELS = ("well_explained", "shallow", "not_mentioned")


@dataclass(frozen=True)
class ParseResult(Generic[T]):
    value: T | None = None
    error: str | None = None  # named failure reason, e.g. "extractor_invalid_json"
    detail: str = ""  # what exactly is wrong (sent back to the model by prompts.repair.build_retry)
    repairs: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    raw: Any = None  # the decoded JSON, when there was one

    @property
    def ok(self) -> bool:
        return self.error is None


def _fail(role: str, kind: str, detail: str, repairs=(), raw=None) -> ParseResult:
    return ParseResult(error=f"{role}_{kind}", detail=detail, repairs=tuple(repairs), raw=raw)


# --- JSON extraction --------------------------------------------------------------------------

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


def _balanced_end(text: str, start: int) -> int | None:
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


def _decode(candidate: str) -> tuple[Any, tuple[str, ...], str | None]:
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
    end = _balanced_end(body, start)
    if end is None:
        return JsonExtraction(repairs=tuple(repairs), error="the JSON object is not closed (reply truncated?)")
    if body[:start].strip() or body[end:].strip():
        repairs.append("surrounding_text")
    value, more, error = _decode(body[start:end])
    if error is not None:
        return JsonExtraction(repairs=tuple(repairs), error=error)
    return JsonExtraction(value=value, repairs=tuple(repairs) + more)


def _validation_detail(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:8]:
        where = ".".join(str(x) for x in err["loc"]) or "(object)"
        parts.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - 8
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _rename(data: dict, canonical: str, aliases: Iterable[str], repairs: list[str]) -> None:
    if canonical in data:
        return
    for alias in aliases:
        if alias in data:
            data[canonical] = data.pop(alias)
            repairs.append(f"renamed:{alias}->{canonical}")
            return


# --- learner simulator ----------------------------------------------------------------------

_XML_TAG = r"<{tag}>(.*?)</{tag}>"


def _from_xml(text: str) -> dict | None:
    found = {}
    for tag in ("thought", "message", "attempt_verify", "terminate"):
        m = re.search(_XML_TAG.format(tag=tag), text, re.DOTALL | re.IGNORECASE)
        if m:
            found[tag] = m.group(1).strip()
    if "message" not in found:
        return None
    for flag in ("attempt_verify", "terminate"):
        if flag in found:
            found[flag] = found[flag].lower() in ("true", "yes", "1")
    return found


def parse_user_turn(text: str | None, *, role: str = "user_sim") -> ParseResult[UserTurn]:
    """A simulator reply (KnowSim or baseline). Legacy ``<message>`` tag replies are accepted."""
    ext = extract_json(text)
    repairs = list(ext.repairs)
    if ext.error is not None or not isinstance(ext.value, dict):
        xml = _from_xml(text or "")
        if xml is None:
            kind = "empty" if not (text or "").strip() else "invalid_json"
            return _fail(role, kind, ext.error or "the reply is not a JSON object", repairs)
        data, repairs = xml, ["xml_tags"]
    else:
        data = dict(ext.value)
    _rename(data, "message", ("response", "reply", "user_message", "text", "query"), repairs)
    _rename(data, "thought", ("thinking", "thoughts", "reasoning"), repairs)
    try:
        turn = UserTurn.model_validate(data)
    except ValidationError as exc:
        return _fail(role, "invalid_output", _validation_detail(exc), repairs, data)
    if not turn.message.strip():
        what = "thought-only reply (empty message)" if turn.thought.strip() else "empty message"
        return _fail(role, "empty", what, repairs, data)
    return ParseResult(value=turn, repairs=tuple(repairs), raw=data)


# --- signal extraction ----------------------------------------------------------------------


@dataclass(frozen=True)
class SignalAnalysis:
    """One turn's normalised signal list plus what did not match the graph.

    ``entries`` keeps the extractor's order and every entry (the rules need both: load sums follow
    list order, duplicates all count). IUs with no entry act as not_mentioned; they are listed in
    ``missing_ids`` and :meth:`complete` can add explicit placeholders for them.
    """

    entries: tuple[SignalEntry, ...]
    missing_ids: tuple[str, ...] = ()
    unknown_ids: tuple[str, ...] = ()
    duplicate_ids: tuple[str, ...] = ()
    entries_without_id: int = 0
    raw_entries: tuple[dict, ...] = field(default=(), repr=False)

    def complete(self) -> list[SignalEntry]:
        """Entries plus an explicit not_mentioned entry (empty evidence) for every missing IU."""
        extra = [SignalEntry(id=i, teaching_quality="not_mentioned") for i in self.missing_ids]
        return list(self.entries) + extra


def _signal_list(value: Any, repairs: list[str]) -> list | None:
    if isinstance(value, list):
        repairs.append("top_level_list")
        return value
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("iu_analysis"), list):
        return value["iu_analysis"]
    lists = [(k, v) for k, v in value.items() if isinstance(v, list) and any(isinstance(x, dict) for x in v)]
    if len(lists) == 1:
        repairs.append(f"renamed:{lists[0][0]}->iu_analysis")
        return lists[0][1]
    return None


def parse_signal_report(text: str | None, graph: IUGraph | GraphIndex, *, role: str = "extractor") -> ParseResult[SignalAnalysis]:
    """The extractor's per-turn report, normalised as spec §1.5 says, checked against the graph.

    Fails (``extractor_empty``) when no entry can be read: the spec retries only then. Entries for
    ids outside the graph, duplicates, entries without an id and unknown labels are kept (the
    rules define what they do) and reported as warnings.
    """
    index = graph if isinstance(graph, GraphIndex) else build_index(graph)
    ext = extract_json(text, allow_array=True)
    if ext.error is not None:
        kind = "empty" if not (text or "").strip() else "invalid_json"
        return _fail(role, kind, ext.error, ext.repairs)
    repairs = list(ext.repairs)
    raw_list = _signal_list(ext.value, repairs)
    if raw_list is None:
        return _fail(role, "invalid_output", 'expected an object with an "iu_analysis" list of entries', repairs, ext.value)
    dicts = [e for e in raw_list if isinstance(e, dict)]
    warnings: list[str] = []
    if len(dicts) != len(raw_list):
        warnings.append(f"dropped {len(raw_list) - len(dicts)} non-object entries")
    if not dicts:
        return _fail(role, "empty", "the iu_analysis list has no entries", repairs, ext.value)
    for raw in dicts:
        for alias in ("assistant_reasoning_role", "assistant_reason_role", "assistant_role", "assistant_response"):
            if alias in raw and "assistant_response_role" not in raw:
                repairs.append(f"renamed:{alias}->assistant_response_role")
                break
        if "user_attempt" in raw and "user_attempt_type" not in raw:
            repairs.append("renamed:user_attempt->user_attempt_type")
        if "teaching_quality" not in raw:
            repairs.append(f"teaching_quality_from_reasoning:{raw.get('id')}")
    entries = tuple(normalize_entry(raw) for raw in dicts)

    known = set(index.ids)
    seen: dict[str, int] = {}
    unknown: list[str] = []
    no_id = 0
    for e in entries:
        if e.id is None:
            no_id += 1
            continue
        seen[e.id] = seen.get(e.id, 0) + 1
        if e.id not in known and e.id not in unknown:
            unknown.append(e.id)
        if e.teaching_quality not in TQ_LABELS:
            warnings.append(f"{e.id}: unknown teaching_quality {e.teaching_quality!r} (acts as well_explained)")
    missing = tuple(i for i in index.ids if i not in seen)
    duplicates = tuple(i for i, c in seen.items() if c > 1)
    if missing:
        warnings.append(f"no entry for {len(missing)} IU(s), read as not_mentioned: {', '.join(missing)}")
    if unknown:
        warnings.append(f"entries for ids not in the graph: {', '.join(unknown)}")
    if duplicates:
        warnings.append(f"duplicate entries (the last one drives the state): {', '.join(duplicates)}")
    if no_id:
        warnings.append(f"{no_id} entries without an id (they cannot change any state)")
    analysis = SignalAnalysis(
        entries=entries,
        missing_ids=missing,
        unknown_ids=tuple(unknown),
        duplicate_ids=duplicates,
        entries_without_id=no_id,
        raw_entries=tuple(dicts),
    )
    return ParseResult(value=analysis, repairs=tuple(dict.fromkeys(repairs)), warnings=tuple(warnings), raw=ext.value)


# --- graph extraction -----------------------------------------------------------------------


def _salvage_nodes(text: str) -> dict | None:
    """From a truncated reply, a graph made of a complete ``nodes`` array and no edges (spec §12.1)."""
    m = re.search(r'"nodes"\s*:\s*\[', text)
    if not m:
        return None
    end = _balanced_end(text, m.end() - 1)
    if end is None:
        return None
    value, _, error = _decode(text[m.end() - 1 : end])
    if error is not None or not isinstance(value, list):
        return None
    return {"nodes": value, "edges": []}


def parse_graph_extraction(
    text: str | None, *, item_id: str = "", mode: GraphMode = "strict", role: str = "graph_extractor"
) -> ParseResult[IUGraph]:
    """An extracted IU graph, validated with the model layer's rules (cycles, dangling edges)."""
    ext = extract_json(text)
    repairs = list(ext.repairs)
    data = ext.value
    if ext.error is not None:
        data = _salvage_nodes(text or "")
        if data is None:
            kind = "empty" if not (text or "").strip() else "invalid_json"
            return _fail(role, kind, ext.error, repairs)
        repairs.append("salvaged_nodes_without_edges")
    if not isinstance(data, dict) or not data.get("nodes"):
        return _fail(role, "invalid_output", 'expected an object with a non-empty "nodes" list', repairs, data)
    _rename(data, "edges", ("prerequisite_pairs", "links"), repairs)
    if isinstance(data.get("edges"), list):
        for edge in data["edges"]:
            if isinstance(edge, dict):
                _rename(edge, "from", ("source", "prerequisite"), repairs)
                _rename(edge, "to", ("target", "dependent"), repairs)
    warnings: list[str] = []
    try:
        with pywarnings.catch_warnings(record=True) as caught:
            pywarnings.simplefilter("always")
            graph = check_graph(parse_graph(data, item_id), item_id, mode)
        warnings.extend(str(w.message) for w in caught)
    except GraphError as exc:
        return _fail(role, "invalid_output", str(exc), repairs, data)
    levels = [n.abstraction_level for n in graph.nodes]
    if any(lv is None or not 0.0 <= lv <= 1.0 for lv in levels):
        warnings.append("some abstraction levels are missing or outside [0, 1]")
    if not 10 <= len(graph.nodes) <= 30:
        warnings.append(f"{len(graph.nodes)} IUs (the prompt asks for 10 to 30)")
    return ParseResult(value=graph, repairs=tuple(dict.fromkeys(repairs)), warnings=tuple(warnings), raw=data)


# --- judges ---------------------------------------------------------------------------------

_SCORE_OUT_OF = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?))?\s*%?\s*$")


def _number(value: Any) -> Any:
    if isinstance(value, str):
        m = _SCORE_OUT_OF.match(value)
        if m:
            return float(m.group(1))
    return value


def parse_rating(text: str | None, *, role: str = "judge") -> ParseResult[InteractionRating]:
    ext = extract_json(text)
    if ext.error is not None or not isinstance(ext.value, dict):
        kind = "empty" if not (text or "").strip() else "invalid_json"
        return _fail(role, kind, ext.error or "the reply is not a JSON object", ext.repairs)
    data = dict(ext.value)
    repairs = list(ext.repairs)
    _rename(data, "quality_score", ("interaction_quality", "quality", "iq"), repairs)
    for key in ("information_calibration", "perceived_overload", "quality_score", "perceived_learning"):
        if key in data:
            data[key] = _number(data[key])
    for key in ("information_calibration", "perceived_overload"):
        v = data.get(key)
        if isinstance(v, (int, float)) and 1.0 < v <= 100.0:
            data[key] = v / 100.0
            repairs.append(f"percent_scaled:{key}")
    try:
        rating = InteractionRating.model_validate(data)
    except ValidationError as exc:
        return _fail(role, "invalid_output", _validation_detail(exc), repairs, data)
    return ParseResult(value=rating, repairs=tuple(repairs), raw=data)


def parse_termination(
    text: str | None, task: str, n_turns: int, *, role: str = "judge"
) -> ParseResult[TerminationJudgement]:
    """The baselines' stop point; an ending turn past the last learner message reads as the last."""
    ext = extract_json(text)
    if ext.error is not None or not isinstance(ext.value, dict):
        kind = "empty" if not (text or "").strip() else "invalid_json"
        return _fail(role, kind, ext.error or "the reply is not a JSON object", ext.repairs)
    data = dict(ext.value)
    repairs = list(ext.repairs)
    _rename(data, "ending_turn", ("end_turn", "judged_end_turn", "stop_turn"), repairs)
    _rename(data, "termination_reason", ("reason", "judged_termination_reason"), repairs)
    try:
        judgement = TerminationJudgement.model_validate(data)
    except ValidationError as exc:
        return _fail(role, "invalid_output", _validation_detail(exc), repairs, data)
    allowed = termination_reasons(task)
    if judgement.termination_reason not in allowed:
        detail = f"termination_reason {judgement.termination_reason!r} is not one of {', '.join(allowed)}"
        return _fail(role, "invalid_output", detail, repairs, data)
    warnings: list[str] = []
    if judgement.ending_turn > n_turns:
        warnings.append(f"ending_turn {judgement.ending_turn} > {n_turns} learner messages; read as {n_turns}")
        judgement = judgement.model_copy(update={"ending_turn": n_turns})
    return ParseResult(value=judgement, repairs=tuple(repairs), warnings=tuple(warnings), raw=data)


__all__ = [
    "JsonExtraction",
    "LATEX_SHADOWED",
    "ParseResult",
    "SignalAnalysis",
    "extract_json",
    "parse_graph_extraction",
    "parse_rating",
    "parse_signal_report",
    "parse_termination",
    "parse_user_turn",
    "repair_backslashes",
]
