"""A sweep's piece commits over the committed-dataset primitive (io/committed.py): a crash at
any step of committing a piece again (tests/doubles/crash.py) leaves the old or the new piece,
and the garbage collection after it changes nothing a reader sees."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from ray_knowsim.sweep.commits import collect_garbage as sweep_garbage, commit_piece, read_commits
from ray_knowsim.sweep.pieces import Piece
from ray_knowsim.sweep.runner import read_rows
from tests.doubles.crash import copy, each_crash

SWEEP_FIXTURE = Path(__file__).parent / "fixtures" / "sweep_format1"


def test_a_crash_at_any_step_of_a_piece_commit_leaves_the_old_or_the_new_piece(tmp_path, monkeypatch):
    base = copy(SWEEP_FIXTURE, tmp_path / "base")
    fingerprint = json.loads((base / "sweep.json").read_text())["fingerprint"]
    piece = Piece(0, 2, 3)
    marker = next(m for m in read_commits(base).markers if m.piece == piece)
    files = marker.files()
    rows, partials = pq.read_table(base / files["rows"]), pq.read_table(base / files["partials"])
    kg = rows.schema.get_field_index("kg")
    changed = rows.set_column(kg, "kg", pc.add(rows.column("kg"), 100.0))

    def values(root):
        return read_rows(root, columns=["kg"], settings=[2])["kg"].tolist()

    before = values(base)
    after = [v + 100.0 for v in before]

    def act(root):
        commit_piece(root, fingerprint, piece, changed, partials)

    def check(root):
        seen = values(root)
        assert seen in (before, after)
        sweep_garbage(root, read_commits(root))
        assert values(root) == seen

    assert each_crash(monkeypatch, lambda: copy(base, tmp_path / "w"), act, check) >= 5
