"""Run directories for the viewer's tests, committed the way the engine commits them.

Rows come from the synthetic writer (``tests/doubles/synthetic.py``: random signals through the
real rules); this module cuts them into shards and commits each with ``io.commits.write_commit`` (Parquet
files + commit marker), then writes a manifest with the run's plan and status. So the viewer reads
what a real run leaves behind, including an interrupted run (fewer shards than planned), a run
whose every session failed, and leftovers of an interrupted commit that must not be counted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ray_knowsim.io.commits import write_commit
from ray_knowsim.io.rundir import RunReader
from ray_knowsim.io.tables import write_table
from tests.doubles.synthetic import write_synthetic_run

CONFIG_HASH = "0" * 16
#: injected into model text: must show up as text, never run or become markup
PROBE_IMG = '<img src=x onerror="window.__probe_img=1">'
PROBE_SCRIPT = '</script><script>window.__probe_script=1</script>'
PROBE_TEXT = f"{PROBE_IMG} {PROBE_SCRIPT} <b>not bold</b>"
#: the text of the files outside the served folder: no response may contain it
SECRET = "SECRET-7f3a-do-not-serve"
HTTP_404 = "assistant_http_404: The model `gpt-nonexistent` does not exist"


def _manifest(name: str, planned: int, status: str, seconds: float, models: dict[str, Any], conditions: list[str],
              finished: bool = True) -> dict[str, Any]:
    inv = {"started_at": "2026-12-01T10:00:00+0000", "finished_at": "2026-12-01T10:05:00+0000" if finished else None,
           "status": status if finished else "running", "argv": ["ray-knowsim", "run", f"configs/{name}.yaml"],
           "totals": {"seconds": seconds}}
    return {
        "format": 1, "run_id": f"{name}-00000000", "name": name, "config_hash": CONFIG_HASH,
        "created_at": "2026-12-01T10:00:00+0000", "status": status if finished else None, "invocations": [inv],
        "plan": {"n_sessions": planned, "n_shards": -(-planned // 16), "shard_size": 16, "conditions": conditions},
        "config": {"name": name, "models": models}, "test_doubles": [], "backends": {},
    }  # fmt: skip


def committed_run(
    root: Path,
    name: str,
    *,
    n_sessions: int,
    planned: int | None = None,
    status: str = "ok",
    shard_size: int = 16,
    failed_share: float = 0.0,
    all_failed: bool = False,
    probe: bool = False,
    conditions: dict[str, tuple[float, float, float]] | None = None,
    max_turns: int = 6,
    seed: int = 0,
    price: float | None = None,
    leftover: bool = False,
    edit: Callable[[pa.Table, pa.Table | None], tuple[pa.Table, pa.Table | None]] | None = None,
) -> Path:
    """A committed run at ``root/name`` holding ``n_sessions`` of ``planned`` sessions;
    ``edit(sessions, turns)`` returns the tables to commit instead (chosen failures, a broken simulator)."""
    scratch = root / f".{name}-synthetic"
    syn = write_synthetic_run(scratch, n_sessions=n_sessions, max_turns=max_turns, seed=seed, failed_share=failed_share,
                              conditions=conditions, run_id=name, message_chars=(200, 700))
    sessions = pa.concat_tables([pq.read_table(f) for f in syn.session_files])
    turns = pa.concat_tables([pq.read_table(f) for f in syn.turn_files]) if syn.turn_files else None
    shutil.rmtree(scratch)
    if all_failed:
        n = sessions.num_rows
        sessions = sessions.set_column(sessions.schema.get_field_index("status"), "status", pa.array(["failed"] * n))
        sessions = sessions.set_column(sessions.schema.get_field_index("error"), "error", pa.array([HTTP_404] * n))
        sessions = sessions.set_column(sessions.schema.get_field_index("turns"), "turns", pa.array([0] * n, pa.int64()))
        turns = turns.slice(0, 0) if turns is not None else None
    if probe:
        first = sessions.column("session_id")[0].as_py()
        msgs = turns.to_pylist()
        for row in msgs:
            if row["session_id"] == first and row["turn"] == 1:
                row["user_message"] = f"{row['user_message']} {PROBE_TEXT}"
                row["assistant_message"] = f"{PROBE_SCRIPT} {row['assistant_message']}"
        turns = pa.Table.from_pylist(msgs, schema=turns.schema)
        errors = sessions.column("error").to_pylist()
        failed = [k for k, s in enumerate(sessions.column("status").to_pylist()) if s != "ok"]
        for k in failed[:1]:
            errors[k] = f"extractor_invalid_json: {PROBE_TEXT}"
        sessions = sessions.set_column(sessions.schema.get_field_index("error"), "error", pa.array(errors, pa.string()))
    if price is not None:
        sessions = sessions.set_column(sessions.schema.get_field_index("cost_usd"), "cost_usd", pa.array([price] * sessions.num_rows))
    if edit is not None:
        sessions, turns = edit(sessions, turns)
    run_dir = root / name
    ids = sessions.column("session_id").to_pylist()
    for k in range(0, len(ids), shard_size):
        part = ids[k : k + shard_size]
        s = sessions.slice(k, len(part))
        t = turns.filter(pc.is_in(turns.column("session_id"), pa.array(part))) if turns is not None and turns.num_rows else turns.slice(0, 0)
        write_commit(run_dir, shard_id=f"shard-{k // shard_size:06d}", config_hash=CONFIG_HASH, sessions=s, turns=t)
    if leftover:  # an interrupted commit's files: on disk, named by no marker
        pq.write_table(sessions.slice(0, shard_size), run_dir / "sessions" / "shard-000000.deadbeef.parquet")
    names = sorted({str(c) for c in sessions.column("condition").to_pylist()})
    models = {"offline": {"backend": "offline"}, "gpt": {"backend": "http", "model": "gpt-nonexistent"}}
    manifest = _manifest(name, planned or n_sessions, status, 12.5 * n_sessions / 16, models, names)
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return run_dir


def write_tables(run_dir: Path, probe: bool = False) -> None:
    """A small ``tables/marginal`` (Parquet + CSV) as the reduction writes it: the viewer shows it as found."""

    sessions = RunReader.open(run_dir).sessions.read().to_pandas()
    ok = sessions[sessions["status"] == "ok"]
    df = ok.groupby("condition", as_index=False)[["kg", "co", "dc"]].mean()
    if probe:
        df.loc[len(df)] = {"condition": PROBE_TEXT, "kg": 0.0, "co": 0.0, "dc": 0.0}
    write_table(df, run_dir / "tables", "marginal")


def winning_every_item(winner: str, per_item: int = 6) -> Callable[[pa.Table, Any], tuple[pa.Table, Any]]:
    """An ``edit`` for :func:`committed_run`: ``per_item`` sessions per item (each item at every
    level once per condition), every one ok, and ``winner``'s KG one above the others' on every
    item, so the sign test finds it better (a significant verdict to read the surfaces of)."""

    def edit(sessions: pa.Table, turns: Any) -> tuple[pa.Table, Any]:
        n = sessions.num_rows

        def put(table: pa.Table, name: str, values: list) -> pa.Table:
            return table.set_column(table.schema.get_field_index(name), name, pa.array(values, table.schema.field(name).type))

        conds = sessions.column("condition").to_pylist()
        sessions = put(sessions, "item_id", [f"it{k // per_item:03d}" for k in range(n)])
        sessions = put(put(put(sessions, "kg", [5.0 + (1.0 if c == winner else 0.0) for c in conds]), "trial", [0] * n),
                       "initial_states", [[0]] * n)
        return put(sessions, "status", ["ok"] * n), turns

    return edit
