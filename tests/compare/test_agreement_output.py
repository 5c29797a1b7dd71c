"""`ray-knowsim agreement` prints a short summary by default (issue 51) -- Kendall's tau and
Krippendorff's alpha per metric with their n, each line at most 100 columns, the numbers those of
the tables it wrote -- and with ``--json`` one JSON document holding the same numbers."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ray_knowsim.cli.main import main
from tests.doubles.rundirs import committed_run


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two committed runs of one design (no Ray: the synthetic writer's rows)."""
    root = tmp_path_factory.mktemp("agreement_output")
    return committed_run(root, "a", n_sessions=96, seed=1), committed_run(root, "b", n_sessions=96, seed=1)


def _marginal(out, name):
    df = pd.read_csv(out / f"{name}.csv")
    return df[df["knowledge_level"] == "all"].set_index("metric")


def test_the_default_output_is_a_short_summary_of_the_tables(two_runs, tmp_path, capsys):
    a, b = two_runs
    assert main(["agreement", str(a), str(b), "--out", str(tmp_path / "agr")]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0].startswith("agreement of 2 runs against a; tables in ") and 3 <= len(lines) <= 12
    assert max(len(line) for line in lines) <= 100
    with pytest.raises(json.JSONDecodeError):
        json.loads(printed)
    rank, item = _marginal(tmp_path / "agr", "rank_agreement"), _marginal(tmp_path / "agr", "item_agreement")
    text = " ".join(printed.split())
    assert f"(n {rank['n_items'].iloc[0]} items, {rank['n_conditions'].iloc[0]} conditions)" in text
    assert f"(n {item['n_units'].iloc[0]} cells)" in text
    for metric in rank.index:
        assert f"{metric} {rank.loc[metric, 'tau']:.2f}" in text.split("Krippendorff")[0]
        assert f"{metric} {item.loc[metric, 'alpha']:.2f}" in text.split("Krippendorff")[1]


def test_json_prints_the_same_numbers_and_json_file_writes_them(two_runs, tmp_path, capsys):
    a, b = two_runs
    assert main(["agreement", str(a), str(b), "--out", str(tmp_path / "agr"), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    rank, item = _marginal(tmp_path / "agr", "rank_agreement"), _marginal(tmp_path / "agr", "item_agreement")
    got = {r["metric"]: r for r in record["rank_agreement"]}
    assert set(got) == set(rank.index)
    for metric, r in got.items():
        assert r["tau"] == pytest.approx(rank.loc[metric, "tau"]) and r["n_items"] == rank.loc[metric, "n_items"]
    assert {r["metric"]: r["alpha"] for r in record["item_agreement"]} == pytest.approx(item["alpha"].to_dict())
    assert [r["n_flagged"] for r in record["audit"]] == pd.read_csv(tmp_path / "agr" / "audit.csv")["n_flagged"].tolist()
    # --json FILE: the same record in the file, the summary on the terminal naming it
    assert main(["agreement", str(a), str(b), "--out", str(tmp_path / "agr"), "--json", str(tmp_path / "r.json")]) == 0
    printed = capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text()) == record
    assert printed.startswith("agreement of 2 runs") and printed.splitlines()[-1] == f"record: {tmp_path / 'r.json'}"
    # a folder after --json (a run the optional FILE swallowed) is refused before any work
    assert main(["agreement", "--json", str(a), str(b), "--out", str(tmp_path / "agr3")]) == 2
    assert "put --json last" in capsys.readouterr().err and not (tmp_path / "agr3").exists()
