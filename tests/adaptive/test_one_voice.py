"""An adaptive run says its sessions in one voice (issue 51): the run command's summary line and
the viewer's run status state the same numbers in the same words (io.rundir.sessions_text), the
planned total being the adaptive design's (decisions.json), not the config's full plan."""

from __future__ import annotations

import warnings

import pytest

from ray_knowsim.adaptive.driver import run_adaptive
from ray_knowsim.cli.run import adaptive_final_line
from ray_knowsim.config import parse_run_config
from ray_knowsim.io.rundir import sessions_text
from ray_knowsim.schema.graph import GraphWarning
from ray_knowsim.view.data import Files
from ray_knowsim.view.discover import discover, index_info, run_info
from ray_knowsim.view.pages_runs import facts

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow, pytest.mark.timeout(900)]


def test_sessions_text_words():
    assert sessions_text(20, 56) == "20 of 56 planned sessions"
    assert sessions_text(20, 28, "decided") == "stopped early: decided after 20 of 28 planned sessions"
    assert sessions_text(28, 28, "decided") == "28 of 28 planned sessions"  # ran its whole design: not early
    assert sessions_text(3, None) == "3 sessions (no plan recorded)"


def test_the_summary_line_and_the_viewer_agree(tmp_path, shared_ref):
    cfg = parse_run_config({
        "name": "voice",
        "tasks": [{"name": "math", "items": str(shared_ref / "paper_subset" / "math.jsonl"),
                   "graphs": str(shared_ref / "iu_cache" / "math.json"), "split": "benchmarking"}],
        "graph_mode": "reference", "levels": ["novice"], "models": {"offline": {"backend": "offline"}},
        "roles": {"user_sim": "offline", "extractor": "offline", "assistant": {"model": "offline"}},
        # a third condition outside the adaptive design: the config's plan (90) is not the design's (60)
        "conditions": [{"name": "weak", "strategy": "minimal"}, {"name": "strong", "strategy": "comprehensive"},
                       {"name": "mid", "strategy": "socratic"}],
        "trials": 1, "seed": 42, "max_turns": 4, "engine": {"shard_size": 15},
        "adaptive": {"decide": "best", "metrics": ["kg"], "alpha": 0.05, "round": {"items": 5, "trials": 1},
                     "conditions": ["weak", "strong"]},
    })
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = run_adaptive(cfg, output=tmp_path / "run", quiet=True)
    # the graphs' warnings (the reference's cycles, duplicate edges) are said once, not every round
    said_graphs = [str(w.message) for w in seen if issubclass(w.category, GraphWarning)]
    assert said_graphs and len(said_graphs) == len(set(said_graphs)), said_graphs
    rec = out.record
    assert rec.status == "decided" and rec.sessions_fixed == 60 and rec.sessions_run < 60
    said = sessions_text(rec.sessions_run, rec.sessions_fixed, rec.status)
    assert said == f"stopped early: decided after {rec.sessions_run} of 60 planned sessions"
    assert said in adaptive_final_line(out)
    files = Files([tmp_path])
    [entry] = [en for en in discover(files) if en.kind == "run"]
    for info in (index_info(files, entry), run_info(files, entry)[0]):
        assert info.status == "complete" and info.planned == 60 and info.committed == rec.sessions_run
        assert info.status_detail.startswith(said) and info.sessions == said
        assert said in facts(info)
