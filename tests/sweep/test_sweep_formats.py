"""A sweep folder of every marker format ever written still reads (tests/sweep/fixtures/: a
folder written by the writer before the one committed-dataset primitive, io/committed.py, with a
piece committed again over another layout's): the same markers, each (setting, conversation) once
with the same values, and nothing a marker names is collected as garbage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ray_knowsim.sweep.commits import collect_garbage, read_commits
from ray_knowsim.sweep.runner import read_rows

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def old_sweep(tmp_path) -> Path:
    root = tmp_path / "sweep_format1"
    shutil.copytree(FIXTURES / "sweep_format1", root)
    return root


def read_back(root: Path) -> dict:
    rows = read_rows(root, columns=["kg"])
    return {"markers": sorted(m.piece.name for m in read_commits(root).markers),
            "rows": [[int(s), int(c), round(float(v), 12)] for s, c, v in rows[["setting", "conversation", "kg"]].itertuples(index=False)]}


def test_an_old_sweep_folder_reads_as_its_release_read_it(old_sweep):
    expected = json.loads((old_sweep / "expected.json").read_text())
    assert read_back(old_sweep) == expected and len(expected["rows"]) > 10


def test_garbage_collection_keeps_what_old_markers_name(old_sweep):
    before = sorted(p for p in old_sweep.rglob("*.parquet"))
    assert collect_garbage(old_sweep, read_commits(old_sweep)) == 0
    assert sorted(p for p in old_sweep.rglob("*.parquet")) == before
    assert read_back(old_sweep) == json.loads((old_sweep / "expected.json").read_text())
