"""The outcome of reading one model reply, and small helpers every reader shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Iterable, TypeVar

from pydantic import ValidationError

T = TypeVar("T")


@dataclass(frozen=True)
class ParseResult(Generic[T]):
    """Either a value, or a named failure reason (``<role>_empty``, ``<role>_invalid_json``,
    ``<role>_invalid_output``, ...) with a precise ``detail`` that is sent back to the model once
    (:func:`ray_knowsim.prompts.repair.build_retry`). ``repairs`` lists what was normalised to read
    the reply (recorded with the run, never hidden); ``warnings`` what was accepted but odd."""

    value: T | None = None
    error: str | None = None  # named failure reason, e.g. "extractor_invalid_json"
    detail: str = ""  # what exactly is wrong (sent back to the model by prompts.repair.build_retry)
    repairs: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    raw: Any = None  # the decoded JSON, when there was one

    @property
    def ok(self) -> bool:
        return self.error is None


def fail(role: str, kind: str, detail: str, repairs=(), raw=None) -> ParseResult:
    return ParseResult(error=f"{role}_{kind}", detail=detail, repairs=tuple(repairs), raw=raw)


def validation_detail(exc: ValidationError, *, skip: Iterable[str] = ()) -> str:
    """The first errors of ``exc`` as ``where: what``; ``skip``: top-level fields already complained about."""
    skipped = set(skip)
    errors = [e for e in exc.errors() if not (e["loc"] and e["loc"][0] in skipped)]
    parts = []
    for err in errors[:8]:
        where = ".".join(str(x) for x in err["loc"]) or "(object)"
        parts.append(f"{where}: {err['msg']}")
    more = len(errors) - 8
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def rename(data: dict, canonical: str, aliases: Iterable[str], repairs: list[str]) -> None:
    if canonical in data:
        return
    for alias in aliases:
        if alias in data:
            data[canonical] = data.pop(alias)
            repairs.append(f"renamed:{alias}->{canonical}")
            return
