"""docs/extending.md followed from OUTSIDE the repository: the doc's own strategy, simulator and backend code,
written into a scratch package that is neither in the repo nor installed, named under ``plugins:``
in a run config and run with the ``ray-knowsim`` console script as a user would (offline models,
no API key). The doc's code blocks are taken from the doc itself, so the doc cannot drift from what
works; only the backend's ``generate`` body, which the doc leaves as ``...``, is filled in here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "extending.md"

# what a user writes where the doc's backend example says ``...``: an offline canned tutor
GENERATE_BODY = """\
        last = request.messages[-1]["content"] if request.messages else ""
        return ChatResponse(text="[mine] Let us go step by step. You said: " + last[:60])
"""


def doc_block(first_line: str) -> str:
    """The ```python block of docs/extending.md whose first line is ``first_line``."""
    for block in re.findall(r"```python\n(.*?)^ *```", DOC.read_text(encoding="utf-8"), flags=re.S | re.M):
        block = textwrap.dedent(block)  # blocks inside a numbered list are indented
        if block.splitlines()[0].strip() == first_line:
            return block
    raise AssertionError(f"docs/extending.md has no python block starting with {first_line!r}")


def cli() -> str:
    exe = Path(sys.executable).parent / "ray-knowsim"
    return str(exe) if exe.is_file() else (shutil.which("ray-knowsim") or pytest.skip("no ray-knowsim console script"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_docs_strategy_and_backend_run_from_a_package_outside_the_repo(tmp_path):
    pkg = tmp_path / "ext"
    (pkg / "my_plugins").mkdir(parents=True)
    (pkg / "my_project").mkdir()
    (pkg / "my_plugins" / "checklist.py").write_text(doc_block("# my_plugins/checklist.py"), encoding="utf-8")
    (pkg / "my_plugins" / "plain_cot.py").write_text(doc_block("# my_plugins/plain_cot.py"), encoding="utf-8")
    backend = doc_block("# my_project/my_backend.py")
    stub = re.search(r"^ +\.\.\.  # a failure is ChatResponse.*\n", backend, flags=re.M)
    assert stub, "the backend example's generate() body changed; update GENERATE_BODY's anchor"
    (pkg / "my_project" / "my_backend.py").write_text(backend.replace(stub.group(0), GENERATE_BODY), encoding="utf-8")
    config = {
        "name": "ext",
        "plugins": ["my_plugins.checklist", "my_plugins.plain_cot", "my_project.my_backend"],
        "tasks": [{"name": "math", "items": "pkg:demo/math.jsonl", "graphs": "pkg:demo/iu_math.json"}],
        "levels": ["novice"],
        "models": {"offline": {"backend": "offline"},
                   "tutor": {"backend": "mine", "endpoint": "https://example.org/v1"}},
        "roles": {"user_sim": "offline", "extractor": "offline", "judge": "offline", "assistant": {"model": "offline"}},
        "conditions": [{"strategy": "checklist"}, {"assistant": "tutor", "strategy": "checklist"},
                       {"simulator": "plain-cot", "strategy": "checklist"}],
        "trials": 1,
        "max_turns": 2,
        "engine": {"shard_size": 4},
    }
    (pkg / "run.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(pkg), "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.run([cli(), "run", "run.yaml", "-o", str(out), "--quiet"], cwd=pkg, env=env,
                          capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]

    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["backends"]["assistant:tutor"] == "mine"
    assert "assistant:tutor" not in manifest["test_doubles"]  # the plugin did not declare double=True
    turns = pq.read_table(sorted((out / "turns").glob("*.parquet"))).to_pylist()
    by_condition: dict[str, list[str]] = {}
    for t in turns:
        condition = t["session_id"].split("/")[3]  # task/item/level/condition/trial
        by_condition.setdefault(condition, []).append(t["assistant_message"])
    # the strategy's offline reply ran in the Ray workers (imported there by its "module:function")
    assert by_condition["offline:checklist"] and all(m.startswith("Check these next:") for m in by_condition["offline:checklist"])
    # the plugin backend answered the tutor condition
    assert by_condition["tutor:checklist"] and all(m.startswith("[mine] ") for m in by_condition["tutor:checklist"])
    sessions = pq.read_table(sorted((out / "sessions").glob("*.parquet"))).to_pylist()
    assert sessions and all(s["status"] == "ok" for s in sessions), [s["error"] for s in sessions]
    # the plugin simulator wrote the learner's turns of its condition, as a stateless baseline
    baseline = [s for s in sessions if s["simulator"] == "plain-cot"]
    assert baseline and all(s["kg"] is None for s in baseline)
    assert {s["simulator"] for s in sessions} == {"structured", "plain-cot"}
