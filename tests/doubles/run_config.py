"""Run test helpers (tests/run, tests/backends, tests/score and others): a small run config over the
package's demo items (``small_config``, ``write_config``), and a run's rows read and compared
(``rows``, ``assert_same_rows``). ``ray_local``, one local Ray per test module, is in
``tests/conftest.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import yaml

STANDIN = "tests.doubles.standin:run_shard"


def small_config(**overrides: Any) -> dict[str, Any]:
    """24 sessions (4 math demo items x 3 levels x 2 conditions), 6 shards of 4, 3 turns."""
    cfg: dict[str, Any] = {
        "name": "t",
        "tasks": [{"name": "math", "items": "pkg:demo/math.jsonl", "graphs": "pkg:demo/iu_math.json"}],
        "models": {"sim": {"backend": "offline"}},
        "roles": {"user_sim": "sim", "extractor": "sim", "judge": "sim", "assistant": {"model": "sim"}},
        "conditions": [{"strategy": "adaptive"}, {"strategy": "socratic"}],
        "max_turns": 3,
        "engine": {"shard_size": 4, "shard_fn": STANDIN},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


def write_config(folder: Path, data: dict[str, Any], name: str = "run.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


KEYS = {"sessions": ["session_id"], "turns": ["session_id", "turn"]}


def rows(run_dir: Path, table: str, *, scores: bool = True) -> pd.DataFrame:
    """A table's counted rows (``sessions`` or ``turns``), sorted by their key; sessions with the
    judges' scores joined in (as tables see them) unless ``scores`` is false."""
    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.score.store import RunScores

    reader = RunReader.open(run_dir)
    data = (reader.sessions if table == "sessions" else reader.turns).read()
    if table == "sessions" and scores:
        data = RunScores.load(run_dir, reader).attach(data)
    return data.to_pandas().sort_values(KEYS[table]).reset_index(drop=True)


def assert_same_rows(a: Path, b: Path, *, scores: bool = True) -> None:
    """Both runs' sessions and turns are equal, and neither has a row twice (a session, or a
    session's turn)."""
    for table, key in KEYS.items():
        x, y = rows(a, table, scores=scores), rows(b, table, scores=scores)
        for run_dir, df in ((a, x), (b, y)):
            assert not df.duplicated(key).any(), f"{table} of {run_dir}: a row twice"
        assert len(x) == len(y), (table, len(x), len(y))
        pd.testing.assert_frame_equal(x, y)
