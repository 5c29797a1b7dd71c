"""Strict reading of XLSX sheets: header row 1, one record per later row, typed cell access.

Every error names the file, the sheet, the Excel row number and the column, so a person can open
the workbook and fix the cell. Headers are matched loosely (case, spaces, '_' and '-' are
equivalent: 'Prolific ID' == 'prolific_id'); values are not (a score must be a number).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import openpyxl


class KnowChatFormatError(ValueError):
    """Human-study data that does not follow the documented layout; the message says where."""


def norm_header(text: object) -> str:
    return re.sub(r"[\s_\-]+", " ", str(text).strip().lower()).strip()


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


@dataclass
class Sheet:
    file: Path
    name: str
    columns: list[str]  # normalised headers, in sheet order
    rows: list[tuple[int, dict[str, object]]] = field(default_factory=list)  # (excel row, values)

    def where(self, row: int | None = None, column: str | None = None) -> str:
        out = f"{self.file.name}, sheet {self.name!r}"
        if row is not None:
            out += f", row {row}"
        if column is not None:
            out += f", column {column!r}"
        return out

    def has(self, column: str) -> bool:
        return norm_header(column) in self.columns

    def require(self, *columns: str) -> None:
        missing = [c for c in columns if not self.has(c)]
        if missing:
            raise KnowChatFormatError(
                f"{self.where()}: missing column(s) {', '.join(repr(c) for c in missing)} "
                f"(header row has: {', '.join(repr(c) for c in self.columns) or 'nothing'})"
            )

    def text(self, row: int, values: dict[str, object], column: str, *, required: bool = True) -> str | None:
        value = values.get(norm_header(column))
        if _blank(value):
            if required:
                raise KnowChatFormatError(f"{self.where(row, column)}: empty cell")
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # ids typed as numbers in Excel
        return str(value).strip()

    def number(self, row: int, values: dict[str, object], column: str, *, required: bool = True) -> float | None:
        value = values.get(norm_header(column))
        if _blank(value):
            if required:
                raise KnowChatFormatError(f"{self.where(row, column)}: empty cell, expected a number")
            return None
        if isinstance(value, bool):
            raise KnowChatFormatError(f"{self.where(row, column)}: expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            out = float(value)
        else:
            try:
                out = float(str(value).strip())
            except ValueError:
                raise KnowChatFormatError(f"{self.where(row, column)}: expected a number, got {value!r}") from None
        if out != out or out in (float("inf"), float("-inf")):
            raise KnowChatFormatError(f"{self.where(row, column)}: expected a finite number, got {value!r}")
        return out

    def integer(self, row: int, values: dict[str, object], column: str) -> int:
        num = self.number(row, values, column)
        assert num is not None
        if not num.is_integer():
            raise KnowChatFormatError(f"{self.where(row, column)}: expected a whole number, got {num!r}")
        return int(num)

    def raw(self, values: dict[str, object], column: str) -> object:
        return values.get(norm_header(column))


def read_sheets(path: Path, names: tuple[str, ...]) -> dict[str, Sheet]:
    """Read the named sheets (matched by normalised name); any missing sheet is an error."""
    try:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many types for a broken file
        raise KnowChatFormatError(f"{path.name}: not a readable XLSX workbook ({type(exc).__name__}: {exc})") from exc
    try:
        by_norm = {norm_header(n): n for n in wb.sheetnames}
        missing = [n for n in names if norm_header(n) not in by_norm]
        if missing:
            raise KnowChatFormatError(
                f"{path.name}: missing sheet(s) {', '.join(repr(m) for m in missing)} "
                f"(workbook has: {', '.join(repr(s) for s in wb.sheetnames)})"
            )
        return {n: _read_sheet(path, wb[by_norm[norm_header(n)]], n) for n in names}
    finally:
        wb.close()


def _read_sheet(path: Path, ws, name: str) -> Sheet:
    rows = ws.iter_rows(values_only=True)
    header = next(rows, None)
    if header is None or all(_blank(h) for h in header):
        raise KnowChatFormatError(f"{path.name}, sheet {name!r}: row 1 must be a header row, the sheet is empty")
    columns = [norm_header(h) if not _blank(h) else "" for h in header]
    seen: set[str] = set()
    for c in columns:
        if c and c in seen:
            raise KnowChatFormatError(f"{path.name}, sheet {name!r}, row 1: column {c!r} appears twice")
        seen.add(c)
    sheet = Sheet(file=path, name=name, columns=[c for c in columns if c])
    for excel_row, values in enumerate(rows, start=2):
        if values is None or all(_blank(v) for v in values):
            continue
        sheet.rows.append((excel_row, {c: v for c, v in zip(columns, values) if c}))
    return sheet
