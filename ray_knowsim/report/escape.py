"""Markdown escaping for the report's text, in one place: the report's markdown (markdown.py) and
the parts it is assembled from (outcomes.py, audit.py) escape alike, and none of them imports
another for it."""

from __future__ import annotations


def escape_md(text: object) -> str:
    """Escape what would break a table cell or start markup."""
    s = "" if text is None else str(text)
    for ch in ("\\", "|", "*", "_", "`", "<", ">", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return s.replace("\n", " ")


__all__ = ["escape_md"]
