"""scripts/gpu_smoke.sh cannot run here (no GPU): check that it parses, and run the CPU-safe parts
of its Python half — the recorded structured requests of every role and the parse check — with
the offline model standing in for vLLM."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from tests.doubles.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _smoke():
    return load_script("scripts/gpu_smoke.py")


def test_shell_script_parses():
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu_smoke.sh")], check=True)


def test_structured_requests_of_every_role_are_recorded_and_parse():
    from ray_knowsim.llm.offline import OfflineModel
    from ray_knowsim.llm.protocol import generate_all

    smoke = _smoke()
    by_role, graphs = smoke.recorded_requests(64)
    assert set(smoke.ROLES_STRUCTURED) <= set(by_role)
    names = set()
    for role in smoke.ROLES_STRUCTURED:
        reqs = by_role[role]
        assert len(reqs) == 64 and len({r.request_id for r in reqs}) == 64
        assert all(r.json_schema is not None and r.schema_name for r in reqs)
        names |= {r.schema_name for r in reqs}
        off = OfflineModel(name="m")
        off.register_graphs(graphs)
        outs = asyncio.run(generate_all(off, reqs))
        assert all(smoke.parses(r, o.text) for r, o in zip(reqs, outs))
    assert {"UserTurn", "SignalReport", "InteractionRating"} <= names
