"""Read and write ``RUN_DIR/decisions.json`` (the schema is :mod:`ray_knowsim.schema.decisions`)."""

from __future__ import annotations

import json
from pathlib import Path

from ray_knowsim.io.parquet import atomic_write_text
from ray_knowsim.schema.decisions import DecisionsFile

DECISIONS_FILE = "decisions.json"


def write_decisions(run_dir: str | Path, record: DecisionsFile) -> Path:
    run_dir = Path(run_dir)
    path = run_dir / DECISIONS_FILE
    atomic_write_text(path, json.dumps(record.model_dump(mode="json"), indent=1), run_dir / ".tmp")
    return path


class DecisionsFormatError(ValueError):
    """A decisions.json this version cannot read (written by another version of the procedure)."""


def read_decisions(run_dir: str | Path) -> DecisionsFile | None:
    """The run's decisions (None for a run that was not adaptive); a record of another format is
    refused by name, never half-read."""
    path = Path(run_dir) / DECISIONS_FILE
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    try:
        found = json.loads(text).get("format")
    except (ValueError, AttributeError) as exc:
        raise DecisionsFormatError(f"{path} is not a JSON object ({exc})") from None
    want = DecisionsFile.model_fields["format"].default
    if found != want:
        raise DecisionsFormatError(f"{path} has format {found!r}; this version reads format {want} (the adaptive "
                                   "procedure changed: an exact group-sequential design on the item win rate). Re-decide "
                                   "with ray-knowsim adaptive-replay RUN_DIR, or move the file away to resume afresh")
    return DecisionsFile.model_validate_json(text)


__all__ = ["DECISIONS_FILE", "DecisionsFormatError", "read_decisions", "write_decisions"]
