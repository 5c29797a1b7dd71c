"""An extracted IU graph (spec §12.1)."""

from __future__ import annotations

import re
import warnings as pywarnings

from ray_knowsim.llm.parse.json_extract import balanced_end, decode_json, extract_json
from ray_knowsim.llm.parse.result import ParseResult, fail, rename
from ray_knowsim.schema.graph import GraphError, GraphMode, IUGraph, check_graph, parse_graph

def _salvage_nodes(text: str) -> dict | None:
    """From a truncated reply, a graph made of a complete ``nodes`` array and no edges (spec §12.1)."""
    m = re.search(r'"nodes"\s*:\s*\[', text)
    if not m:
        return None
    end = balanced_end(text, m.end() - 1)
    if end is None:
        return None
    value, _, error = decode_json(text[m.end() - 1 : end])
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
            return fail(role, kind, ext.error, repairs)
        repairs.append("salvaged_nodes_without_edges")
    if not isinstance(data, dict) or not data.get("nodes"):
        return fail(role, "invalid_output", 'expected an object with a non-empty "nodes" list', repairs, data)
    rename(data, "edges", ("prerequisite_pairs", "links"), repairs)
    if isinstance(data.get("edges"), list):
        for edge in data["edges"]:
            if isinstance(edge, dict):
                rename(edge, "from", ("source", "prerequisite"), repairs)
                rename(edge, "to", ("target", "dependent"), repairs)
    warnings: list[str] = []
    try:
        with pywarnings.catch_warnings(record=True) as caught:
            pywarnings.simplefilter("always")
            graph = check_graph(parse_graph(data, item_id), item_id, mode)
        warnings.extend(str(w.message) for w in caught)
    except GraphError as exc:
        return fail(role, "invalid_output", str(exc), repairs, data)
    levels = [n.abstraction_level for n in graph.nodes]
    if any(lv is None or not 0.0 <= lv <= 1.0 for lv in levels):
        warnings.append("some abstraction levels are missing or outside [0, 1]")
    if not 10 <= len(graph.nodes) <= 30:
        warnings.append(f"{len(graph.nodes)} IUs (the prompt asks for 10 to 30)")
    return ParseResult(value=graph, repairs=tuple(dict.fromkeys(repairs)), warnings=tuple(warnings), raw=data)
