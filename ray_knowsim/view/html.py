"""HTML building blocks of the viewer's pages: the page frame, links, value formatting, tables.

Every value from a run (model text, ids, condition names, error messages, table cells) goes
through :func:`e`; links are built from entry ids and URL-encoded parameters, then escaped as
attributes. No page carries inline script or style: the frame links /static/view.css and
/static/view.js, which the Content-Security-Policy allows as the only sources.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence
from urllib.parse import quote, urlencode

import pyarrow as pa

from ray_knowsim.report.conversation_html import attrs, e

__all__ = ["attrs", "e", "fmt_value", "href", "page", "result_table", "status_badge", "table"]


def href(path: str, query: str | dict[str, Any] | None = None) -> str:
    """A same-origin URL: ``path`` (made of fixed words and entry ids) plus an encoded query."""
    if isinstance(query, dict):
        query = urlencode({k: v for k, v in query.items() if v is not None})
    return quote(path, safe="/") + (f"?{query}" if query else "")


def fmt_value(value: Any, decimals: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:,.0f}" if value.is_integer() and abs(value) >= 1000 else f"{value:.{decimals}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def status_badge(status: str, detail: str = "", flag: tuple[str, str] | None = None) -> str:
    """A run's (or session's) status word; ``flag`` (severity, line: :attr:`RunInfo.sanity_flag`)
    takes the badge's colour (a run whose simulator checks fire is never shown green) and adds
    the line below it."""
    cls = status.replace(" ", "-").replace("?", "")
    if flag is not None:
        cls += f" flagged {flag[0]}"
        detail = f"{detail}; {flag[1]}" if detail else flag[1]
    title = f' title="{e(detail)}"' if detail else ""
    badge = f'<span class="status {e(cls)}"{title}>{e(status)}</span>'
    return badge + (f'<span class="sanity-flag {e(flag[0])}">{e(flag[1])}</span>' if flag is not None else "")


def page(title: str, body: str, crumbs: Sequence[tuple[str, str | None]] = (), sub: str = "", tabs: str = "") -> str:
    """A whole page: header (breadcrumbs, title, subtitle), optional tabs, then ``body``."""
    trail = " / ".join(f'<a href="{e(link)}">{e(text)}</a>' if link else e(text) for text, link in crumbs)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer"><link rel="icon" href="data:,">'
        f'<title>{e(title)}</title><link rel="stylesheet" href="/static/view.css">'
        '<script src="/static/view.js" defer></script></head><body>'
        f'<header class="top"><nav class="crumbs">{trail}</nav><h1>{e(title)}</h1>'
        f'{f"<div class=sub>{e(sub)}</div>" if sub else ""}</header>{tabs}<main>{body}</main></body></html>'
    )


def table(header: Sequence[str], rows: Iterable[Sequence[str]], ident: str | None = None, num: Sequence[bool] | None = None) -> str:
    """A table from already-escaped cell HTML (``num`` marks right-aligned columns)."""
    num = list(num or [False] * len(header))
    head = "".join(f'<th{" class=num" if n else ""}>{h}</th>' for h, n in zip(header, num))
    body = "".join(
        "<tr>" + "".join(f'<td{" class=num" if n else ""}>{cell}</td>' for cell, n in zip(row, num)) + "</tr>" for row in rows
    )
    return f'<div class="scroll"><table{attrs(id=ident)}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def result_table(data: pa.Table, total: int | None = None, ident: str | None = None) -> str:
    """Any small result table (a run's tables/, a sweep's CSVs, compare's leaderboard), every
    cell escaped; numbers right-aligned with 3 decimals."""
    if data.num_rows == 0:
        return '<p class="note">(no rows)</p>'
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in data.schema]
    # a float column holding only whole numbers (ranks, counts after a join) reads as integers
    whole = [pa.types.is_floating(f.type) and all(v is None or v != v or float(v).is_integer() for v in data.column(f.name).to_pylist())
             for f in data.schema]
    rows = ([e(fmt_value(int(v) if w and v is not None and v == v else v)) for v, w in zip(row.values(), whole)] for row in data.to_pylist())
    out = table([e(n) for n in data.column_names], rows, ident, numeric)
    if total is not None and total > data.num_rows:
        out += f'<p class="note">first {data.num_rows:,} of {total:,} rows</p>'
    return out
