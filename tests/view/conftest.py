"""The viewer's fixture folder (built once per session) and a running viewer over it.

Layout under ``<tmp>/served`` (the ONE folder the viewer is given) and ``<tmp>/secret`` (outside it):

    served/runs/complete      60 sessions, a few failed, priced, model text with HTML/JS probes, tables/
    served/runs/interrupted   40 of 96 planned sessions, manifest status "interrupted"
    served/runs/all_failed    24 of 24 sessions failed (HTTP 404, no turns)
    served/runs/paper         540 sessions (paper-sized), plus an uncommitted leftover file
    served/runs/evil          a marker naming a file in secret/, symlinks pointing into secret/
    served/sweeps/sens        a real sweep over runs/complete (run inline, no Ray)
    served/cmp                a real `compare` of runs/complete
    secret/                   files no request may read (their text holds SECRET)
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.doubles.rundirs import CONFIG_HASH, SECRET, committed_run, write_tables


def _evil(runs: Path, secret: Path) -> Path:
    run = committed_run(runs, "evil", n_sessions=16, seed=5)
    # a commit marker whose shard id walks out of the run: its "files" lie in secret/
    token = "0badf00d"
    shard = "../../../../secret/escape"
    leaked = pq.read_table(next((run / "sessions").glob("*.parquet")))
    leaked = leaked.set_column(leaked.schema.get_field_index("session_id"), "session_id", pa.array([SECRET] * leaked.num_rows))
    for table in ("sessions", "turns"):
        pq.write_table(leaked if table == "sessions" else pa.table({"session_id": [SECRET]}), secret / f"escape.{token}.parquet")
    marker = {"shard_id": shard, "config_hash": CONFIG_HASH, "token": token, "session_ids": [SECRET], "failed": {}, "turns": 0,
              "committed_at": 0.0, "attempt": 1, "summary": {}, "format": 1}
    (run / "shards").mkdir(exist_ok=True)  # format-1 markers, as an earlier release wrote them
    (run / "shards" / "shard-escape.json").write_text(json.dumps(marker), encoding="utf-8")
    # a marker file linked in from outside, naming files that do lie inside the run
    token = "feedface"
    pq.write_table(leaked, run / "sessions" / f"shard-900000.{token}.parquet")
    pq.write_table(leaked.slice(0, 0).select(["session_id"]), run / "turns" / f"shard-900000.{token}.parquet")
    (secret / "marker.json").write_text(json.dumps({**marker, "shard_id": "shard-900000", "token": token}), encoding="utf-8")
    os.symlink(secret / "marker.json", run / "shards" / "shard-900000.json")
    (run / "tables").mkdir(exist_ok=True)
    os.symlink(secret / "secret.csv", run / "tables" / "leak.csv")
    os.symlink(secret / "secret.csv", run / "leak.csv")
    os.symlink(secret / "secret.png", run / "leak.png")
    os.symlink(secret, run / "secretdir")
    os.symlink(secret / "manifest.json", run / "estimate.json")  # a JSON the run page reads: must not be read through the link
    return run


@pytest.fixture(scope="session")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("view")
    served, secret = base / "served", base / "secret"
    runs = served / "runs"
    runs.mkdir(parents=True)
    secret.mkdir()
    (secret / "secret.csv").write_text(f"a,b\n{SECRET},1\n")
    (secret / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\n" + SECRET.encode())
    (secret / "secret.txt").write_text(SECRET)
    (secret / "manifest.json").write_text(json.dumps({"totals": {"requests": SECRET}}))
    complete = committed_run(runs, "complete", n_sessions=60, failed_share=0.08, probe=True, price=0.0125, seed=3)
    write_tables(complete, probe=True)
    committed_run(runs, "interrupted", n_sessions=40, planned=96, status="interrupted", seed=4)
    committed_run(runs, "all_failed", n_sessions=24, all_failed=True, status="ok_with_failed_sessions", seed=6)
    committed_run(runs, "paper", n_sessions=540, max_turns=15, failed_share=0.02, leftover=True, seed=7)
    _evil(runs, secret)
    _sweep(complete, served / "sweeps" / "sens")
    _compare(complete, served / "cmp")
    return {"base": base, "served": served, "secret": secret, "runs": runs}


def _sweep(run: Path, out: Path) -> None:
    from ray_knowsim.sweep.config import parse_sweep_config
    from ray_knowsim.sweep.runner import run_sweep

    cfg = parse_sweep_config({
        "name": "sens", "source": {"run_dir": str(run)}, "output": str(out), "config_dir": str(out.parent),
        "space": {"grid": {"capacity_ratio": [0.45, 0.55], "hinge": [True, False]}},
        "report": {"metrics": ["nkg", "dc", "co"], "ranking_metrics": ["nkg"], "rank_by": "condition", "group_by": ["knowledge_level"],
                   "max_param_plots": 1},
    })  # fmt: skip
    run_sweep(cfg, use_ray=False, progress=lambda _msg: None)


def _compare(run: Path, out: Path) -> None:
    from ray_knowsim.compare.pipeline import compare_runs

    compare_runs([run], out)


@pytest.fixture(scope="session")
def viewer(folders):
    """A viewer serving ``served/`` on a free loopback port: (base URL, its ViewState)."""
    from ray_knowsim.view.data import Files
    from ray_knowsim.view.routes import ViewState
    from ray_knowsim.view.server import serve

    state = ViewState(Files([folders["served"]]))
    ready: list[str] = []
    started = threading.Event()
    stop = threading.Event()

    def on_ready(url: str) -> None:
        ready.append(url)
        started.set()

    thread = threading.Thread(target=serve, args=(state, "127.0.0.1", 0, on_ready, stop), daemon=True)
    thread.start()
    assert started.wait(30), "the viewer did not start"
    yield ready[0], state
    stop.set()
    thread.join(10)
