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


def read_decisions(run_dir: str | Path) -> DecisionsFile | None:
    """The run's decisions (None for a run that was not adaptive)."""
    path = Path(run_dir) / DECISIONS_FILE
    if not path.is_file():
        return None
    return DecisionsFile.model_validate_json(path.read_text(encoding="utf-8"))


__all__ = ["DECISIONS_FILE", "read_decisions", "write_decisions"]
