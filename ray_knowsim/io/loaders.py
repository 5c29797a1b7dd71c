"""Read the authors' data formats (spec §1) into model objects, failing with errors a user can act on.

Every error names the file and, where it applies, the line (JSONL), the record index or the
item id, so a broken input is found without a debugger.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import ValidationError

from ray_knowsim.schema.graph import GraphError, GraphMode, GraphWarning, IUGraph, check_graph, parse_graph
from ray_knowsim.schema.items import Item, TaskName, item_from_row
from ray_knowsim.schema.knowledge import InitCache
from ray_knowsim.schema.records import ConversationRecord
from ray_knowsim.schema.states import KNOWLEDGE_LEVELS, STATE_NAMES

PathLike = str | Path
_TASKS: tuple[str, ...] = ("math", "expertqa")
_KNOWN_STATE_NAMES = frozenset(STATE_NAMES) | {"unknown_unknown", "not_introduced"}


class LoadError(ValueError):
    """An input file that cannot be used; the message says where (file, line / item) and why."""


class GraphLoadError(LoadError, GraphError):
    """A graph-cache entry rejected by graph validation (catchable as either parent)."""


class LoadWarning(UserWarning):
    """Something suspicious but usable in an input file."""


def _brief(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(value)"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LoadError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise LoadError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def decode_json(
    text: str,
    where: str,
    expected: type,
    what: str,
    malformed: Callable[[json.JSONDecodeError], str],
    error: type[ValueError] = LoadError,
) -> Any:
    """``text`` as JSON of type ``expected``, else ``error`` naming ``where`` and what was wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: {malformed(exc)}") from exc
    if not isinstance(data, expected):
        raise error(f"{where}: expected {what}, found a JSON {_json_type(data)}")
    return data


def _read_json(path: Path, expected: type, what: str) -> Any:
    return decode_json(_read_text(path), str(path), expected, f"{what} at the top level",
                   lambda exc: f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})")


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        row = decode_json(line, f"{path}:{lineno}", dict, "a JSON object",
                      lambda exc: f"malformed JSON line ({exc.msg} at column {exc.colno})")
        yield lineno, row


def infer_task(row: dict[str, Any]) -> TaskName | None:
    """MATH rows have ``problem``, ExpertQA rows have ``question`` (spec §1.1)."""
    if "problem" in row and "question" not in row:
        return "math"
    if "question" in row and "problem" not in row:
        return "expertqa"
    return None


def load_items(path: PathLike, task: TaskName | None = None) -> list[Item]:
    """Items of a MATH or ExpertQA JSONL file, in file order (the order the random stream walks)."""
    path = Path(path)
    if task is not None and task not in _TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {list(_TASKS)}")
    items: list[Item] = []
    first_line: dict[str, int] = {}
    file_task: TaskName | None = task
    task_line = 0
    for lineno, row in _jsonl_rows(path):
        row_task = task or infer_task(row)
        if row_task is None:
            raise LoadError(
                f"{path}:{lineno}: cannot tell the task: a row needs exactly one of 'problem' (math) or "
                "'question' (expertqa); pass task= to choose"
            )
        if file_task is None:
            file_task, task_line = row_task, lineno
        elif row_task != file_task:
            raise LoadError(f"{path}:{lineno}: looks like a {row_task} row, but line {task_line} was {file_task}")
        rid = row.get("id")
        try:
            item = item_from_row(row_task, row)
        except ValidationError as exc:
            who = f" (item {rid!r})" if isinstance(rid, str) and rid else ""
            raise LoadError(f"{path}:{lineno}{who}: bad {row_task} row: {_brief(exc)}") from exc
        if item.id in first_line:
            raise LoadError(f"{path}:{lineno}: duplicate item id {item.id!r} (first on line {first_line[item.id]})")
        first_line[item.id] = lineno
        items.append(item)
    if not items:
        raise LoadError(f"{path}: no items (the file is empty)")
    return items


def load_graph_cache(path: PathLike, mode: GraphMode = "strict") -> dict[str, IUGraph]:
    """``{item_id: IUGraph}`` from an IU cache (spec §1.2), each graph validated by ``check_graph``.

    ``strict``: cycles and dangling edges are errors, duplicate edges dropped with a warning.
    ``reference``: cycles, dangling and duplicate edges are kept, each with a warning.
    """
    if mode not in ("strict", "reference"):
        raise ValueError(f"unknown graph mode {mode!r}; choose 'strict' or 'reference'")
    path = Path(path)
    data = _read_json(path, dict, "an object {item_id: graph}")
    graphs: dict[str, IUGraph] = {}
    for item_id, raw in data.items():
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                graph = check_graph(parse_graph(raw, item_id), item_id, mode)
        except GraphError as exc:
            raise GraphLoadError(f"{path}: {exc}") from exc
        messages = [str(w.message) for w in caught if issubclass(w.category, GraphWarning)]
        for w in caught:
            if not issubclass(w.category, GraphWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if mode == "reference" and not any("duplicate edge" in m for m in messages):
            dups = _duplicate_edges(graph)
            if dups:
                messages.append(f"item {item_id!r}: duplicate edges kept (reference mode): {dups}")
        for msg in messages:
            warnings.warn(f"{path}: {msg}", GraphWarning, stacklevel=2)
        graphs[item_id] = graph
    return graphs


def _duplicate_edges(graph: IUGraph) -> str:
    keys = [(e.source, e.target) for e in graph.edges]
    return ", ".join(f"{s}->{t}" for s, t in sorted({k for k in keys if keys.count(k) > 1}))


def load_init_cache(path: PathLike) -> InitCache:
    """The initial-state cache (spec §1.3): ``{task_key: {item_id: {level: KS}}}`` plus ``_meta``."""
    path = Path(path)
    data = _read_json(path, dict, "an object {task_key: {item_id: {level: state}}}")
    for task_key, per_item in data.items():
        if task_key == "_meta":
            if not isinstance(per_item, dict):
                raise LoadError(f"{path}: '_meta' must be an object")
            continue
        if not isinstance(per_item, dict):
            raise LoadError(f"{path}: task {task_key!r} must map item ids to levels")
        for item_id, per_level in per_item.items():
            where = f"{path}: task {task_key!r}, item {item_id!r}"
            if not isinstance(per_level, dict):
                raise LoadError(f"{where}: expected {{level: knowledge state}}")
            for level, ks in per_level.items():
                if level not in KNOWLEDGE_LEVELS:
                    raise LoadError(f"{where}: unknown knowledge level {level!r}; expected one of {list(KNOWLEDGE_LEVELS)}")
                _check_ks(ks, f"{where}, level {level!r}")
    try:
        return InitCache.model_validate(data)
    except ValidationError as exc:  # pragma: no cover - the walk above already checked the shape
        raise LoadError(f"{path}: {_brief(exc)}") from exc


def _check_ks(ks: Any, where: str) -> None:
    if not isinstance(ks, dict) or not ks:
        raise LoadError(f"{where}: expected a non-empty knowledge state {{label: {{'state': ...}}}}")
    for label, entry in ks.items():
        if not isinstance(entry, dict):
            raise LoadError(f"{where}: entry {label!r} must be an object with a 'state'")
        state = entry.get("state")
        if state not in _KNOWN_STATE_NAMES:
            warnings.warn(f"{where}: IU {label!r} has state {state!r}, which reads as unaware", LoadWarning, stacklevel=3)


def load_records(path: PathLike) -> list[ConversationRecord]:
    """Recorded conversations (spec §1.6): a JSON list of record objects."""
    path = Path(path)
    data = _read_json(path, list, "a list of conversation records")
    records: list[ConversationRecord] = []
    for k, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise LoadError(f"{path}: record {k} is a JSON {_json_type(raw)}, expected an object")
        try:
            records.append(ConversationRecord.model_validate(raw))
        except ValidationError as exc:
            pid = raw.get("problem_id")
            who = f" (problem_id {pid!r})" if pid else ""
            raise LoadError(f"{path}: record {k}{who}: {_brief(exc)}") from exc
    return records


__all__ = [
    "GraphLoadError",
    "LoadError",
    "LoadWarning",
    "infer_task",
    "load_graph_cache",
    "load_init_cache",
    "load_items",
    "load_records",
]
