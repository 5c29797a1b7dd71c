"""The terminal summaries' line discipline (issue 51): at most :data:`WIDTH` columns a line, so
what `score`, `sweep`, `adaptive-replay` and `agreement` print reads in any terminal. Pure."""

from __future__ import annotations

from typing import Sequence

WIDTH = 100


def fit(line: str, width: int = WIDTH) -> str:
    """``line`` cut to ``width`` columns (an ellipsis marks the cut): the summary's lines are
    short by design; this only bounds a long name."""
    return line if len(line) <= width else line[: width - 1] + "…"


def wrap_items(head: str, items: Sequence[str], indent: str = "    ", width: int = WIDTH) -> list[str]:
    """``head`` followed by ``items`` joined with ", ", wrapped at ``width`` (items never split)."""
    lines, line = [], head
    for k, item in enumerate(items):
        piece = item + ("," if k < len(items) - 1 else "")
        if line.strip() and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = indent + piece
        else:
            line = f"{line} {piece}" if line.strip() else indent + piece
    lines.append(line)
    return [fit(x, width) for x in lines]


__all__ = ["WIDTH", "fit", "wrap_items"]
