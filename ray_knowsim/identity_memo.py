"""Values made once per live object and found again by the object's identity.

Why identity: the objects the request path shares (a loaded graph, its index, a decoding schema
that every request of an item carries) are unhashable or costly to hash, and are never changed
once made, so the same object always means the same value. Why the holder is kept: an id is only
its object's while the object lives; keeping it in the entry means a later object can never get
that id while the entry is there. Bounded: past ``limit`` entries the oldest leaves first.
"""

from __future__ import annotations

from typing import Any, Callable

_MISSING = object()


class IdentityMemo:
    """``{object (by identity): value}``, holding each object, at most ``limit`` entries."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: dict[int, tuple[Any, Any]] = {}

    def get(self, obj: Any, default: Any = None) -> Any:
        hit = self._entries.get(id(obj))
        return hit[1] if hit is not None and hit[0] is obj else default

    def put(self, obj: Any, value: Any) -> Any:
        key = id(obj)
        if key not in self._entries and len(self._entries) >= self.limit:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = (obj, value)
        return value

    def get_or_make(self, obj: Any, make: Callable[[Any], Any]) -> Any:
        value = self.get(obj, _MISSING)
        return self.put(obj, make(obj)) if value is _MISSING else value

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["IdentityMemo"]
