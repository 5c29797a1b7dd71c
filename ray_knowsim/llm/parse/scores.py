"""Scores in a judge's answer, read as they were meant, or refused with what is wrong.

The scale of a field comes from the output schema itself (its ``ge``/``le`` bounds in
:mod:`ray_knowsim.schema.outputs`), so a schema that changes its scales needs nothing here. A score
is read as:

* a number (``0.7``, or the string ``"0.7"``): itself, when it lies on the field's scale;
* a fraction ``"x/y"`` (or ``"x out of y"``): on a 0–1 field the value x/y; on a field whose scale
  tops at ``y`` (``"7/10"`` on 1–10) the score x; out of anything else it is refused;
* a percentage ``"70%"``: on a 0–1 field 0.70; a percentage is marked by ``%`` only (a bare 70 is
  not read as one), and is refused on any other scale.

Anything else (a number off the scale, words, true/false) is refused with the field, the value and
the scale it must be on, so the one repair round (:mod:`ray_knowsim.sim.ask`) can ask for exactly
that. Nothing is rescaled by guessing: ``7`` on a 0–1 field is refused, not read as 0.07 or 0.7.

**Mixed scales in one answer** are refused too. An answer that writes one 0–1 field on another
scale (``"information_calibration": "8.3/10"`` or ``"83%"``) and another 0–1 field as a bare whole
number (``"perceived_overload": 1``) has left the second one ambiguous: 1 on its own scale, or 1
out of 10 (0.1), as the judge meant in the measured case (1 of 16 answers behind a rewriting
proxy). Neither reading is taken: the bare field is refused with both values named, and the repair
round asks for every score on its own scale. (0 reads the same on every scale; a bare decimal such
as 0.4 is plainly on the 0–1 scale.)
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel

_NUM = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_NUMBER = re.compile(rf"^({_NUM})$")
_FRACTION = re.compile(rf"^({_NUM})\s*(?:/|\bout\s+of\b)\s*({_NUM})$", re.IGNORECASE)
_PERCENT = re.compile(rf"^({_NUM})\s*%$")


def score_scales(model: type[BaseModel]) -> dict[str, tuple[float, float, bool]]:
    """``{field: (low, high, integer)}`` for every numeric field of ``model`` bounded on both sides."""
    out: dict[str, tuple[float, float, bool]] = {}
    for name, info in model.model_fields.items():
        if info.annotation not in (int, float):
            continue
        low = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
        high = next((m.le for m in info.metadata if hasattr(m, "le")), None)
        if low is not None and high is not None:
            out[name] = (float(low), float(high), info.annotation is int)
    return out


def _scale_text(low: float, high: float) -> str:
    return f"{low:g}–{high:g}"


def _on_scale(key: str, value: float, shown: str, low: float, high: float, integer: bool) -> str | None:
    """The complaint about ``value`` (read from ``shown``), or None when it lies on the scale."""
    if math.isnan(value) or not low <= value <= high:
        read = "" if shown == f"{value:g}" else f" (read as {value:g})"
        return f"{key} is {shown}{read}, outside its {_scale_text(low, high)} scale: answer with a number from {low:g} to {high:g}"
    if integer and not float(value).is_integer():
        return f"{key} is {shown}: answer with a whole number from {low:g} to {high:g}"
    return None


def read_score(key: str, raw: Any, low: float, high: float, integer: bool = False) -> tuple[float | None, str | None, str | None]:
    """(value, repair, complaint) of one score: a value (with the repair made to read it, if any),
    or the complaint that is sent back to the model."""
    scale = _scale_text(low, high)
    unit = (low, high) == (0.0, 1.0)
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return None, None, f"{key} is {raw!r}: answer with a number on its {scale} scale"
    if not isinstance(raw, str):
        complaint = _on_scale(key, float(raw), f"{raw:g}" if isinstance(raw, float) else str(raw), low, high, integer)
        return (None, None, complaint) if complaint else (raw, None, None)
    text = raw.strip()
    shown = repr(raw)
    if m := _NUMBER.match(text):
        value = float(m.group(1))
        complaint = _on_scale(key, value, shown, low, high, integer)
        return (None, None, complaint) if complaint else (value, f"number_from_string:{key}", None)
    if m := _FRACTION.match(text):
        x, y = float(m.group(1)), float(m.group(2))
        if y <= 0:
            return None, None, f"{key} is {shown}, a fraction out of {m.group(2)}: answer with a number on its {scale} scale"
        if unit:
            value, repair = x / y, f"fraction:{key}={text}"
        elif y == high:
            value, repair = x, f"out_of_top:{key}={text}"
        else:
            return None, None, (f"{key} is {shown}, out of {m.group(2)}, but its scale is {scale}: "
                                f"answer with a number from {low:g} to {high:g}")
        complaint = _on_scale(key, value, shown, low, high, integer)
        return (None, None, complaint) if complaint else (value, repair, None)
    if m := _PERCENT.match(text):
        if not unit:
            return None, None, f"{key} is {shown}, a percentage, but its scale is {scale}: answer with a number from {low:g} to {high:g}"
        value = float(m.group(1)) / 100.0
        complaint = _on_scale(key, value, shown, low, high, integer)
        return (None, None, complaint) if complaint else (value, f"percent:{key}={text}", None)
    return None, None, f"{key} is {shown}, not a number: answer with a number on its {scale} scale"


def read_scores(data: dict[str, Any], model: type[BaseModel], repairs: list[str]) -> dict[str, str]:
    """Read every bounded score of ``model`` present in ``data`` in place (see the module docstring);
    the repairs made are appended to ``repairs``. Returns the complaints by field (empty: all read)."""
    complaints: dict[str, str] = {}
    rescaled: dict[str, str] = {}  # 0–1 fields written on another scale ("8.3/10", "83%") -> as written
    bare_whole: list[str] = []  # 0–1 fields written as a bare whole number above 0 (1): ambiguous beside those
    for key, (low, high, integer) in score_scales(model).items():
        if key not in data:
            continue  # missing fields are the schema's to report
        raw = data[key]
        value, repair, complaint = read_score(key, raw, low, high, integer)
        if complaint is not None:
            complaints[key] = complaint
            continue
        if (low, high) == (0.0, 1.0):
            if repair is not None and repair.startswith(("fraction:", "percent:")) and not _out_of_one(raw):
                rescaled[key] = str(raw).strip()
            elif repair is None or repair.startswith("number_from_string:"):
                if float(value) > 0 and float(value).is_integer():
                    bare_whole.append(key)
        data[key] = value
        if repair:
            repairs.append(repair)
    if rescaled and bare_whole:
        shown = ", ".join(f"{k} {v!r}" for k, v in rescaled.items())
        for key in bare_whole:
            complaints[key] = (f"{key} is a bare {data[key]:g} while {shown} is written on another scale: {key} could mean "
                               f"{data[key]:g} on its 0–1 scale or {data[key]:g} on that other scale; answer every score on "
                               "its own scale as a plain number (0–1 fields as decimals such as 0.1 or 1.0)")
    return complaints


def _out_of_one(raw: Any) -> bool:
    """``"x/1"``: a fraction that stays on the 0–1 scale."""
    m = _FRACTION.match(str(raw).strip())
    return bool(m) and float(m.group(2)) == 1.0


__all__ = ["read_score", "read_scores", "score_scales"]
