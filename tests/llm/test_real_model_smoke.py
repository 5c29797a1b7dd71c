"""A 2-session smoke run of the whole product on the real tiny model: ``ray-knowsim run`` with
SmolLM2-135M (vLLM's OpenAI server) as the learner simulator and the extractor, the offline tutor,
one turn, a 3-IU item. Marker ``llm_cpu``: skipped outside .venv-llm or without the model.

What it checks is what made a real smoke run look fine: SmolLM2's extractor labels every IU alike,
and with 2 answers the sanity checks stayed silent (they waited for 8) while the run ended ``ok``
and ranked its conditions. Here the degenerate labels must warn, on the run's final line and in
``tables/sanity``, naming the extractor; and the checks before spending must have measured the
server's speed and counted the prompts with the model's own tokenizer.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

# GRAPH, ITEM: the same 3-IU item as the turn-loop test
from tests.doubles.llm_cpu import GRAPH, ITEM, SERVED_MODEL_NAME, llm_ray, smollm2_dir, vllm_server  # noqa: F401

# the session's Ray (llm_ray), not a module's: ray_local would shut down the one the engine actor
# pool of the other real-model tests lives on, and start another (a minute on 2 busy cores)
pytestmark = [pytest.mark.llm_cpu, pytest.mark.slow, pytest.mark.usefixtures("llm_ray")]


def smoke_config(tmp_path, base_url: str, model_dir) -> dict:
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": ITEM.id, "problem": ITEM.question,
                                                      "solution": ITEM.reference_answer}) + "\n")
    (tmp_path / "graphs.json").write_text(json.dumps({ITEM.id: GRAPH.to_json_dict()}))
    return {
        "name": "smoke",
        "tasks": [{"name": "math", "items": str(tmp_path / "items.jsonl"), "graphs": str(tmp_path / "graphs.json")}],
        "models": {"smol": {"backend": "http", "base_url": base_url, "model": SERVED_MODEL_NAME, "timeout_s": 3600,
                            "max_attempts": 2, "max_in_flight": 2, "tokenizer": str(model_dir)},
                   "tutor": {"backend": "offline"}},
        "roles": {"user_sim": {"model": "smol", "max_tokens": 768},
                  "extractor": {"model": "smol", "max_tokens": 2048},
                  "judge": None, "assistant": {"model": "tutor", "max_tokens": 512}},
        "conditions": [{"strategy": "minimal"}],
        "levels": ["novice", "intermediate"],  # 2 sessions
        "max_turns": 1,
    }


def test_a_two_session_smoke_run_on_the_real_model_warns_of_degenerate_labels(tmp_path, capsys, vllm_server, smollm2_dir):
    from ray_knowsim.cli.main import main as cli

    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(smoke_config(tmp_path, vllm_server, smollm2_dir)))
    out = tmp_path / "run"
    code = cli(["run", str(path), "-o", str(out), "--quiet"])
    captured = capsys.readouterr()
    print(f"\n[llm_cpu] smoke run exit {code}\n{captured.out}\n{captured.err[-3000:]}")
    manifest = json.loads((out / "manifest.json").read_text())
    preflight = manifest["invocations"][-1]["preflight"]
    smol = preflight["entries"]["smol"]
    print(f"[llm_cpu] preflight: {json.dumps(smol)}\n  warnings: {preflight['warnings']}")
    assert smol["tokens_per_s"] and "speed probe" in smol["speed"]  # measured, not assumed
    assert code == 0, captured.err[-3000:]
    sanity = pd.read_csv(out / "tables" / "sanity.csv")
    print(f"[llm_cpu] sanity:\n{sanity.to_string()}")
    uniform = sanity[sanity["check"] == "uniform_labels"]
    assert len(uniform) == 1 and uniform["component"].iloc[0] == "extractor", sanity.to_string()
    assert "in 2 of 2 answers" in uniform["text"].iloc[0]
    final = captured.out.strip().splitlines()[0]
    assert "extractor: one label for every IU in 2 of 2 answers" in final, final
    from ray_knowsim.io.rundir import RunReader

    rows = RunReader.open(out).sessions.read(["status"]).column("status").to_pylist()
    assert rows == ["ok", "ok"], rows
