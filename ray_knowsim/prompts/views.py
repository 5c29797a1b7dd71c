"""What a prompt shows of a session: states as names, the learner's lists, transcripts, graphs.

These are the only places where the model layer's data becomes prompt text, so the spec's rules for
the simulator's view (spec §5, §12.3) and the extractor's view (spec §12.5) live here once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping  # not typing's alias: its isinstance checks cost 3x, on every IU of every prompt
from types import MappingProxyType
from typing import Any, Iterable, Literal, Sequence

from ray_knowsim.identity_memo import IdentityMemo
from ray_knowsim.schema.graph import GraphIndex, IUGraph
from ray_knowsim.schema.outputs import share_json
from ray_knowsim.schema.states import KNOWS_WELL, PARTIAL, STATE_NAMES, STRUGGLING, UNAWARE, state_value
from ray_knowsim.rules.prerequisites import density_band, in_zpd

#: a conversation as (speaker, text) pairs, speaker "user" or "assistant" (the record's ``conversation``)
Transcript = Sequence[Sequence[str]]
#: a knowledge state: a KS dict keyed by label (or id) whose values are ``{"state": name}``, a
#: state name or an ordinal; or ordinals in graph node order
StatesLike = Mapping[str, Any] | Sequence[int]

NONE_LISTED = "(none)"


def _code(value: Any) -> int:
    # an ordinal in range, as every value of the live state is, is its own code: the checks below
    # (Mapping's above all) cost most of a call, two or three calls a turn per IU
    if value.__class__ is int and UNAWARE <= value <= KNOWS_WELL:
        return value
    if isinstance(value, Mapping):
        value = value.get("state")
    if isinstance(value, bool):
        return UNAWARE
    if isinstance(value, int):
        if not UNAWARE <= value <= KNOWS_WELL:
            raise ValueError(f"state ordinal out of range: {value}")
        return value
    return state_value(value)


def state_codes(index: GraphIndex, states: StatesLike) -> dict[str, int]:
    """Ordinal state per graph id. KS dicts are looked up by label, then by id; absent = unaware."""
    if isinstance(states, Mapping):
        out = {}
        for node_id, label in zip(index.ids, index.labels):
            out[node_id] = _code(states[label] if label in states else states.get(node_id))
        return out
    values = list(states)
    if len(values) != index.size:
        raise ValueError(f"{len(values)} state ordinals for a graph of {index.size} IUs")
    return {node_id: _code(int(v)) for node_id, v in zip(index.ids, values)}


def states_by_id(index: GraphIndex, codes: Mapping[str, int]) -> dict[str, str]:
    return {i: STATE_NAMES[codes[i]] for i in index.ids}


def ids_at(index: GraphIndex, codes: Mapping[str, int], level: int) -> list[str]:
    return [i for i in index.ids if codes[i] == level]


#: which definition of "connectable unknowns" the learner is shown (spec §12.7): "reference" (the
#: reference code, default) = all struggling IUs + partial IUs not yet explained; "paper" = IUs
#: whose prerequisites are met (the weakest prerequisite at partial or above, spec §3.1) but which
#: are not learned yet (struggling or partial; unaware IUs are never shown, the learner must not
#: name them)
ConnectableMode = Literal["reference", "paper"]
CONNECTABLE_MODES: tuple[str, ...] = ("reference", "paper")


def connectable_unknowns(
    index: GraphIndex, codes: Mapping[str, int], explained: Iterable[str], *, mode: str = "reference"
) -> list[str]:
    """The learner's connectable unknowns in node order, by ``mode`` (see :data:`ConnectableMode`)."""
    if mode == "paper":
        return [i for i in index.ids if codes[i] != UNAWARE and in_zpd(index, i, codes)]
    if mode != "reference":
        raise ValueError(f"connectable mode must be one of {CONNECTABLE_MODES}, got {mode!r}")
    explained = set(explained)
    return [
        i
        for i, label in zip(index.ids, index.labels)
        if codes[i] == STRUGGLING or (codes[i] == PARTIAL and label not in explained)
    ]


def learner_names(index: GraphIndex, graph: IUGraph, *, with_ids: bool) -> Mapping[str, str]:
    """How the learner's prompt names each IU: its concept name (prompt set v2: the learner never
    sees IU ids), or its ``"IUk: concept"`` label (v1 re-renders). Made once per graph and index
    and shared by every prompt of them: READ-ONLY."""
    return _of_graph(graph, ("names", with_ids), lambda g: _learner_names(index, g, with_ids), index)


def _learner_names(index: GraphIndex, graph: IUGraph, with_ids: bool) -> dict[str, str]:
    if with_ids:
        return {i: index.label_of(i) for i in index.ids}
    concepts = graph_concepts(graph)
    return {i: concepts[i] for i in index.ids}


def graph_concepts(graph: IUGraph) -> Mapping[str, str]:
    """``{IU id: concept}`` of ``graph`` (the last node of an id wins), made once per graph: READ-ONLY."""
    return _of_graph(graph, "concepts", lambda g: {n.id: n.concept for n in g.nodes})


def bullet_names(names: Mapping[str, str], ids: Sequence[str]) -> str:
    return bullet_list([names[i] for i in ids])


def states_by_name(index: GraphIndex, names: Mapping[str, str], codes: Mapping[str, int]) -> dict[str, str]:
    return {names[i]: STATE_NAMES[codes[i]] for i in index.ids}


#: what a state's JSON calls each IU: its id (the extractor), its concept name (the learner from
#: prompt set v2 on) or its "IUk: concept" label (the learner, v1)
ShownAs = Literal["id", "concept", "label"]


def state_json(index: GraphIndex, graph: IUGraph, codes: Mapping[str, int], shown_as: ShownAs) -> str:
    """The knowledge state as a prompt shows it: ``pretty_json({name: state name})`` in graph
    order, the IUs named as ``shown_as`` says (``"id"``: :func:`states_by_id`; else
    :func:`learner_names`), byte for byte.

    Why not just that expression: every learner and extractor request shows a state, and writing
    it was ~7 us of a learner request's ~50. Each IU's line (`` "name": "state"``) is written once
    per graph for each of the four states, so a state is one lookup per IU and a join. When two IUs
    would show the same name (the object keeps one key) the expression itself writes it."""
    lines = _of_graph(graph, ("state_lines", shown_as), lambda g: _state_lines(index, g, shown_as), index)
    if lines is None:
        names = {i: i for i in index.ids} if shown_as == "id" else learner_names(index, graph, with_ids=shown_as == "label")
        return pretty_json(states_by_name(index, names, codes))
    return "{\n" + ",\n".join([line[codes[i]] for line, i in zip(lines, index.ids)]) + "\n}"


def _state_lines(index: GraphIndex, graph: IUGraph, shown_as: ShownAs) -> tuple[tuple[str, ...], ...] | None:
    """Per IU, its JSON line under each state (indexed like :data:`STATE_NAMES`, which state codes
    index); None when the shown names are not all distinct (or there are no IUs)."""
    if shown_as == "id":
        shown = list(index.ids)
    else:
        names = learner_names(index, graph, with_ids=shown_as == "label")
        shown = [names[i] for i in index.ids]
    if not shown or len(set(shown)) != len(shown) or not all(type(n) is str for n in shown):
        return None
    return tuple(tuple(f" {_flat(name)}: {_flat(state)}" for state in STATE_NAMES) for name in shown)


def explained_names(index: GraphIndex, names: Mapping[str, str], explained: Sequence[str]) -> list[str]:
    """``explained_concepts`` (labels) as the learner's prompt names them, in the same order (a
    label the graph does not have stays as it is)."""
    if not explained:
        return []
    ids = _label_ids(index)
    return [names[ids[label]] if label in ids else label for label in explained]


#: an index's {label: IU id}; an index is frozen, so its labels never change
_LABEL_IDS = IdentityMemo(512)


def _label_ids(index: GraphIndex) -> dict[str, str]:
    """``{label: IU id}`` of an index (the last IU of a label wins), made once per index."""
    return _LABEL_IDS.get_or_make(index, lambda ix: {label: i for i, label in zip(ix.ids, ix.labels)})


def density_line(value: float) -> str:
    """``knowledge_density: HIGH|MEDIUM|LOW (NN% ...)`` with the spec's 0.6 / 0.3 cuts (spec §5)."""
    return (
        f"knowledge_density: {density_band(value)} ({round(100 * value)}% of the concepts linked to each "
        "concept are ones you already understand)"
    )


def bullet_list(items: Sequence[str]) -> str:
    return "\n".join(f"- {x}" for x in items) if items else NONE_LISTED


def transcript_pairs(transcript: Transcript | None) -> list[list[str]]:
    """Validated ``[[speaker, text], ...]`` (speakers ``user`` / ``assistant``)."""
    pairs = []
    for k, turn in enumerate(transcript or ()):
        if len(turn) != 2 or turn[0] not in ("user", "assistant") or not isinstance(turn[1], str):
            raise ValueError(f"transcript entry {k} must be (\"user\"|\"assistant\", text), got {turn!r}")
        pairs.append([turn[0], turn[1]])
    return pairs


#: speaker labels of the prompt sets before v3 (v3 templates name their own, ``prompts.request.speakers``)
DEFAULT_SPEAKERS: Mapping[str, str] = MappingProxyType({"user": "User", "assistant": "Assistant"})
NUMBERED_SPEAKERS: Mapping[str, str] = MappingProxyType({"user": "Learner", "assistant": "Tutor"})


def format_transcript(pairs: Sequence[Sequence[str]], empty: str, names: Mapping[str, str] = DEFAULT_SPEAKERS) -> str:
    """``- <name>: text`` per message; ``names`` maps ``user`` / ``assistant`` to what the reading
    prompt calls them (the learner's: "You" / "Tutor"), so labels match its instructions."""
    if not pairs:
        return empty
    return "\n".join(f"- {names[speaker]}: {text}" for speaker, text in pairs)


def format_numbered_transcript(
    pairs: Sequence[Sequence[str]], names: Mapping[str, str] = NUMBERED_SPEAKERS
) -> tuple[str, int]:
    """Learner messages numbered 1.. with the tutor's replies under them; returns (text, count)."""
    lines, n = [], 0
    for speaker, text in pairs:
        if speaker == "user":
            n += 1
            lines.append(f"[{names['user']} {n}] {text}")
        else:
            lines.append(f"[{names['assistant']}] {text}")
    return "\n".join(lines), n


def graph_for_prompt(graph: IUGraph) -> dict:
    """The IU graph as the extractor sees it: top-level keys renamed for readability (spec §12.5)."""
    data = graph.to_json_dict()
    return {
        "concept_areas": data.get("knowledge_areas", []),
        "concepts": data.get("nodes", []),
        "prerequisite_pairs": data.get("edges", []),
    }


def graph_prompt_json(graph: IUGraph) -> str:
    """:func:`graph_for_prompt` as the extractor's prompt shows it (:func:`pretty_json`), made once per graph."""
    return _of_graph(graph, "prompt_json", lambda g: pretty_json(graph_for_prompt(g)))


def graph_json_dict(graph: IUGraph) -> dict:
    """``graph.to_json_dict()`` made once per graph and shared by every request that carries it
    (the extractor's offline facts): READ-ONLY. Dumping the model was ~8 us per extractor request."""
    return _of_graph(graph, "json", lambda g: share_json(g.to_json_dict()))


#: a graph's {what: made}: what every prompt of an item shows of its graph, made once (a graph is
#: never changed once loaded)
_PER_GRAPH = IdentityMemo(512)


def _of_graph(graph: IUGraph, what: Any, make: Any, index: GraphIndex | None = None) -> Any:
    """``make(graph)``, cached per graph under ``what`` (and per ``index`` when one is given: the
    entry then keeps the index too and is used only for that same index)."""
    made = _PER_GRAPH.get_or_make(graph, lambda g: {})
    key = what if index is None else (what, id(index))
    got = made.get(key)
    if got is not None and (index is None or got[0] is index):
        return got if index is None else got[1]
    value = make(graph)
    made[key] = value if index is None else (index, value)
    return value


_SCALARS = (str, int, float, bool, type(None))


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (one space per level). A flat object of scalars (a knowledge
    state: every turn's prompt shows one) is written with the C encoder, byte for byte what
    ``json.dumps(value, ensure_ascii=False, indent=1)`` writes (which runs in Python)."""
    if isinstance(value, dict) and value and all(type(k) is str and type(v) in _SCALARS for k, v in value.items()):
        return "{\n" + ",\n".join(f" {_flat(k)}: {_flat(v)}" for k, v in value.items()) + "\n}"
    return json.dumps(value, ensure_ascii=False, indent=1)


_FLAT = json.JSONEncoder(ensure_ascii=False)
_FLAT_STR = getattr(json.encoder, "c_encode_basestring", None) or json.encoder.py_encode_basestring


def _flat(value: Any) -> str:
    return _FLAT_STR(value) if type(value) is str else _FLAT.encode(value)
