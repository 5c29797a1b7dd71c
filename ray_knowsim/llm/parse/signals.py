"""The signal extractor's per-turn report (spec §1.5, §12.5), read strictly against the item's graph.

A live run accepts a report only when it names every IU of the graph exactly once, with a known
label in each of the three label fields. Harmless drift is normalised and recorded in
``ParseResult.repairs`` (one string per change, e.g. ``"id:'iu 1'->IU1"``):

* an id written in another case or spacing (``iu1``, ``IU 1``, ``IU_1``), as the bare number
  (``1`` for ``IU1``), as the state label (``"IU1: fractions"``) or as the IU's concept name;
* a label in another case, with surrounding white space, or with spaces / hyphens for the
  underscores (``"Well Explained"``);
* the field-name drift and legacy fields of spec §1.5 (``assistant_role``, ``user_attempt``,
  ``attempted_by_user``, a missing ``teaching_quality`` stated as ``-> label`` in its reasoning);
* a null reasoning text (read as empty).

Everything else is refused with the named failure ``extractor_invalid_signals`` and a detail
that says exactly what is wrong, entry by entry (``"IU7 is missing; 'IU12' is not an IU of this
graph"``), which the caller sends back to the model once: an unknown id, an entry without an id, a
duplicate id, a missing IU, a null, missing or unknown label, an entry that is not an object.
Nothing a model returns reaches the learner's state unchecked.

Replay of recorded reference data does NOT come through here: it keeps the reference
normalisation of spec §1.5 (:func:`ray_knowsim.schema.signals.normalize_signals`), under which
such irregularities are legal inputs with defined effects.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ray_knowsim.identity_memo import IdentityMemo
from ray_knowsim.llm.parse.json_extract import extract_json
from ray_knowsim.llm.parse.result import ParseResult, fail
from ray_knowsim.schema.graph import GraphIndex, IUGraph, iu_label
from ray_knowsim.schema.outputs import ATTEMPT_TYPES, RESPONSE_ROLES, TEACHING_QUALITIES
from ray_knowsim.schema.signals import ARROW_LABEL, ROLE_ALIASES, SignalEntry, canonical_entries

INVALID_SIGNALS = "invalid_signals"

_LABEL_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("teaching_quality", TEACHING_QUALITIES),
    ("user_attempt_type", ATTEMPT_TYPES),
    ("assistant_response_role", RESPONSE_ROLES),
)
_TEXT_FIELDS = ("concept", "teaching_quality_reasoning", "user_attempt_reasoning")


@dataclass(frozen=True)
class SignalAnalysis:
    """One turn's accepted report: exactly one entry per IU (the extractor's order), canonical ids
    and labels, read through the reference normalisation (which is the identity on them)."""

    entries: tuple[SignalEntry, ...]


@dataclass(frozen=True)
class _Graph:
    ids: tuple[str, ...]
    concepts: tuple[str, ...]

    @classmethod
    def of(cls, graph: IUGraph | GraphIndex) -> "_Graph":
        if isinstance(graph, GraphIndex):
            concepts = tuple(
                label[len(i) + 2 :] if label.startswith(f"{i}: ") else "" for i, label in zip(graph.ids, graph.labels)
            )
            return cls(graph.ids, concepts)
        return cls(tuple(n.id for n in graph.nodes), tuple(n.concept for n in graph.nodes))


#: each graph's ids and concepts, made once per graph object (a loaded graph or its index is never
#: changed: ray_knowsim/identity_memo.py); every turn of every session of an item reads the same
_GRAPHS = IdentityMemo(512)


def _squash(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text).lower()


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


class _IdResolver:
    """Maps the forms of an id a model drifts into onto the graph's ids (only unambiguous ones)."""

    def __init__(self, g: _Graph) -> None:
        self.known = set(g.ids)
        self.forms: dict[str, str | None] = {}
        for node_id, concept in zip(g.ids, g.concepts):
            self._add(_squash(node_id), node_id)
            self._add("label:" + _words(iu_label(node_id, concept)), node_id)
            if concept:
                self._add("concept:" + _words(concept), node_id)

    def _add(self, key: str, node_id: str) -> None:
        if key in self.forms and self.forms[key] != node_id:
            self.forms[key] = None  # ambiguous: two IUs share this form, resolve neither
        else:
            self.forms[key] = node_id

    def resolve(self, raw: Any) -> str | None:
        if isinstance(raw, bool) or not isinstance(raw, (str, int)):
            return None
        text = str(raw)
        if text in self.known:
            return text
        for key in (_squash(text), "iu" + _squash(text), "label:" + _words(text), "concept:" + _words(text)):
            found = self.forms.get(key)
            if found is not None:
                return found
        return None


@lru_cache(maxsize=1024)
def _resolver(g: _Graph) -> _IdResolver:
    """One resolver per graph (it only reads ``forms`` after it is built): every turn of every
    session of an item resolves ids against the same graph."""
    return _IdResolver(g)


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


def _label(value: Any, allowed: tuple[str, ...]) -> str | None:
    """The allowed label ``value`` names up to case, white space and ``-``/space for ``_``."""
    if not isinstance(value, str):
        return None
    if value in allowed:  # already canonical (lower case, no white space or "-"): normalising keeps it
        return value
    norm = re.sub(r"[\s\-]+", "_", value.strip()).lower()
    return norm if norm in allowed else None


_LABELS_AND_TEXTS = operator.itemgetter(*(key for key, _ in _LABEL_FIELDS), *_TEXT_FIELDS)
_TQ_SET, _ATTEMPT_SET, _ROLE_SET = (frozenset(allowed) for _, allowed in _LABEL_FIELDS)


def _canonical(raw: dict, node_id: str) -> bool:
    """Whether ``raw`` is canonical already: its id is ``node_id`` (an id of the graph), all three
    labels are there and canonical, all three texts are strings. Then :func:`_read_entry` would
    change nothing, repair nothing and refuse nothing, so the entry is taken as it stands; this is
    how nearly every entry of a live report arrives, and the check is a handful of C-level look-ups."""
    if raw.get("id") != node_id:
        return False
    try:
        tq, attempt, role, concept, tq_text, attempt_text = _LABELS_AND_TEXTS(raw)
    except KeyError:
        return False
    return (tq.__class__ is str and tq in _TQ_SET and attempt.__class__ is str and attempt in _ATTEMPT_SET
            and role.__class__ is str and role in _ROLE_SET and concept.__class__ is str and tq_text.__class__ is str
            and attempt_text.__class__ is str)


def _read_entry(raw: dict, k: int, node_id: str | None, repairs: list[str], problems: list[str]) -> dict | None:
    """The canonical form of the ``k``-th entry, or None (with its problems named) when it is refused;
    ``node_id``: the IU its raw id resolves to (the caller has resolved it to count the IUs named).
    Entries that are canonical already (:func:`_canonical`) need none of this and do not come here."""
    data = dict(raw)
    if "assistant_response_role" not in data:
        for alias in ROLE_ALIASES:
            if alias in data:
                data["assistant_response_role"] = data.pop(alias)
                repairs.append(f"renamed:{alias}->assistant_response_role")
                break
    if "user_attempt_type" not in data:
        if "user_attempt" in data:
            data["user_attempt_type"] = data.pop("user_attempt")
            repairs.append("renamed:user_attempt->user_attempt_type")
        elif isinstance(data.get("attempted_by_user"), bool):
            data["user_attempt_type"] = "reasoning" if data["attempted_by_user"] else "none"
            repairs.append(f"legacy:attempted_by_user->user_attempt_type:entry {k}")

    raw_id = data.get("id")
    if raw_id is None or raw_id == "":
        problems.append(f"entry {k} has no id")
        return None
    if node_id is None:
        problems.append(f"{raw_id!r} is not an IU of this graph")
        return None
    if raw_id != node_id:
        repairs.append(f"id:{raw_id!r}->{node_id}")
    data["id"] = node_id
    name = node_id

    if "teaching_quality" not in data:
        reasoning = data.get("teaching_quality_reasoning")
        match = ARROW_LABEL.search(reasoning.lower()) if isinstance(reasoning, str) else None
        if match is not None:
            data["teaching_quality"] = match.group(1)
            repairs.append(f"teaching_quality_from_reasoning:{name}")
    ok = True
    for key, allowed in _LABEL_FIELDS:
        if key not in data:
            problems.append(f"{name}: {key} is missing (one of {', '.join(allowed)})")
            ok = False
            continue
        value = data[key]
        label = _label(value, allowed)
        if label is None:
            shown = "null" if value is None else repr(value)
            problems.append(f"{name}: {key} {shown} is not one of {', '.join(allowed)}")
            ok = False
        elif label != value:
            repairs.append(f"label:{name}.{key}:{value!r}->{label}")
            data[key] = label
    for key in _TEXT_FIELDS:
        value = data.get(key)
        if value is None:
            if key in data:
                repairs.append(f"null_text:{name}.{key}")
            data[key] = ""
        elif not isinstance(value, str):
            problems.append(f"{name}: {key} must be a string")
            ok = False
    return data if ok else None


def parse_signal_report(
    text: str | None, graph: IUGraph | GraphIndex, *, role: str = "extractor"
) -> ParseResult[SignalAnalysis]:
    """The extractor's report for one turn, accepted only when it covers the graph exactly (see the
    module docstring). Failures: ``extractor_empty``, ``extractor_invalid_json``,
    ``extractor_invalid_output`` (no entry list), ``extractor_invalid_signals`` (drift that is
    not harmless)."""
    g = _GRAPHS.get_or_make(graph, _Graph.of)
    ext = extract_json(text, allow_array=True)
    if ext.error is not None:
        kind = "empty" if not (text or "").strip() else "invalid_json"
        return fail(role, kind, ext.error, ext.repairs)
    repairs = list(ext.repairs)
    raw_list = _signal_list(ext.value, repairs)
    if raw_list is None:
        return fail(role, "invalid_output", 'expected an object with an "iu_analysis" list of entries', repairs, ext.value)
    if not raw_list:
        return fail(role, "empty", "the iu_analysis list has no entries", repairs, ext.value)

    resolver = _resolver(g)
    resolve, known = resolver.resolve, resolver.known
    problems: list[str] = []
    accepted: list[dict] = []
    seen: dict[str, int] = {}
    for k, raw in enumerate(raw_list, 1):
        if not isinstance(raw, dict):
            problems.append(f"entry {k} is not an object")
            continue
        raw_id = raw.get("id")
        node_id = raw_id if raw_id.__class__ is str and raw_id in known else resolve(raw_id)
        if node_id is not None:  # a refused entry still names its IU: not "missing" as well
            seen[node_id] = seen.get(node_id, 0) + 1
        data = raw if node_id is not None and _canonical(raw, node_id) else _read_entry(raw, k, node_id, repairs, problems)
        if data is not None:
            accepted.append(data)
    for node_id, count in seen.items():
        if count > 1:
            problems.append(f"{node_id} appears {count} times (exactly once is allowed)")
    missing = [i for i in g.ids if i not in seen]
    if missing:
        problems.insert(0, f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing")
    if problems:
        detail = "; ".join(problems) + f". Write exactly one entry for each of {', '.join(g.ids)}, in that order."
        return fail(role, INVALID_SIGNALS, detail, tuple(dict.fromkeys(repairs)), ext.value)
    # the accepted entries are canonical, so the reference normalisation would return each as it is
    # (tests/llm/parse/test_signal_report_golden.py checks it entry by entry): validated in one call
    return ParseResult(value=SignalAnalysis(entries=canonical_entries(accepted)), repairs=tuple(dict.fromkeys(repairs)),
                       raw=ext.value)


__all__ = ["INVALID_SIGNALS", "SignalAnalysis", "parse_signal_report"]
