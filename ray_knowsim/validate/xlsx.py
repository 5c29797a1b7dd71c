"""Strict reading of XLSX sheets: a header row, one record per later row, typed cell access.

Every error names the file, the sheet, the Excel row number and the column, so a person can open
the workbook and fix the cell. Sheet and column names are matched loosely through the layout's
lists of accepted names (case, spaces and punctuation ignored: 'Prolific ID' == 'prolific_id');
values are not (a score must be a number; numeric text such as '7' is a number).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path

import openpyxl

from ray_knowsim.validate.layout import name_key


class KnowChatFormatError(ValueError):
    """Human-study data that does not follow the layout; the message says where."""


def blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def as_number(value: object) -> float | None:
    """A finite number from a cell or field value (a number or numeric text; not a boolean or a
    date); None when it is not one."""
    if isinstance(value, bool) or isinstance(value, (datetime, date, time)):
        return None
    if isinstance(value, (int, float)):
        out = float(value)
    else:
        text = str(value).strip()
        if text.count(",") == 1 and "." not in text:
            text = text.replace(",", ".")  # a decimal comma
        try:
            out = float(text)
        except ValueError:
            return None
    if out != out or out in (float("inf"), float("-inf")):
        return None
    return out


def as_text(value: object) -> str:
    """Identifiers as text: integral floats lose the '.0' (ids typed as numbers in Excel)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


@dataclass
class Sheet:
    file: Path
    name: str  # as in the workbook
    columns: list[str]  # headers as written (stripped), in sheet order
    header_row: int = 1
    rows: list[tuple[int, dict[str, object]]] = field(default_factory=list)  # (excel row, header -> value)
    duplicates: set[str] = field(default_factory=set)  # name_key of headers written twice

    def where(self, row: int | None = None, column: str | None = None) -> str:
        out = f"{self.file.name}, sheet {self.name!r}"
        if row is not None:
            out += f", row {row}"
        if column is not None:
            out += f", column {column!r}"
        return out

    def find(self, names: list[str]) -> str | None:
        """The header matching the first accepted name that the sheet has, else None."""
        by_key = {name_key(c): c for c in self.columns}
        for n in names:
            hit = by_key.get(name_key(n))
            if hit is not None:
                if name_key(hit) in self.duplicates:
                    raise KnowChatFormatError(f"{self.where(self.header_row)}: column {hit!r} appears twice")
                return hit
        return None

    def require(self, what: dict[str, list[str]]) -> dict[str, str]:
        """{logical: accepted names} -> {logical: header}; a missing column is an error."""
        found = {k: self.find(names) for k, names in what.items()}
        missing = [names for k, names in what.items() if found[k] is None]
        if missing:
            raise KnowChatFormatError(
                f"{self.where()}: missing column(s) "
                + ", ".join(repr(n[0]) + (f" (or {', '.join(repr(x) for x in n[1:])})" if len(n) > 1 else "") for n in missing)
                + f"; header row {self.header_row} has: {', '.join(repr(c) for c in self.columns) or 'nothing'}"
            )
        return found  # type: ignore[return-value]

    def text(self, row: int, values: dict[str, object], column: str, *, required: bool = True) -> str | None:
        value = values.get(column)
        if blank(value):
            if required:
                raise KnowChatFormatError(f"{self.where(row, column)}: empty cell")
            return None
        return as_text(value)

    def number(self, row: int, values: dict[str, object], column: str, *, required: bool = True) -> float | None:
        value = values.get(column)
        if blank(value):
            if required:
                raise KnowChatFormatError(f"{self.where(row, column)}: empty cell, expected a number")
            return None
        out = as_number(value)
        if out is None:
            raise KnowChatFormatError(f"{self.where(row, column)}: expected a number, got {value!r}")
        return out


def read_sheets(path: Path, wanted: dict[str, list[str]]) -> tuple[dict[str, Sheet], list[str]]:
    """Read the sheets named by ``wanted`` ({logical: accepted sheet names}) that the workbook has.

    Returns ({logical: Sheet} for those present, every sheet name in the workbook). Which sheets
    are required is the caller's business.
    """
    try:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many types for a broken file
        raise KnowChatFormatError(f"{path.name}: not a readable XLSX workbook ({type(exc).__name__}: {exc})") from exc
    try:
        by_key: dict[str, str] = {}
        for n in wb.sheetnames:
            by_key.setdefault(name_key(n), n)
        out: dict[str, Sheet] = {}
        for logical, names in wanted.items():
            hit = next((by_key[name_key(n)] for n in names if name_key(n) in by_key), None)
            if hit is not None:
                out[logical] = _read_sheet(path, wb[hit], hit)
        return out, list(wb.sheetnames)
    finally:
        wb.close()


def _read_sheet(path: Path, ws, name: str) -> Sheet:
    rows = ws.iter_rows(values_only=True)
    header, header_row = None, 0
    for header_row, values in enumerate(rows, start=1):  # leading empty rows are skipped
        if values is not None and not all(blank(v) for v in values):
            header = values
            break
    if header is None:
        return Sheet(file=path, name=name, columns=[], header_row=1)
    columns = [as_text(h) if not blank(h) else "" for h in header]
    if columns and columns[0] == "":
        columns[0] = "(index)"  # pandas writes its index under an empty header
    seen: set[str] = set()
    dups: set[str] = set()
    for c in columns:
        k = name_key(c)
        if c and k in seen:
            dups.add(k)
        seen.add(k)
    sheet = Sheet(file=path, name=name, columns=[c for c in columns if c], header_row=header_row, duplicates=dups)
    for excel_row, values in enumerate(rows, start=header_row + 1):
        if values is None or all(blank(v) for v in values):
            continue
        sheet.rows.append((excel_row, {c: v for c, v in zip(columns, values) if c}))
    return sheet
