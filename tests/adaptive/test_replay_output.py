"""`ray-knowsim adaptive-replay` prints a short summary by default (issue 51) -- decisions of the
adaptive vs the fixed design and the session share first, lines at most 100 columns, the numbers
those of the record -- ``--json`` prints the record itself, ``--json FILE`` writes it there."""

from __future__ import annotations

import json

import pytest

from ray_knowsim.adaptive.summary import replay_lines, session_share
from ray_knowsim.cli.main import main
from tests.doubles.rundirs import committed_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return committed_run(tmp_path_factory.mktemp("replay_output"), "r", n_sessions=96, seed=1)


def _headline(record) -> list[str]:
    made = sum(d["decided"] for d in record["decisions"])
    share = session_share(record["sessions_run"], record["sessions_fixed"])
    return [f"  adaptive design: {made} of {len(record['decisions'])} decisions with {record['sessions_run']:,} of "
            f"{record['sessions_fixed']:,} sessions ({share:.0%})",
            f"  fixed design of the same pool: {record['fixed_design']['decided']} of {len(record['decisions'])} decisions"]


def test_default_is_a_short_summary_and_json_the_record(run_dir, tmp_path, capsys):
    assert main(["adaptive-replay", str(run_dir), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["sessions_fixed"] == 108 and len(record["decisions"]) == 9
    assert main(["adaptive-replay", str(run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 8 and max(map(len, lines)) <= 100
    assert lines[0] == f"adaptive replay (best): {record['status']} after {len(record['rounds'])} round(s)"
    assert lines[1:3] == _headline(record)
    assert lines[-1].startswith("record (procedure, pair counts, rounds): --json prints it")
    # --json FILE (its meaning before issue 51): the record there, the summary naming it
    assert main(["adaptive-replay", str(run_dir), "--json", str(tmp_path / "r.json")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"record: {tmp_path / 'r.json'}"
    assert json.loads((tmp_path / "r.json").read_text()) == record


def _decision(level: str, metric: str, decided: bool, winner: str | None = None) -> dict:
    return {"task": "math", "knowledge_level": level, "metric": metric, "kind": "best", "decided": decided,
            "winner": winner, "cycle": [], "order": [], "in_play": [] if decided else ["weak", "strong"],
            "after_round": 2 if decided else None, "pairs": []}


def test_the_decisions_made_are_named_and_the_rest_counted():
    levels = ["novice", "intermediate", "advanced", "expert", "phd"]
    decisions = [_decision(lv, m, True, "a-very-long-condition-name:" * 3) for lv in levels for m in ("kg", "co")]
    decisions.append(_decision("novice", "dc", False))
    record = {"spec": {"decide": "best"}, "status": "budget_exhausted", "rounds": [{}, {}], "decisions": decisions,
              "sessions_run": 1234, "sessions_fixed": 5000, "fixed_design": {"decided": 11}, "failure_gaps": []}
    lines = replay_lines(record)
    assert lines[1:3] == _headline(record) and "(25%)" in lines[1]
    assert max(map(len, lines)) <= 100
    assert lines[3].startswith("  math/novice kg: a-very-long-condition-name:")
    assert "  ... and 2 more decided (in the record)" in lines
    assert "  undecided: 1 (1 still in play, 0 with no outcome reachable from the pool's remaining items)" in lines
