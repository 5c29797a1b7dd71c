"""`compare` refuses to rank an incomplete run unless told, then flags it on the page and in compare.json."""

from __future__ import annotations

import json

import pytest

from ray_knowsim.cli.main import main
from ray_knowsim.compare.pipeline import IncompleteRuns, compare_runs
from tests.doubles.rundirs import committed_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp_incomplete")
    return {"full": committed_run(root, "full", n_sessions=24, max_turns=3, seed=1),
            "stopped": committed_run(root, "stopped", n_sessions=12, planned=24, status="stopped_on_failures", max_turns=3, seed=1)}


def test_an_incomplete_run_is_not_ranked_unless_told(runs, tmp_path, capsys):
    with pytest.raises(IncompleteRuns, match=r"stopped .*12 of 24 planned sessions committed: stopped by engine.fail_fast"):
        compare_runs([runs["full"], runs["stopped"]], tmp_path / "no")
    assert not (tmp_path / "no").exists()
    assert main(["compare", str(runs["stopped"]), "--out", str(tmp_path / "cli")]) == 2
    assert "--allow-incomplete" in capsys.readouterr().err
    result = compare_runs([runs["stopped"]], tmp_path / "yes", allow_incomplete=True)
    assert len(result.incomplete) == 1 and result.incomplete[0].startswith("stopped (") and not result.tables["leaderboard"].empty
    page = (tmp_path / "yes" / "leaderboard.html").read_text()
    assert "id='incomplete-runs'" in page and "12 of 24 planned sessions" in page
    assert json.loads((tmp_path / "yes" / "compare.json").read_text())["incomplete"] == result.incomplete
    complete = compare_runs([runs["full"]], tmp_path / "full")
    assert complete.incomplete == [] and "incomplete-runs" not in (tmp_path / "full" / "leaderboard.html").read_text()
