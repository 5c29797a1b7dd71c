"""Filter, sort and page a run's session rows on the server: pure logic over an Arrow table.

Why on the server: a page must not grow with the run. The browser gets one page of rows (at most
:data:`MAX_PER_PAGE`) whatever the run's size; filters (level, condition, item, status, outcome,
error kind, metric ranges, failed only) and the sort apply to every committed session first.
Query strings are parsed strictly: a value that is not understood is named and ignored, never
guessed at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlencode

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, Field

from ray_knowsim.tables.outcomes import count_outcomes
from ray_knowsim.schema.failures import error_kind
from ray_knowsim.schema.results import COMPARE_METRICS
from ray_knowsim.schema.states import level_order

#: query-string key -> session column, for equality filters
EQUALS: dict[str, str] = {
    "task": "task",
    "level": "knowledge_level",
    "condition": "condition",
    "item": "item_id",
    "status": "status",
    "outcome": "stop_reason",
    "error": "error_kind",
}
#: columns with a min/max filter (``min.kg=0.5&max.kg=2``)
RANGES: tuple[str, ...] = (*COMPARE_METRICS, "turns", "cost_usd")
#: columns a list can be sorted by
SORTABLE: tuple[str, ...] = (
    "session_id", "task", "item_id", "knowledge_level", "condition", "status", "error_kind", "stop_reason",
    "early_stop_turn", *RANGES,
)  # fmt: skip
MAX_PER_PAGE = 200
FAILED = "failed"


class SessionQuery(BaseModel):
    equals: dict[str, str] = Field(default_factory=dict)  # query key (see EQUALS) -> value
    ranges: dict[str, tuple[float | None, float | None]] = Field(default_factory=dict)
    failed_only: bool = False
    q: str = ""  # substring of the session id
    sort: str = "session_id"
    desc: bool = False
    page: int = 1
    per: int = 50

    def params(self, **change: Any) -> str:
        """This query as a query string (defaults left out), with ``change`` applied."""
        data = self.model_copy(update=change)
        out: list[tuple[str, str]] = [(k, v) for k, v in data.equals.items() if v != ""]
        for col, (lo, hi) in data.ranges.items():
            if lo is not None:
                out.append((f"min.{col}", _num(lo)))
            if hi is not None:
                out.append((f"max.{col}", _num(hi)))
        if data.failed_only:
            out.append(("failed", "1"))
        if data.q:
            out.append(("q", data.q))
        if data.sort != "session_id":
            out.append(("sort", data.sort))
        if data.desc:
            out.append(("desc", "1"))
        if data.page != 1:
            out.append(("page", str(data.page)))
        if data.per != 50:
            out.append(("per", str(data.per)))
        return urlencode(out)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _float(text: str) -> float | None:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def parse_query(params: Mapping[str, str]) -> tuple[SessionQuery, list[str]]:
    """A query from URL parameters, and one message per parameter that was not understood."""
    q = SessionQuery()
    problems: list[str] = []
    for key, raw in params.items():
        value = raw.strip()
        if key in EQUALS:
            if value:
                q.equals[key] = value
        elif key.startswith(("min.", "max.")):
            col = key[4:]
            if col not in RANGES:
                problems.append(f"{key}: no range filter on {col!r} (one of {', '.join(RANGES)})")
                continue
            if not value:
                continue
            try:
                number = _float(value)
            except ValueError:
                problems.append(f"{key}: {value!r} is not a number")
                continue
            lo, hi = q.ranges.get(col, (None, None))
            q.ranges[col] = (number, hi) if key.startswith("min.") else (lo, number)
        elif key == "failed":
            q.failed_only = value in ("1", "on", "true", "yes")
        elif key == "q":
            q.q = value[:200]
        elif key == "sort":
            if value in SORTABLE:
                q.sort = value
            elif value:
                problems.append(f"sort: cannot sort by {value!r}")
        elif key == "desc":
            q.desc = value in ("1", "on", "true", "yes")
        elif key in ("page", "per"):
            try:
                number = int(value)
            except ValueError:
                problems.append(f"{key}: {value!r} is not a whole number")
                continue
            if key == "page":
                q.page = max(1, number)
            else:
                q.per = min(MAX_PER_PAGE, max(1, number))
        elif key == "sid":
            continue  # the conversation page's own parameter
        else:
            problems.append(f"{key}: unknown parameter")
    return q, problems




def with_error_kind(table: pa.Table) -> pa.Table:
    if "error_kind" in table.column_names:
        return table
    errors = table.column("error").to_pylist() if "error" in table.column_names else [None] * table.num_rows
    return table.append_column("error_kind", pa.array([error_kind(x) for x in errors], pa.string()))


def _column(table: pa.Table, name: str) -> pa.ChunkedArray | pa.Array:
    return table.column(name) if name in table.column_names else pa.nulls(table.num_rows)


def select(table: pa.Table, q: SessionQuery) -> pa.Table:
    """The rows that pass every filter of ``q``, sorted as ``q`` says (missing values last)."""
    table = with_error_kind(table)
    mask = pa.array([True] * table.num_rows, pa.bool_())
    for key, value in q.equals.items():
        col = _column(table, EQUALS[key])
        cond = pc.equal(pc.cast(col, pa.string()), value) if not pa.types.is_null(col.type) else pa.array([False] * table.num_rows)
        mask = pc.and_(mask, pc.fill_null(cond, False))
    for col_name, (lo, hi) in q.ranges.items():
        col = _column(table, col_name)
        if pa.types.is_null(col.type):
            mask = pa.array([False] * table.num_rows, pa.bool_())
            continue
        col = pc.cast(col, pa.float64())
        if lo is not None:
            mask = pc.and_(mask, pc.fill_null(pc.greater_equal(col, lo), False))
        if hi is not None:
            mask = pc.and_(mask, pc.fill_null(pc.less_equal(col, hi), False))
    if q.failed_only:
        mask = pc.and_(mask, pc.fill_null(pc.not_equal(_column(table, "status"), "ok"), True))
    if q.q:
        mask = pc.and_(mask, pc.fill_null(pc.match_substring(_column(table, "session_id"), q.q, ignore_case=True), False))
    picked = table.filter(mask)
    if q.sort in picked.column_names and not pa.types.is_null(picked.schema.field(q.sort).type):
        keys = [(q.sort, "descending" if q.desc else "ascending")]
        if q.sort != "session_id":
            keys.append(("session_id", "ascending"))  # a stable order among equal values
        picked = picked.sort_by(keys)  # nulls sort last (pyarrow default)
    return picked


@dataclass
class Page:
    rows: list[dict[str, Any]]
    total: int  # committed sessions
    matched: int  # sessions passing the filters
    page: int
    pages: int
    per: int

    @property
    def first(self) -> int:
        return (self.page - 1) * self.per + 1 if self.matched else 0


def page_of(table: pa.Table, q: SessionQuery) -> Page:
    picked = select(table, q)
    pages = max(1, math.ceil(picked.num_rows / q.per))
    page = min(q.page, pages)
    rows = picked.slice((page - 1) * q.per, q.per).to_pylist()
    return Page(rows, table.num_rows, picked.num_rows, page, pages, q.per)


def neighbours(table: pa.Table, q: SessionQuery, session_id: str) -> tuple[str | None, str | None, int | None, int]:
    """(previous id, next id, 1-based position, number matched) of a session in the filtered,
    sorted list: the conversation page steps through what the list showed."""
    ids = select(table, q).column("session_id").to_pylist()
    try:
        k = ids.index(session_id)
    except ValueError:
        return None, None, None, len(ids)
    return (ids[k - 1] if k > 0 else None), (ids[k + 1] if k + 1 < len(ids) else None), k + 1, len(ids)


def facets(table: pa.Table, limit: int = 500) -> dict[str, list[str]]:
    """The distinct values of each equality filter's column (levels in the paper's order)."""
    table = with_error_kind(table)
    out = {}
    for key, col in EQUALS.items():
        if col not in table.column_names or pa.types.is_null(table.schema.field(col).type):
            out[key] = []
            continue
        values = [str(v) for v in pc.unique(table.column(col)).to_pylist() if v is not None]
        out[key] = (level_order(values) if key == "level" else sorted(values))[:limit]
    return out


def failure_counts(table: pa.Table) -> list[dict[str, Any]]:
    """Failed sessions per (condition, error kind), most frequent first: the run's ``tables/failures``
    count (:func:`ray_knowsim.tables.outcomes.count_outcomes`, levels and tasks summed), each with its
    failure class, share of the condition's sessions and the first reason seen."""
    if not table.num_rows or "status" not in table.column_names:
        return []
    rows = count_outcomes([table]).failures(("condition",)).to_dict("records")
    return sorted(rows, key=lambda r: (-r["n_failed"], r["condition"], r["error_kind"]))


__all__ = [
    "EQUALS", "MAX_PER_PAGE", "Page", "RANGES", "SORTABLE", "SessionQuery", "error_kind", "facets", "failure_counts",
    "neighbours", "page_of", "parse_query", "select", "with_error_kind",
]  # fmt: skip
