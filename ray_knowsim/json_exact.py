"""JSON text decoded to exactly the values ``json.loads`` gives, at orjson's speed where it can.

Why: the client decodes every answer it reads and the driver every line of every spend journal (two
per request), and orjson does either in a fraction of json's time. Where the two part ways, json's
reading is the one kept: what orjson refuses (NaN, Infinity, a lone surrogate, UTF-16, a byte-order
mark, nesting past 1024) is decoded by json, and so is a text in which orjson read a float that json
reads as an integer (one outside 64 bits; tests/llm/test_fast_paths.py).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

#: where orjson and json part ways on a text both decode: an integer outside 64 bits (json: an
#: int; orjson: a float, which can round to -2**63 itself); a float of an integer value this far
#: from 0 is decoded again by json (a real float reads the same there)
_WIDE = float(2**63)
_NESTED_OR_FLOAT = frozenset({dict, list, float})
_NOT_ORJSON = object()


def loads_as_json(raw: bytes | str) -> Any:
    """``json.loads(raw)``'s value (and its ValueError for a text that is no JSON), by orjson
    where that gives the same value."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = _NOT_ORJSON
    if data is _NOT_ORJSON or (data.__class__ in _NESTED_OR_FLOAT and _wide_float(data)):
        return json.loads(raw)
    return data


def _wide_float(value: Any) -> bool:
    """Whether ``value`` holds, at any depth, a float with an integer value outside 64 bits (what
    orjson makes of such an integer; a real float that large reads the same in json)."""
    kind = value.__class__
    if kind is dict or kind is list:
        for item in value.values() if kind is dict else value:
            if item.__class__ in _NESTED_OR_FLOAT and _wide_float(item):
                return True
        return False
    return kind is float and value.is_integer() and abs(value) >= _WIDE


__all__ = ["loads_as_json"]
